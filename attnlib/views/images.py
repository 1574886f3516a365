"""Images of figures for pages and notebooks: described 2x palette PNGs, and inline SVG for charts.

Every figure the chapters show goes through ``figure_png``: a 2x palette PNG (crisp on high-density screens,
light in a page) that carries its own text alternative (``attnlib.views.alt_text``) in a PNG text chunk and in
the output's metadata. Explorer states (``figure_to_html``) are chosen by kind: a chart of lines, bars and a few
points is inline SVG (text stays text, a few kB); a figure holding an image (a heatmap) or many points is the
described PNG.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re

import matplotlib.pyplot as plt
import numpy as np
from IPython import get_ipython
from matplotlib.figure import Figure
from PIL import Image
from PIL.PngImagePlugin import PngInfo

from attnlib.views.alt_text import describe_figure, is_colorbar, message_of, summarize_figure, value_meshes

SCALE = 2  # image pixels per CSS pixel: 2x PNGs stay sharp on high-density screens
COLORS = 128  # a palette PNG's colours (about a quarter of a full-colour PNG's bytes)
ALT_KEY = "Description"  # the PNG text chunk (a registered keyword) that holds the figure's description
SCALE_KEY = "attnlib-scale"  # PNG text chunk: pixels per CSS pixel, so a page shows the image at its size
CELL_TEXT_KEY = "attnlib-cell-text-px"  # PNG text chunk: smallest number written in a heatmap cell, CSS px
TEXT_KEY = "attnlib-text-px"  # PNG text chunk: the figure's smallest text (ticks, labels, legend, cells), CSS px
TEXT_ATTRIBUTE = "data-attnlib-text-px"  # the same on an explorer state's <img> (and on the site's figures)
COLORBARS_KEY = "attnlib-colorbars"  # PNG text chunk: ``colour_bars``' census (JSON), read by the tests
MESSAGE_KEY = "attnlib-message"  # PNG text chunk: the figure's message (``alt_text.say``), the alt's first sentence
MESSAGE_ATTRIBUTE = "data-attnlib-message"  # the same on an explorer state's <img> or inline <svg>


def _quantize(png: bytes, colors: int, info: PngInfo | None = None) -> bytes:
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colors, dither=Image.Dither.NONE)
    compact = io.BytesIO()
    image.save(compact, format="png", optimize=True, pnginfo=info)
    return compact.getvalue()


def palette_png(fig, dpi: int = 72, colors: int = COLORS) -> bytes:
    """PNG bytes of a figure reduced to at most ``colors`` colours: about a quarter of a full-colour PNG.

    Every figure and explorer state is stored inline in its web page, so this keeps pages light.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return _quantize(buffer.getvalue(), colors)


def colour_bars(fig, draw: bool = True) -> dict:
    """What a figure's colour scales look like: ``{"heatmaps", "colorbars", "overlaps"}``.

    ``heatmaps``: panels showing a matrix as colours (``imshow``, or ``pcolormesh`` on the data's coordinates);
    ``colorbars``: colour-bar axes;
    ``overlaps``: colour bars whose box covers part of a panel's box (a bar drawn over a figure). One bar
    per heatmap, or one shared bar, placed beside the panels, is ``colorbars <= heatmaps`` and no overlap.
    ``draw=False``: the figure was drawn since it last changed (the places are read from that draw).
    """
    if draw:
        fig.draw_without_rendering()
    bars = [ax for ax in fig.axes if is_colorbar(ax)]
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison and not is_colorbar(ax)]
    heatmaps = [ax for ax in panels
                if any(np.ndim(image.get_array()) == 2 for image in ax.images) or value_meshes(ax)]
    overlaps = []
    for i, bar in enumerate(bars):
        box = bar.get_position()
        for j, panel in enumerate(panels):
            other = panel.get_position()
            width = min(box.x1, other.x1) - max(box.x0, other.x0)
            height = min(box.y1, other.y1) - max(box.y0, other.y0)
            if width > 1e-3 and height > 1e-3:
                overlaps.append([i, j])
    return {"heatmaps": len(heatmaps), "colorbars": len(bars), "overlaps": overlaps}


