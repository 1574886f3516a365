"""``make pdf``: the print edition of the built site (attnsite/print_book.py), student and instructors'.

Prints every page of ``_toc.yml`` from the built site with Chromium into one PDF per edition (of the instructors'
edition, the pages it changes: those with solutions) and reads the PDFs back: each chapter's title is on its pages
(and in the bookmarks), every figure of the page is printed, no code block or view is cut off, and solutions appear
only in the instructors' edition. The text
of the pages comes from poppler's ``pdftotext`` (Debian ``poppler-utils``, installed by ``make test`` with
Chromium): 2 CPU-s for both editions, where pypdf took 70; pypdf reads the bookmarks and counts the images.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader

from tests import browser_utils as bu
from tests.browser_utils import print_book  # attnsite/print_book.py

pytestmark = pytest.mark.browser

SITE = Path(os.environ.get("ATTNLIB_SITE_HTML", bu.REPO / "_build" / "html"))
INSTRUCTOR = bu.REPO / "_build" / "instructor"  # where `make pdf` builds the instructor edition (Makefile)
OUTPUT_IMAGE = re.compile(r'<img [^>]*src="(?:\.\./)*_images/[^"]+\.png"')


@pytest.fixture(scope="module")
def editions(tmp_path_factory):
    if not (SITE / "index.html").is_file():
        pytest.fail(f"expected the built book in {SITE}: run `make book` first", pytrace=False)
    bu.require_chromium()
    if shutil.which("pdftotext") is None:
        pytest.fail("pdftotext is not installed: `make test-packages` (as root) or `sudo apt-get install "
                    "poppler-utils`", pytrace=False)
    folder = tmp_path_factory.mktemp("pdf")
    out = {}
    for name, instructor in (("student", False), ("instructor", True)):
        site = instructor_site() if instructor else SITE
        pages = changed_pages(SITE, site) if instructor else None  # the student print covers the rest
        path = folder / f"{name}.pdf"
        report = print_book.print_book(site, path, instructor=instructor, pages=pages)
        out[name] = (Printed(path), report)
    return out


ASSET_VERSION = re.compile(r"\?(v|digest)=[0-9a-f]+")


def changed_pages(student: Path, instructor: Path) -> list[str]:
    """The toc pages whose instructor edition differs from the student site (the solutions it adds): a page built
    the same in both prints the same, so the student edition's print already shows it whole and uncut."""
    def text(site: Path, page: str) -> str:
        return ASSET_VERSION.sub("", (site / page).read_text(encoding="utf-8"))
    return [page for page in print_book.toc_pages() if text(student, page) != text(instructor, page)]


def instructor_site() -> Path:
    """The instructor edition, built as `make pdf` builds it, in the same folder (the published site is the
    student edition). Like `make book`, the build is incremental: seconds when the chapters did not change."""
    env = {**os.environ, "ATTNLIB_EDITION": "instructor"}
    done = subprocess.run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(bu.REPO),
                           "--warningiserror", "--keep-going", "--path-output", str(INSTRUCTOR)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert done.returncode == 0, f"the instructor edition did not build:\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}"
    return INSTRUCTOR / "_build" / "html"


class Printed(PdfReader):
    """A printed edition; the text of every page is extracted once, by ``pdftotext``, and kept."""

    def __init__(self, path: Path):
        super().__init__(path)
        done = subprocess.run(["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, timeout=300,
                              check=True)
        pages = done.stdout.decode("utf-8").split("\f")  # a form feed ends each page
        self._texts = [" ".join(text.split()) for text in pages[:len(self.pages)]]
        assert len(self._texts) == len(self.pages), f"pdftotext read {len(pages)} pages of {len(self.pages)}"

    def page_text(self, index: int) -> str:
        return self._texts[index]

    def image_count(self, index: int) -> int:
        """The images drawn on a page: its image XObjects, and those inside its form XObjects (counted from
        the resource dictionaries: pypdf's ``page.images`` decodes every image to count it)."""
        def count(resources, seen) -> int:
            found = 0
            xobjects = (resources or {}).get("/XObject") or {}
            for name in xobjects:
                xobject = xobjects[name].get_object()
                if id(xobject) in seen:
                    continue
                seen.add(id(xobject))
                if xobject.get("/Subtype") == "/Image":
                    found += 1
                elif xobject.get("/Subtype") == "/Form":
                    found += count(xobject.get("/Resources"), seen)
            return found

        return count(self.pages[index].get("/Resources"), set())


def _text(reader: Printed, row: dict) -> str:
    return " ".join(reader.page_text(i) for i in range(row["first_page"], row["first_page"] + row["pages"]))


def _words(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def test_toc_order_and_bookmarks(editions):
    reader, report = editions["student"]
    assert [row["page"] for row in report] == print_book.toc_pages()
    assert [item.title for item in reader.outline] == [row["title"] for row in report]
    assert len(reader.pages) == sum(row["pages"] for row in report) > len(report)


@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_every_chapter_title_is_printed(editions, edition):
    reader, report = editions[edition]
    for row in report:
        assert row["ready"], f"{row['page']}: printed before widgets, math and views were drawn"
        title = _words(row["title"])
        assert title and title in _words(_text(reader, row)), f"{row['page']}: title {row['title']!r} not on its pages"


def test_every_figure_is_printed(editions):
    reader, report = editions["student"]
    for row in report:
        expected = len(OUTPUT_IMAGE.findall((SITE / row["page"]).read_text(encoding="utf-8")))
        pages = range(row["first_page"], row["first_page"] + row["pages"])
        printed = sum(reader.image_count(i) for i in pages)
        assert printed >= expected, f"{row['page']}: {printed} images printed, the page has {expected} figures"


@pytest.mark.parametrize("edition", ["student", "instructor"])
def test_nothing_is_cut_off(editions, edition):
    _, report = editions[edition]
    cut = {row["page"]: row["cut_off"] for row in report if row["cut_off"]}
    assert cut == {}, f"code or views wider than the printed page: {cut}"


def test_solutions_only_in_the_instructors_edition(editions):
    """Every chapter's instructor edition differs from the student site (it is printed: changed_pages) and prints
    solutions the student edition does not; the student site holds no solutions to remove."""
    (student, students), (instructor, instructors) = editions["student"], editions["instructor"]
    chapters = [row for row in students if re.match(r"book/\d\d_", row["page"])]
    theirs_by_page = {row["page"]: row for row in instructors}
    assert chapters and all(row["page"] in theirs_by_page for row in chapters), sorted(theirs_by_page)
    assert all(row["removed"] == 0 for row in instructors)
    for row in chapters:
        ours, theirs = _text(student, row), _text(instructor, theirs_by_page[row["page"]])
        assert theirs.count("Solution") > ours.count("Solution"), f"{row['page']}: no solution added"
        assert len(theirs) > len(ours)


def test_the_live_section_prints_a_note_not_its_controls(editions):
    reader, report = editions["student"]
    row = next(r for r in report if r["page"] == "book/06_real_model.html")
    text = _text(reader, row)
    assert "In print: the website runs this model on a sentence the reader types" in text
    assert "Nothing has been downloaded yet" not in text and "Press Run" not in text
