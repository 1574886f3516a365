"""Every figure the chapters draw, as the build computed them: each has a true description that leads with its
message, one colour bar per heatmap (or one shared), and cell numbers legible on a phone.

The chapters are committed without outputs (issue #42): these read each chapter as the build executed it, from its
execution cache (``attnsite.execution.executed``), so they run after the build (``make test``'s site stage).
"""

from __future__ import annotations

import base64
import functools
import html as html_module
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

from PIL import Image

from attnlib.views import alt_text, images, plots
from attnsite import a11y
from attnsite.execution import executed
from tests.lib.test_plots import alt_problems

BOOK = Path(__file__).resolve().parents[2] / "book"


@functools.cache
def _executed(path: Path):
    return executed(path)


def executed_chapters(pattern: str):
    """``(path, notebook)`` of every notebook of ``book/`` matching ``pattern``, with its outputs."""
    return [(path, _executed(path)) for path in sorted(BOOK.glob(pattern))]


def _chapter_images():
    """(chapter, cell id, PNG bytes, alt) of every figure a chapter draws, and of its explorers' states."""
    for path, notebook in executed_chapters("0*.ipynb"):
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                data = output.get("data", {})
                if "image/png" in data:
                    alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
                    yield path.stem, cell.get("id"), base64.b64decode(data["image/png"]), alt


def _explorer_states():
    """(chapter, [alt of each state]) of every explorer a chapter stores (widget state)."""
    for path, notebook in executed_chapters("0*.ipynb"):
        widgets = notebook["metadata"].get("widgets", {})
        text = json.dumps(widgets, ensure_ascii=False)
        alts = [html_module.unescape(a) for a in re.findall(r'(?:alt|aria-label)=\\"(.*?)\\"', text)]
        yield path.stem, [a for a in alts if len(a) > 40]


def test_every_chapter_figure_has_a_true_description():
    checked = 0
    for chapter, cell, _, alt in _chapter_images():
        assert alt, f"{chapter} cell {cell}: no description"
        assert alt_problems(alt) == [], f"{chapter} cell {cell}: {alt_problems(alt)} in {alt[:300]}"
        checked += 1
    for chapter, alts in _explorer_states():
        for alt in alts:
            assert alt_problems(alt) == [], f"{chapter} explorer state: {alt_problems(alt)} in {alt[:300]}"
        assert len(alts) == len(set(alts)), f"{chapter}: two explorer states described identically"
    assert checked > 30


def test_every_chapter_figure_has_one_colour_bar_per_heatmap_or_one_shared_beside_them():
    counted = 0
    for chapter, cell, png, _ in _chapter_images():
        census = plots.png_text(png).get(images.COLORBARS_KEY)
        assert census, f"{chapter} cell {cell}: figure drawn without its colour-bar census"
        census = json.loads(census)
        assert census["colorbars"] <= census["heatmaps"], f"{chapter} cell {cell}: stray colour bars {census}"
        assert census["overlaps"] == [], f"{chapter} cell {cell}: a colour bar drawn over a panel {census}"
        counted += 1
    assert counted > 30


def test_every_chapter_figure_writes_cell_numbers_legible_on_a_phone():
    """Cell numbers are >= 9 CSS px at the figure's own size; attnsite/a11y.py keeps a figure at that size on
    a 390 px phone (it scrolls in its box) whenever fitting it into the column would shrink them below 9 px."""
    numbered = 0
    for chapter, cell, png, _ in _chapter_images():
        chunks = plots.png_text(png)
        if images.CELL_TEXT_KEY not in chunks:
            continue
        px = float(chunks[images.CELL_TEXT_KEY])
        assert px >= a11y.LEGIBLE_PX, f"{chapter} cell {cell}: cell numbers {px} CSS px"
        width = -(-Image.open(io.BytesIO(png)).size[0] // int(chunks[images.SCALE_KEY]))
        shown = px * (1 if a11y.shrinks_illegibly(width, px) else min(1, a11y.PHONE_COLUMN / width))
        assert shown >= a11y.LEGIBLE_PX, f"{chapter} cell {cell}: {shown:.1f} CSS px on a phone"
        numbered += 1
    assert numbered > 10
    assert a11y.shrinks_illegibly(711, 9) and not a11y.shrinks_illegibly(300, 9)
    assert not a11y.shrinks_illegibly(900, None)  # no numbers in its cells: it may shrink


class _Figures(HTMLParser):
    """The attributes of every <img> and inline <svg role="img"> in an HTML string."""

    def __init__(self):
        super().__init__()
        self.found: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" or (tag == "svg" and attrs.get("role") == "img"):
            self.found.append({"alt": attrs.get("alt", attrs.get("aria-label")),
                               "message": attrs.get(images.MESSAGE_ATTRIBUTE)})


def _strings(node):
    if isinstance(node, str):
        yield node
    for value in node.values() if isinstance(node, dict) else node if isinstance(node, list) else ():
        yield from _strings(value)


def chapter_figure_messages():
    """(notebook, where, message, alt) of every figure a chapter or the background page stores: each cell's
    PNG (message from its ``attnlib-message`` chunk) and each explorer state's image (from its attribute)."""
    for path, notebook in executed_chapters("*.ipynb"):
        for cell in notebook["cells"]:
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    chunks = plots.png_text(base64.b64decode(output["data"]["image/png"]))
                    yield path.stem, f"cell {cell.get('id')}", chunks.get(images.MESSAGE_KEY), chunks[images.ALT_KEY]
        for text in _strings(notebook["metadata"].get("widgets", {})):
            if "<img" in text or "<svg" in text:
                parser = _Figures()
                parser.feed(text)
                for figure in parser.found:
                    yield path.stem, "explorer state", figure["message"], figure["alt"]


def test_every_chapter_figure_leads_with_its_message():
    seen = 0
    for notebook, where, message, alt in chapter_figure_messages():
        assert message, f"{notebook} {where}: no message (say(fig, '...') in the cell that draws it): {alt[:120]}"
        assert alt_text.check_message(message) == message
        assert alt.startswith(message + " ") and len(alt) > len(message) + 10, f"{notebook} {where}: {alt[:200]}"
        seen += 1
    assert seen > 50