def cell_text_px(fig, dpi: int = 72) -> float | None:
    """The smallest number written inside a heatmap's cells, in CSS pixels once the figure is shown at ``dpi``;
    None when no cell carries a number."""
    sizes = [text.get_fontsize() * dpi / 72 for ax in fig.axes if ax.images for text in ax.texts
             if text.get_visible() and text.get_text()]
    return min(sizes) if sizes else None


def _texts(fig):
    """Every text a figure draws: its own, and each visible axes' title, labels, tick labels (only ticks in view),
    annotations and legend."""
    yield from fig.texts
    for legend in fig.legends:
        yield from [legend.get_title(), *legend.get_texts()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        yield from [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                yield from [*axis.get_ticklabels(), *axis.get_ticklabels(minor=True)]
        if ax.get_legend() is not None:
            yield from [ax.get_legend().get_title(), *ax.get_legend().get_texts()]


def text_px(fig, dpi: int = 72, draw: bool = True) -> float | None:
    """The smallest text the figure draws, in CSS pixels once it is shown at ``dpi`` at its own size (a page that
    shows it narrower scales this down: the browser tests measure that); None for a figure without text.
    ``draw=False``: the figure was drawn since it last changed (its tick labels are those of that draw)."""
    if draw:
        fig.draw_without_rendering()
    sizes = [text.get_fontsize() * dpi / 72 for text in _texts(fig) if text.get_visible() and text.get_text().strip()]
    return min(sizes) if sizes else None


def figure_png(fig, dpi: int = 72, colors: int = COLORS, scale: int = SCALE,
               alt: str | None = None) -> tuple[bytes, dict]:
    """(PNG, metadata) of ``fig`` drawn at ``scale`` x ``dpi``, to be shown at ``dpi``.

    The metadata is Jupyter's for an image output: ``width``/``height`` in CSS pixels and ``alt``
    (``describe_figure`` unless given). The PNG carries both too (text chunks ``Description`` and ``attnlib-scale``),
    and its smallest text in CSS px (``attnlib-text-px``, ``text_px``), so the text alternative travels
    with the image wherever it goes; the figure's message (``alt_text.say``), when it has one, also on its own
    (``attnlib-message``).
    """
    fig.draw_without_rendering()  # laid out, no pixels: savefig draws those
    return _drawn_png(fig, dpi, colors, scale, describe_figure(fig, draw=False) if alt is None else alt)


def _drawn_png(fig, dpi: int, colors: int, scale: int, alt: str) -> tuple[bytes, dict]:
    """``figure_png`` of a figure drawn since it last changed: what the PNG carries is read from that draw, and
    the figure is drawn again only by ``savefig`` (it draws twice: to find the tight crop, then into the PNG)."""
    info = PngInfo()
    info.add_text(ALT_KEY, alt)
    info.add_text(SCALE_KEY, str(scale))
    info.add_text(COLORBARS_KEY, json.dumps(colour_bars(fig, draw=False)))
    if message_of(fig):
        info.add_text(MESSAGE_KEY, message_of(fig))
    if cell_text_px(fig, dpi) is not None:
        info.add_text(CELL_TEXT_KEY, f"{cell_text_px(fig, dpi):g}")
    smallest = text_px(fig, dpi, draw=False)
    if smallest is not None:
        info.add_text(TEXT_KEY, f"{smallest:g}")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi * scale, bbox_inches="tight")
    png = _quantize(buffer.getvalue(), colors, info)
    width, height = Image.open(io.BytesIO(png)).size
    return png, {"width": -(-width // scale), "height": -(-height // scale), "alt": alt}


def png_text(png: bytes) -> dict[str, str]:
    """The text chunks of a PNG (e.g. ``Description``, the alt text ``figure_png`` wrote)."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        return dict(getattr(image, "text", {}))


_SVG_ID = re.compile(r'\bid="([^"]+)"')


def _message_attribute(fig) -> str:
    message = message_of(fig)
    return f' {MESSAGE_ATTRIBUTE}="{html.escape(message)}"' if message else ""


def figure_svg(fig, alt: str) -> str:
    """``fig`` as inline SVG markup (text as text), named by ``alt`` for screen readers (its message, if any, in
    ``data-attnlib-message`` too).

    Its ids get a prefix made from its content, so several figures on one page never share one.
    """
    buffer = io.StringIO()
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "attnlib", "svg.image_inline": True}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text[text.index("<svg"):], flags=re.DOTALL)
    prefix = "f" + hashlib.sha256(text.encode()).hexdigest()[:8] + "-"
    for name in set(_SVG_ID.findall(text)):
        text = text.replace(f'id="{name}"', f'id="{prefix}{name}"').replace(f"#{name})", f"#{prefix}{name})")
        text = text.replace(f'href="#{name}"', f'href="#{prefix}{name}"')
    label = html.escape(alt)
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}"{_message_attribute(fig)} '
                                 'style="max-width:100%;height:auto" ', 1)


MAX_SVG_POINTS = 400  # markers and vertices a chart may hold and still be inline SVG (a few kB of text)


def raster_kind(fig) -> bool:
    """Whether ``fig`` is best stored as a PNG: it holds an image (a heatmap, ``imshow``) or more than
    ``MAX_SVG_POINTS`` markers and vertices (a dense scatter), which SVG would write out one by one."""
    points = 0
    for ax in fig.axes:
        if is_colorbar(ax):
            continue
        if ax.images:
            return True
        points += sum(len(line.get_xdata()) for line in ax.lines)
        points += sum(len(c.get_offsets()) + sum(len(p.vertices) for p in c.get_paths()) for c in ax.collections)
    return points > MAX_SVG_POINTS


def figure_to_html(fig, dpi: int = 72, alt: str | None = None) -> str:
    """The figure as inline HTML with its text alternative (closes the figure), by kind (``raster_kind``):
    an ``<img>`` of a described 2x palette PNG for heatmaps and dense scatters, otherwise inline SVG (line and
    bar charts: text stays text, sharp at any zoom). Only the chosen format is drawn.

    The text alternative is the figure's message (``alt_text.say``: one per state, or the explorer's shared one),
    then ``alt`` when one is given (a caller's title such as "weights at T = 0.5"), then the data summary.
    """
    fig.draw_without_rendering()  # laid out, no pixels: the summary and what a PNG carries are read from it
    parts = [message_of(fig), alt.rstrip(". ") + "." if alt is not None else None, summarize_figure(fig, draw=False)]
    alt = " ".join(part for part in parts if part)
    if not raster_kind(fig):
        svg = figure_svg(fig, alt)
        plt.close(fig)
        return svg
    png, meta = _drawn_png(fig, dpi, COLORS, SCALE, alt)
    plt.close(fig)
    data = base64.b64encode(png).decode("ascii")
    smallest = png_text(png).get(TEXT_KEY)
    text = f' {TEXT_ATTRIBUTE}="{smallest}"' if smallest else ""
    return (f'<img alt="{html.escape(alt)}"{_message_attribute(fig)} '
            f'width="{meta["width"]}" height="{meta["height"]}"{text} '
            f'style="max-width:100%;height:auto" src="data:image/png;base64,{data}"/>')


def use_compact_figures(dpi: int = 72, colors: int = COLORS) -> None:
    """Make the notebook's inline figures described 2x palette PNGs (``figure_png``); call once near the top."""
    shell = get_ipython()
    if shell is None:
        return
    plt.close(plt.figure())  # the inline backend installs its PNG formatter at the first figure; ours replaces it
    formatter = shell.display_formatter.formatters["image/png"]
    formatter.for_type(Figure, lambda fig: figure_png(fig, dpi=dpi, colors=colors))
