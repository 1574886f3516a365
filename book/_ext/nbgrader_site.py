"""Sphinx extension: show nbgrader exercises cleanly on the website.

The chapters write exercises in nbgrader's format (CONTRIBUTING.md). The reference answer sits
between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` lines, and grading-only checks between
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS``. On the website a reader should see a plain
function with its (collapsed, ``hide-input``) solution and the tests they can run themselves, so
this extension rewrites every rendered code cell's source:

* the solution marker lines are dropped; the solution code stays (collapsed by the cell's tag);
* hidden-test regions are dropped whole, markers included. They exist so that a grader checks
  cases the student did not see; on the page they would add noise below every exercise and show
  a class the grading cases. They are no secret (the repository and the page's own .ipynb
  download have them); the student release made by ``make student`` is what withholds them.

Only what the page shows changes: the notebook itself, its ``.ipynb`` download and the launch
buttons are untouched. Registered in ``_config.yml`` under ``sphinx: local_extensions``.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_BEGIN = "### BEGIN HIDDEN TESTS"
HIDDEN_END = "### END HIDDEN TESTS"


def strip_nbgrader_markers(source: str) -> str:
    """Code cell source without solution marker lines and without hidden-test regions."""
    kept, hidden = [], False
    for line in source.splitlines():
        marker = line.strip()
        if marker == HIDDEN_BEGIN:
            hidden = True
        elif marker == HIDDEN_END:
            hidden = False
        elif not hidden and marker not in SOLUTION_MARKERS:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)


def _code_sources(doctree: nodes.document):
    """The literal blocks myst-nb renders for notebook code cell sources."""
    for container in doctree.findall(nodes.container):
        if container.get("nb_element") == "cell_code_source":
            yield from container.findall(nodes.literal_block)


def strip_markers_from_doctree(app: Sphinx, doctree: nodes.document) -> None:
    """``doctree-read`` handler: rewrite code cells that carry nbgrader markers."""
    for block in _code_sources(doctree):
        text = block.astext()
        if "### BEGIN " not in text and "### END " not in text:
            continue
        cleaned = strip_nbgrader_markers(text)
        block.rawsource = cleaned
        block[:] = [nodes.Text(cleaned)]


def setup(app: Sphinx) -> dict:
    """Register the doctree rewrite."""
    app.connect("doctree-read", strip_markers_from_doctree)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
