"""Every glued float carries at most the digits the page shows it with (CONTRIBUTING.md, "Numbers every CPU
reproduces").

A float's full repr ends in float noise, and which noise depends on the CPU's vector instructions, so a stored
``0.9463535155513526`` is a promise only the machine that executed the chapter keeps (issue #32: on an AVX-512
CPU it computes ``...528``). ``attnlib.glue.glue`` stores floats rounded to ``digits``; this test reads what the
chapters stored (the papermill records of ``book/*.ipynb``) and the ``{glue}`` roles that show them (in every
chapter's markdown and ``book/*.md``), and checks each stored float against the precision of each role.
"""

from __future__ import annotations

import collections
import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from course import quiz
from course.markup import FENCE

BOOK = Path(__file__).resolve().parents[2] / "book"
ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([^`:]+)(?::([^`]*))?`")
FIXED = re.compile(r",?\.(\d+)([f%])")  # the format specs the book uses for floats: .2f, ,.0f, .1%
CHAPTERS = sorted(BOOK.glob("*.ipynb"))


def stored_values() -> dict[str, tuple[str, str]]:
    """Every glued value's ``text/plain``: ``{name: (text, "chapter cell-id")}``."""
    found = {}
    for path in CHAPTERS:
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            for output in cell.get("outputs", []):
                scrapbook = output.get("metadata", {}).get("scrapbook")
                text = scrapbook and output["data"].get(scrapbook["mime_prefix"] + "text/plain")
                if text is not None:
                    found[scrapbook["name"]] = ("".join(text), f"{path.stem} {cell['id']}")
    return found


def quiz_numbers(text: str):
    """``(name, spec)`` of every glued value a ``:type: number`` quick check asks for (course/quiz.py): the page
    shows it with that spec, as a role would."""
    for fence in FENCE.finditer(text):
        if fence["name"] == "quiz":
            options, body = quiz.split_options(fence["body"])
            check = quiz.parse(fence["arg"], body, options)
            if check.kind == "number":
                yield from (quiz.number_key(choice) for choice in check.choices)


def roles() -> dict[str, set[str]]:
    """The format spec of every ``{glue}`` role and number check, by glued name (``""`` where it has none)."""
    shown = collections.defaultdict(set)
    for path in [*CHAPTERS, *BOOK.glob("*.md")]:
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text(encoding="utf-8")
        for name, spec in [*ROLE.findall(text), *quiz_numbers(text)]:
            shown[name].add(spec or "")
    return shown


def decimals(text: str) -> int | None:
    """How many decimals a stored float's repr has (``None`` when ``text`` is not a float)."""
    if not re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", text) or not re.search(r"[.e]", text):
        return None
    # a repr with an exponent counts its decimals too: round(4.1e-05, 5) is stored as "4e-05", 5 decimals
    return max(0, -Decimal(text).normalize().as_tuple().exponent)


def shown_decimals(spec: str) -> int | None:
    """The decimals a role's format spec shows (``None``: the spec shows the stored text as it is)."""
    fixed = FIXED.fullmatch(spec)
    if not fixed:
        return None
    return int(fixed.group(1)) + (2 if fixed.group(2) == "%" else 0)


STORED = stored_values()
ROLES = roles()
MOST_SHOWN = max(d for specs in ROLES.values() for s in specs if (d := shown_decimals(s)) is not None)


def test_the_book_glues_floats_and_shows_them():
    floats = [name for name, (text, _) in STORED.items() if decimals(text) is not None]
    assert len(floats) > 50 and MOST_SHOWN >= 2, (len(floats), MOST_SHOWN)
    assert not set(ROLES) - set(STORED), f"roles show names no chapter glues: {sorted(set(ROLES) - set(STORED))}"


@pytest.mark.parametrize("name", sorted(STORED))
def test_a_glued_float_has_no_more_digits_than_its_roles_show(name):
    text, where = STORED[name]
    places = decimals(text)
    if places is None:
        return  # an int, a string, a figure: not float noise
    specs = ROLES.get(name, set())
    limits = {shown_decimals(s) for s in specs} - {None}
    allowed = max(limits) if limits else MOST_SHOWN
    assert places <= allowed, (
        f"{where}: {name} is stored as {text} ({places} decimals) but "
        + (f"the page shows it with {sorted(specs)}" if specs else f"no page shows it (at most {MOST_SHOWN} kept)")
        + f"; glue it with digits={allowed}")
