"""book/instructors.md states each chapter's reading time; the chapter's text must fit it.

The count is the one the page states: every word of the chapter's Markdown cells (quick checks and exercise
statements included; code blocks and HTML comments left out) at about 120 words a minute. A stated time may round
up to the next five minutes, not hide more than a few minutes of reading, nor promise ten minutes more than there is.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

BOOK = Path(__file__).resolve().parents[2] / "book"
WORDS_PER_MINUTE = 120
ROW = re.compile(r"^\| \[[^\]]+\]\((\w+)\.ipynb\)(?:[^|]*\|){2} (\d+) min \|", re.M)  # chapter, reading column
OPTIONAL = re.compile(r"\]\((appendix_\w+)\.ipynb\)[^;)]*; (\d+) min\)")  # an optional page's time in a row


def stated() -> dict[str, int]:
    text = (BOOK / "instructors.md").read_text(encoding="utf-8")
    return {**dict(ROW.findall(text)), **dict(OPTIONAL.findall(text))}


def words(stem: str) -> int:
    cells = json.loads((BOOK / f"{stem}.ipynb").read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return len(re.sub(r"```.*?```|<!--.*?-->", "", text, flags=re.S).split())


def test_every_chapter_and_optional_page_has_a_stated_time():
    pages = {p.stem for p in BOOK.glob("*.ipynb")} - {"accessibility"}
    assert set(stated()) == pages, f"pages without a reading time: {pages - set(stated())}"


@pytest.mark.parametrize("stem", sorted(stated()))
def test_the_text_fits_the_stated_reading_time(stem):
    minutes, promised = words(stem) / WORDS_PER_MINUTE, int(stated()[stem])
    assert promised - 10 <= minutes <= promised + 2.5, (
        f"{stem}: {words(stem):,} words take about {minutes:.0f} min at {WORDS_PER_MINUTE} words a minute; "
        f"book/instructors.md says {promised} min")
