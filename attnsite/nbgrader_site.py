"""Sphinx extension: the two editions of the website, from the chapters' nbgrader exercises.

The chapters write exercises in nbgrader's format (CONTRIBUTING.md): reference answers between
``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines, grading-only checks between ``### BEGIN HIDDEN
TESTS`` / ``### END HIDDEN TESTS``, written answers as graded markdown cells; ``attncourse.exercise_cells``
reads them (the markers, and the metadata) for the course and for this extension. The environment variable
``ATTNLIB_EDITION`` (``make book EDITION=instructor``) picks the edition:

* ``student`` (the default, and what the publish workflow deploys): every solution region becomes the
  stub nbgrader hands out (``raise NotImplementedError()``); the outputs of every answer and test cell go (the
  build ran the reference answers: a "tests passed" under a stub would be the instructor's run); hidden tests are
  dropped whole; a written answer cell becomes a line saying it is graded by hand. The ``.ipynb``
  download of a chapter is replaced by the student release ``course/release/<chapter>.ipynb`` (made by
  ``python -m attncourse publish``), and the Colab and Binder buttons open that file in the repository.
* ``instructor``: solutions stay (collapsed by the cells' ``hide-input`` tag) with their rubrics; the
  hidden tests stay, under a comment saying the student release leaves them out; only the marker lines
  go. Host it privately: its downloads and launch buttons are the instructor notebooks.

Registered in ``_config.yml`` under ``sphinx: extra_extensions``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from attncourse.exercise_cells import (
    BEGIN_HIDDEN,
    BEGIN_SOLUTION,
    CODE_STUB,
    RELEASE_FOLDER,
    chapter_number,
    marked_lines,
    nbgrader,
)
from attncourse.exercise_cells import RELEASE_DIR as RELEASE

EDITIONS = ("student", "instructor")
STUB = tuple(CODE_STUB.splitlines())  # what nbgrader's release puts in place
HIDDEN_NOTE = "# Hidden tests: graded, left out of the student release"
WRITTEN_STUB = ("*Written answer: graded by hand. Write it in the chapter's notebook (download it above, or "
                "open it on Colab or Binder).*")
LOGGER = logging.getLogger(__name__)


def edition() -> str:
    """``student`` or ``instructor``, from ``ATTNLIB_EDITION`` (empty means student)."""
    name = os.environ.get("ATTNLIB_EDITION", "") or "student"
    if name not in EDITIONS:
        raise ValueError(f"expected ATTNLIB_EDITION in {EDITIONS}, got {name!r}")
    return name


def strip_nbgrader_markers(source: str, which: str = "student") -> str:
    """A code cell's source as the edition shows it (see the module docstring)."""
    kept = []
    for line, region, marker in marked_lines(source):
        indent = line[: len(line) - len(line.lstrip())]
        if marker == BEGIN_HIDDEN and which == "instructor":
            kept.append(indent + HIDDEN_NOTE)
        elif marker == BEGIN_SOLUTION and which == "student":
            kept += [indent + s for s in STUB]
        elif marker is None and (which == "instructor" or region is None):
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)


def _is_written_answer(cell: dict) -> bool:
    return cell.get("cell_type") == "markdown" and bool(nbgrader(cell).get("solution"))


def student_markdown(notebook_json: str) -> str:
    """The notebook's JSON with each written answer cell's text replaced by ``WRITTEN_STUB``."""
    nb = json.loads(notebook_json)
    for cell in nb.get("cells", []):
        if _is_written_answer(cell):
            cell["source"] = WRITTEN_STUB
    return json.dumps(nb)


def hide_written_answers(app: Sphinx, docname: str, source: list[str]) -> None:
    """``source-read`` handler: the student edition has no model answers (markdown is never executed)."""
    if edition() == "student" and app.env.doc2path(docname).endswith(".ipynb"):
        source[0] = student_markdown(source[0])


def _code_cells(doctree: nodes.document):
    """``(cell container, source literal block)`` for every notebook code cell myst-nb rendered."""
    for container in doctree.findall(nodes.container):
        if container.get("nb_element") == "cell_code":
            for inner in container.findall(nodes.container):
                if inner.get("nb_element") == "cell_code_source":
                    yield container, next(iter(inner.findall(nodes.literal_block)))


def rewrite_exercise_cells(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read`` handler: rewrite code cells that carry nbgrader markers for the edition."""
    which = edition()
    stem = _chapter_stem(app.env.docname)
    if stem is not None:  # the page's launch buttons depend on its release: rebuild it when that appears or changes
        app.env.note_dependency(str(RELEASE / f"{stem}.ipynb"))
    for cell, block in list(_code_cells(doctree)):
        text = block.astext()
        markers = {marker for _, _, marker in marked_lines(text) if marker}
        graded = grading_role(cell)
        if graded:
            cell["classes"].append(f"attnlib-exercise-{graded}")
        if which == "student" and (graded or BEGIN_SOLUTION in markers):
            drop_outputs(cell)
        if not markers:
            continue
        cleaned = strip_nbgrader_markers(text, which)
        block.rawsource = cleaned
        block[:] = [nodes.Text(cleaned)]


def grading_role(cell: nodes.Element) -> str | None:
    """``'answer'`` for an nbgrader answer cell (``solution``), ``'tests'`` for a graded test cell, else None.

    The build executes the chapters with the reference answers in place: what such a cell printed ("Exercise
    1.1: tests passed", the points) is the instructor's run, which the student edition must not show under the
    stub a student gets. The instructor edition keeps it.
    """
    grading = (cell.get("cell_metadata") or {}).get("nbgrader") or {}
    if grading.get("solution"):
        return "answer"
    return "tests" if grading.get("grade") else None


def drop_outputs(cell: nodes.Element) -> None:
    """Remove a code cell's outputs (what the reference run printed or drew)."""
    for output in [c for c in cell.children if c.get("nb_element") == "cell_code_output"]:
        cell.remove(output)


def _chapter_stem(pagename: str) -> str | None:
    """``book/07_at_scale`` -> ``07_at_scale`` when the page is a chapter, else None."""
    stem = pagename.rsplit("/", 1)[-1]
    return stem if chapter_number(stem) is not None else None


def student_launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict, doctree) -> None:
    """``html-page-context`` (after sphinx-book-theme's): Colab and Binder open the student release."""
    stem = _chapter_stem(pagename)
    if edition() != "student" or stem is None:
        return
    if not (RELEASE / f"{stem}.ipynb").is_file():
        LOGGER.warning(f"expected the student release {RELEASE / stem}.ipynb: run `make student` and commit it")
        return
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            if button.get("url", "").startswith("http"):  # Colab, Binder, JupyterHub; not the download
                button["url"] = button["url"].replace(f"{pagename}.ipynb", f"{RELEASE_FOLDER}/{stem}.ipynb")


def student_downloads(app: Sphinx, exception) -> None:
    """``build-finished``: each chapter's ``.ipynb`` download is the student release."""
    if exception is not None or edition() != "student" or app.builder.format != "html":
        return
    for source in sorted(Path(app.outdir, "_sources").rglob("*.ipynb")):
        release = RELEASE / source.name
        if _chapter_stem(source.stem) and release.is_file():
            shutil.copyfile(release, source)


def _record_edition(app: Sphinx, config) -> None:
    """``config-inited``: the edition as an ``env`` config value, so switching it re-reads every page."""
    config.nbgrader_site_edition = edition()


def setup(app: Sphinx) -> dict:
    """Register the edition's rewrites."""
    edition()  # fail early on an unknown edition
    app.add_config_value("nbgrader_site_edition", "student", "env")
    app.connect("config-inited", _record_edition)
    app.connect("source-read", hide_written_answers)
    app.connect("doctree-read", rewrite_exercise_cells)
    app.connect("html-page-context", student_launch_buttons, priority=600)
    app.connect("build-finished", student_downloads)
    return {"version": "2.0", "parallel_read_safe": True, "parallel_write_safe": True}
