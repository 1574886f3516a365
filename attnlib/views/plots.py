"""Matplotlib figures of attention: heatmaps of weight matrices and grids of heads.

Pure data in, an ``Axes`` or ``Figure`` out; nothing here computes attention. Every figure the
chapters show goes through ``figure_png``: a 2x palette PNG (crisp on high-density screens, light
in a page) that carries its own text alternative, ``describe_figure``'s account of what is drawn
(titles, axes, colour bar, and the pattern: each row's strongest key, a curve's trend, the tallest
bar). The website's ``book/_ext/a11y.py`` writes it into the image's ``alt``; JupyterLab reads it
from the output's metadata. Explorer states (``figure_to_html``) are inline SVG where that is the
smaller (charts of lines and bars: a few kB), otherwise the same described 2x PNG.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import io
import json
import re

import matplotlib.pyplot as plt
import numpy as np
from IPython import get_ipython
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure
from PIL import Image
from PIL.PngImagePlugin import PngInfo

SCALE = 2  # image pixels per CSS pixel: 2x PNGs stay sharp on high-density screens
ALT_KEY = "Description"  # the PNG text chunk (a registered keyword) that holds the figure's description
SCALE_KEY = "attnlib-scale"  # PNG text chunk: pixels per CSS pixel, so a page shows the image at its size
CELL_TEXT_KEY = "attnlib-cell-text-px"  # PNG text chunk: smallest number written in a heatmap cell, CSS px
CELL_FONT_SIZE = 9  # points: 9 CSS px at the 72 dpi figures are shown at; a11y.py keeps phones from shrinking them
COLORBARS_KEY = "attnlib-colorbars"  # PNG text chunk: ``colour_bars``' census (JSON), read by the tests
MAX_ROWS_DESCRIBED = 12
DIVERGING = "RdBu_r"  # blue-white-red: readable with red-green colour-vision deficiencies (ColorBrewer)


def to_numpy(x) -> np.ndarray:
    """A NumPy copy of a tensor (any device and dtype) or array-like; (H, Lq, Lk) -> (H, Lq, Lk)."""
    if hasattr(x, "detach"):
        return x.detach().float().cpu().numpy() if x.is_floating_point() else x.detach().cpu().numpy()
    return np.asarray(x)


def _check_matrix(name: str, m: np.ndarray, rows, cols) -> None:
    if m.ndim != 2:
        raise ValueError(f"expected {name} of shape (Lq, Lk), got {m.shape}")
    for label, labels, n in (("row_labels", rows, m.shape[0]), ("col_labels", cols, m.shape[1])):
        if labels is not None and len(labels) != n:
            raise ValueError(f"expected {n} {label} for {name} of shape {m.shape}, got {len(labels)}")


def _literal(labels, n: int) -> list[str]:
    """Tick labels shown as written: a token such as ``$5`` is text, not matplotlib mathtext."""
    return [str(label).replace("$", r"\$") for label in (labels if labels is not None else range(n))]


def _colour_scale(m: np.ndarray, cmap, vmin, vmax):
    """(cmap, vmin, vmax): signed data with no map named gets a diverging map centred at 0."""
    finite = m[np.isfinite(m)]
    signed = finite.size > 0 and finite.min() < 0 < finite.max()
    if cmap is not None:
        return cmap, vmin, vmax
    if not signed:
        return "viridis", vmin, vmax
    limit = float(np.abs(finite).max())
    return DIVERGING, -limit if vmin is None else vmin, limit if vmax is None else vmax


def heatmap(weights, row_labels=None, col_labels=None, ax=None, title: str | None = None,
            annotate: bool = True, fmt: str = "{:.2f}", cmap: str | None = None, vmin=None, vmax=None,
            colorbar: bool | str = True) -> Axes:
    """Draw a (Lq, Lk) matrix (e.g. attention weights) with one labelled row per query; returns the Axes.

    ``cmap=None``: viridis, or a diverging map centred at 0 when the matrix has both signs.
    ``colorbar``: draw the colour scale beside the matrix (a string also labels it). Panels that share one
    scale pass ``False`` and draw one bar for all (``fig.colorbar(..., ax=axes)``): never both.
    """
    m = to_numpy(weights)
    _check_matrix("weights", m, row_labels, col_labels)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * m.shape[1] + 2.8, 0.45 * m.shape[0] + 1.2))
    cmap, vmin, vmax = _colour_scale(m, cmap, vmin, vmax)
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(m.shape[1]), _literal(col_labels, m.shape[1]), rotation=45, ha="right")
    ax.set_yticks(range(m.shape[0]), _literal(row_labels, m.shape[0]))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate and m.size <= 400:
        _annotate(ax, m, fmt, image)
    if colorbar:
        label = colorbar if isinstance(colorbar, str) else ""
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.03, label=label)
    return ax


def _luminance(rgba) -> float:
    """Relative luminance (WCAG) of a colour."""
    channels = np.asarray(rgba[:3], dtype=float)
    linear = np.where(channels <= 0.04045, channels / 12.92, ((channels + 0.055) / 1.055) ** 2.4)
    return float(linear @ np.array([0.2126, 0.7152, 0.0722]))


def _annotate(ax, m: np.ndarray, fmt: str, image) -> None:
    """Each value written on its cell, in black or white, whichever contrasts more with the cell."""
    for (i, j), value in np.ndenumerate(m):
        dark = np.isfinite(value) and _luminance(image.cmap(image.norm(value))) < 0.18
        ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=CELL_FONT_SIZE,
                color="white" if dark else "black")


def head_grid(weights, tokens, ncols: int = 4, titles=None, query_tokens=None, annotate: bool = False,
              vmax=None, label: str = "weight") -> Figure:
    """One heatmap per head of weights (H, Lq, Lk), ``ncols`` per row, one shared colour bar (``label``)
    in a column of its own; returns the Figure."""
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"expected weights of shape (H, Lq, Lk), got {w.shape}")
    h = w.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig = plt.figure(figsize=(3.2 * ncols + 0.6, 3.0 * nrows))
    grid = fig.add_gridspec(nrows, ncols + 1, width_ratios=[1] * ncols + [0.05])  # last column: the colour bar
    axes = [fig.add_subplot(grid[i // ncols, i % ncols]) for i in range(nrows * ncols)]
    top = float(np.nanmax(w)) if vmax is None else vmax
    for i, ax in enumerate(axes):
        if i >= h:
            ax.axis("off")
            continue
        heatmap(w[i], query_tokens if query_tokens is not None else tokens, tokens, ax=ax,
                title=titles[i] if titles is not None else f"head {i}", annotate=annotate, vmin=0, vmax=top,
                cmap="viridis", colorbar=False)
    fig.colorbar(axes[0].images[0], cax=fig.add_subplot(grid[:, -1]), label=label)
    fig.tight_layout()
    return fig


def _shade(share: float) -> tuple[str, str]:
    """(background, text colour) of a cell at ``share`` of the scale: opaque white-to-blue, readable text."""
    base = np.array(to_rgb("#1f77b4"))
    rgb = 1 - share * (1 - base)
    dark = 1.05 / (_luminance(rgb) + 0.05) > (_luminance(rgb) + 0.05) / 0.05
    colour = "#{:02x}{:02x}{:02x}".format(*(int(round(c * 255)) for c in rgb))
    return colour, "#fff" if dark else "#000"


def html_heatmap(matrix, row_labels, col_labels, caption: str = "", vmax: float | None = 1.0,
                 fmt: str = "{:.2f}") -> str:
    """A (rows, cols) matrix as an HTML table, each cell shaded by ``value / vmax`` (None: the matrix max).

    A few kilobytes where a PNG heatmap costs tens: the light choice for explorer states. Labels are escaped;
    header cells carry their scope (a screen reader names each number's row and column), colours are opaque
    (readable in the site's dark mode too) and a colour bar under the table gives the scale.
    """
    m = to_numpy(matrix)
    _check_matrix("matrix", m, row_labels, col_labels)
    top = float(np.max(m)) if vmax is None else float(vmax)
    top = top if top > 0 else 1.0
    cell = '<td style="padding:1px 4px;text-align:right;background:{};color:{}">{}</td>'
    header = "".join(f'<th scope="col">{html.escape(str(c))}</th>' for c in col_labels)
    rows = []
    for label, values in zip(row_labels, m.tolist(), strict=True):
        cells = "".join(cell.format(*_shade(min(max(v / top, 0.0), 1.0)), fmt.format(v)) for v in values)
        rows.append(f'<tr><th scope="row">{html.escape(str(label))}</th>{cells}</tr>')
    end = _shade(1.0)[0]
    legend = (f'<div style="display:flex;align-items:center;gap:4px;font-size:11px" aria-hidden="true">'
              f'<span>0</span><span style="width:80px;height:8px;background:linear-gradient(90deg,#fff,{end});'
              f'border:1px solid #767676"></span><span>{fmt.format(top)}</span></div>')
    return (f'<div class="attnlib-table" style="background:#fff;color:#000;display:inline-block;padding:2px">'
            f'<table style="border-collapse:collapse;font-size:12px;color:#000">'
            f'<caption style="color:#000">{html.escape(caption)}</caption>'
            f"<tr><td></td>{header}</tr>{''.join(rows)}</table>{legend}</div>")


# --- text alternatives --------------------------------------------------------------------------------


def _number(value: float) -> str:
    return f"{value:.2g}" if abs(value) < 0.01 or abs(value) >= 1000 else f"{value:.2f}".rstrip("0").rstrip(".")


def _span(low: float, high: float, word: str = "from") -> str:
    """'from 1 to 3', or 'at 1' when the two ends print the same (never a degenerate 'from 1 to 1')."""
    a, b = _number(low), _number(high)
    return f"at {a}" if a == b else f"{word} {a} to {b}"


def _ticks(labels) -> list[str]:
    return [" ".join(t.get_text().replace(r"\$", "$").split()) for t in labels]


def _is_colorbar(ax) -> bool:
    return getattr(ax, "_colorbar", None) is not None


def _colorbar_of(ax, image):
    for other in ax.figure.axes:
        bar = getattr(other, "_colorbar", None)
        if bar is not None and bar.mappable is image:
            return bar
    return None


def _labelled(ax, which: str, n: int) -> list[str] | None:
    """The ``n`` tick labels of ``ax``'s ``which`` ('x' or 'y') axis; when they are blank (a grid that labels
    only its edge panels), those of another panel of the figure with ``n`` such labels; else None."""
    for other in [ax, *ax.figure.axes]:
        ticks = _ticks(getattr(other, f"get_{which}ticklabels")())
        if len(ticks) == n and all(ticks):
            return ticks
    return None


def _axis_label(ax, which: str) -> str:
    """The axis label, or, when blank (a grid that labels only its edge panels), that of a panel of the same shape."""
    own = getattr(ax, f"get_{which}label")()
    if own or not ax.images:
        return own
    shape = np.shape(ax.images[0].get_array())
    for other in ax.figure.axes:
        if other is not ax and other.images and np.shape(other.images[0].get_array()) == shape:
            label = getattr(other, f"get_{which}label")()
            if label:
                return label
    return ""


def _offset_words(offset: int) -> str:
    if offset == 0:
        return "the query's own position"
    return f"{abs(offset)} position{'s' if abs(offset) > 1 else ''} {'before' if offset < 0 else 'after'} the query"


def _diagonal_pattern(m: np.ndarray) -> str:
    """For a square matrix: where the strongest key of most rows sits relative to the query (e.g. one before)."""
    rows = [i for i in range(m.shape[0]) if np.isfinite(m[i]).any()]
    offsets = [int(np.nanargmax(m[i])) - i for i in rows]
    values, counts = np.unique(offsets, return_counts=True)
    best = int(np.argmax(counts))
    return f"in {counts[best]} of {len(rows)} rows the largest value is at {_offset_words(int(values[best]))}"


def _row_pattern(m: np.ndarray, rows: list[str], cols: list[str]) -> str:
    """Each row's largest entry, e.g. "cat: sat 0.41" (the strongest key of each query); for big matrices,
    the overall largest and, when square, where each row's largest sits relative to the diagonal."""
    if m.shape[0] > MAX_ROWS_DESCRIBED or not np.isfinite(m).any(axis=1).all():
        i, j = np.unravel_index(np.nanargmax(m), m.shape)
        text = f"largest value {_number(m[i, j])} at row {rows[i]}, column {cols[j]}"
        return f"{_diagonal_pattern(m)}; {text}" if m.shape[0] == m.shape[1] else text
    best = np.nanargmax(m, axis=1)
    parts = [f"{rows[i]}: all {_number(m[i, j])}" if _number(np.nanmin(m[i])) == _number(m[i, j])
             else f"{rows[i]}: {cols[j]} {_number(m[i, j])}" for i, j in enumerate(best)]
    return "largest value in each row: " + "; ".join(parts)


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _describe_colours(ax, m: np.ndarray) -> str:
    """An RGB(A) image: its rows (by tick label) and whether each changes colour sharply or gradually."""
    rows = _ticks(ax.get_yticklabels())
    rows = rows if len(rows) == m.shape[0] else [f"row {i}" for i in range(m.shape[0])]
    steps = np.abs(np.diff(m[..., :3], axis=1)).max(axis=-1)  # (rows, cols - 1): colour change to the right
    changes = []
    for name, row in zip(rows, steps, strict=True):
        sharp = int((row > 0.25).sum())
        changes.append(f"{name}: {sharp} sharp colour changes" if sharp else f"{name}: changes gradually")
    along = f" along {ax.get_xlabel()}" if ax.get_xlabel() else ""
    return f"colour grid of {m.shape[0]} rows by {m.shape[1]} columns{along}; " + "; ".join(changes)


def _describe_image(ax, image) -> str:
    m = np.asarray(image.get_array(), dtype=float)
    if m.ndim == 3 and m.shape[-1] in (3, 4):
        return _describe_colours(ax, m)
    if m.ndim != 2:
        return "an image"
    rows = _labelled(ax, "y", m.shape[0]) or [str(i) for i in range(m.shape[0])]
    cols = _labelled(ax, "x", m.shape[1]) or [str(j) for j in range(m.shape[1])]
    ylabel, xlabel = _axis_label(ax, "y"), _axis_label(ax, "x")
    text = (f"heatmap of {_count(m.shape[0], 'row')}" + (f" ({ylabel})" if ylabel else "")
            + f" by {_count(m.shape[1], 'column')}" + (f" ({xlabel})" if xlabel else ""))
    finite = m[np.isfinite(m)]
    if finite.size:
        low, high = _number(finite.min()), _number(finite.max())
        text += f", every value {low}" if low == high else f", values from {low} to {high}"
        if finite.min() >= 0 and np.allclose(np.nansum(m, axis=1), 1, atol=1e-2):
            text += ", each row sums to 1"
        if low != high:
            text += "; " + _row_pattern(m, rows, cols)
    bar = _colorbar_of(ax, image)
    if bar is not None:
        text += f"; colour bar: {bar.ax.get_ylabel()}" if bar.ax.get_ylabel() else "; with a colour bar"
    return text


def _trend(y: np.ndarray) -> str:
    y = y[np.isfinite(y)]
    if y.size < 2:
        return f"at {_number(y[0])}" if y.size else "empty"
    if _number(y.min()) == _number(y.max()):
        return f"flat at {_number(y[0])}"
    d = np.diff(y)
    shape = "rises" if (d >= 0).all() else "falls" if (d <= 0).all() else "varies"
    ends = _span(y[0], y[-1])
    if shape != "varies":
        return f"{shape} {ends}"
    between = f"between {_number(y.min())} and {_number(y.max())}"
    return f"varies {between}, starting and ending {ends}" if ends.startswith("at") else f"varies {ends} ({between})"


def _line_kind(line) -> str:
    """'vertical' or 'horizontal' for a straight reference line (axvline, axhline, or two equal ends), else 'curve'."""
    x, y = (np.asarray(v, dtype=float) for v in line.get_data())
    if x.size >= 2 and np.ptp(x) == 0 and np.ptp(y) > 0:
        return "vertical"
    if y.size >= 2 and np.ptp(y) == 0:
        return "horizontal"
    return "curve"


def _describe_one_x(label: str | None, x: np.ndarray, y: np.ndarray, x_name: str, y_name: str) -> str:
    """Points that share one x (printed alike): 'a point at x = 1, y = 2' or 'label: 5 points at x = 1, y from ...'."""
    where = f"{x_name} = {_number(np.nanmin(x))}"
    if x.size == 1:
        return f"{label + ': a point' if label else 'a point'} at {where}, {y_name} = {_number(y[0])}"
    spread = _span(np.nanmin(y), np.nanmax(y))
    values = f"{y_name} = {spread[3:]}" if spread.startswith("at") else f"{y_name} {spread}"
    return f"{label + ': ' if label else ''}{x.size} points at {where}, {values}"


def _describe_curve(label: str | None, x: np.ndarray, y: np.ndarray, x_name: str, y_name: str) -> str:
    """A line's trend over x ('a curve rises from 0 to 4 as x goes from 0 to 2'), or its points when x is one value."""
    xs = _span(np.nanmin(x), np.nanmax(x))
    if xs.startswith("at"):  # one x: a point, or points stacked over it
        return _describe_one_x(label, x, y, x_name, y_name)
    return f"{label or 'a curve'} {_trend(y)} as {x_name} goes {xs}"


def _describe_lines(ax) -> list[str]:
    """Named curves with their trend over the x axis; straight reference lines and short segments grouped."""
    x_name, y_name = ax.get_xlabel() or "x", ax.get_ylabel() or "y"
    out, straight, segments = [], {"vertical": [], "horizontal": []}, 0
    short = [line for line in ax.get_lines() if line.get_label().startswith("_") and len(line.get_xdata()) == 2
             and _line_kind(line) == "curve"]
    group = len(short) > 2  # many unnamed two-point lines (spokes, links): counted, not read one by one
    for line in ax.get_lines():
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        if y.size == 0:
            continue  # a legend entry only
        label = None if line.get_label().startswith("_") else " ".join(line.get_label().split())
        kind = _line_kind(line)
        if kind != "curve":
            at = _number(x[0] if kind == "vertical" else y[0])
            where = f"{x_name if kind == 'vertical' else y_name} = {at}"
            if label:
                out.append(f"{label}: a {kind} line at {where}")
            elif where not in straight[kind]:
                straight[kind].append(where)
        elif group and line in short:
            segments += 1
        else:
            out.append(_describe_curve(label, x, y, x_name, y_name))
    for kind, places in straight.items():
        if places:
            out.append(f"{'a ' + kind + ' line' if len(places) == 1 else kind + ' lines'} at {', '.join(places)}")
    if segments:
        out.append(f"{_count(segments, 'straight segment')}")
    return out


def _colour_names(ax) -> dict[tuple, str]:
    """Legend labels by the colour of their handle: how an unlabelled arrow of that colour is named."""
    legend, names = ax.get_legend(), {}
    if legend is None:
        return names
    for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=False):
        colour = getattr(handle, "get_color", lambda: None)()
        if colour is not None and not isinstance(colour, np.ndarray):
            names[tuple(np.round(to_rgb(colour), 3))] = " ".join(text.get_text().split())
    return names


def _describe_arrows(ax) -> list[str]:
    """Annotations drawn as arrows: each one's name (legend entry of its colour, or the text beside its head)."""
    from matplotlib.text import Annotation  # noqa: PLC0415

    arrows = [t for t in ax.texts if isinstance(t, Annotation) and t.arrow_patch is not None]
    if not arrows:
        return []
    names, labels = _colour_names(ax), [t for t in ax.texts if not isinstance(t, Annotation) and t.get_text()]
    out = []
    for arrow in arrows:
        head, tail = np.asarray(arrow.xy, dtype=float), np.asarray(arrow.xyann, dtype=float)
        colour = tuple(np.round(to_rgb(arrow.arrow_patch.get_edgecolor()), 3))
        near = [t.get_text() for t in labels if tuple(np.round(to_rgb(t.get_color()), 3)) == colour]
        name = names.get(colour) or (near[0] if len(near) == 1 else None)
        where = f"from ({_number(tail[0])}, {_number(tail[1])}) to ({_number(head[0])}, {_number(head[1])})"
        out.append(f"arrow {name}: {where}" if name else f"an arrow {where}")
    return out


def _describe_bars(ax) -> list[str]:
    out = []
    containers = [c for c in ax.containers if isinstance(c, BarContainer) and c.patches]
    ticks, positions = _ticks(ax.get_xticklabels()), np.asarray(ax.get_xticks(), dtype=float)
    for k, container in enumerate(containers):
        heights = np.array([p.get_height() for p in container.patches], dtype=float)
        centres = np.array([p.get_x() + p.get_width() / 2 for p in container.patches])
        if len(ticks) == len(positions) and any(ticks):  # each bar named by its nearest tick
            names = [ticks[int(np.argmin(np.abs(positions - c)))] for c in centres]
        else:
            names = [str(i) for i in range(heights.size)]
        label = container.get_label()
        named = f'bars "{label}"' if label and not label.startswith("_") else (
            f"bar set {k + 1}" if len(containers) > 1 else "")
        count = f"{named}: {heights.size} bars" if named else f"{heights.size} bars"
        if _number(np.nanmin(heights)) == _number(np.nanmax(heights)):
            out.append(f"{count}, all at {_number(heights[0])}")
            continue
        top, low = int(np.nanargmax(heights)), int(np.nanargmin(heights))
        out.append(f"{count}, tallest {names[top]} at {_number(heights[top])}, "
                   f"lowest {names[low]} at {_number(heights[low])}")
    return out


def _describe_points(ax) -> list[str]:
    counts = [len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets") and len(c.get_offsets())]
    return [f"{sum(counts)} plotted points"] if counts and not ax.images else []


def _axes_words(ax) -> str:
    """'y against x' from the axis labels that exist (no invented 'x' or 'y')."""
    x, y = ax.get_xlabel(), ax.get_ylabel()
    log = " (log scale)" if "log" in (ax.get_xscale(), ax.get_yscale()) else ""
    if x and y:
        return f"{y} against {x}{log}"
    return f"{y or x} on the {'vertical' if y else 'horizontal'} axis{log}"


def describe_axes(ax) -> str:
    """One panel in words: title, what is drawn (heatmap, curves, arrows, bars, points) and its axes."""
    details = []
    if not ax.images and (ax.get_xlabel() or ax.get_ylabel()):
        details.append(_axes_words(ax))
    details += [_describe_image(ax, image) for image in ax.images]
    details += _describe_lines(ax) + _describe_arrows(ax) + _describe_bars(ax) + _describe_points(ax)
    text, title = "; ".join(details), " ".join(ax.get_title().split())  # a title's spacing is layout, not words
    if title and text:
        return f'"{title}": {text}'
    return f'"{title}"' if title else text


def describe_figure(fig) -> str:
    """A text alternative for ``fig``: its title and every visible panel (colour bars are read with their panel)."""
    fig.canvas.draw()  # tick labels exist only once drawn
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison and not _is_colorbar(ax)]
    described = [describe_axes(ax) for ax in panels]
    described = [d for d in described if d]
    heading = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    if len(described) == 1 and not heading:
        return f"{described[0]}."
    intro = f"Figure with {len(described)} panels" if len(described) > 1 else "Figure"
    intro = f'{intro}, "{heading}"' if heading else intro
    if not described:
        return f"{intro}, nothing plotted."
    if len(described) == 1:
        return f"{intro}: {described[0]}."
    return f"{intro}. " + " ".join(f"Panel {i + 1}: {d}." for i, d in enumerate(described))


# --- compact, described images ------------------------------------------------------------------------


def _quantize(png: bytes, colors: int, info: PngInfo | None = None) -> bytes:
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=colors, dither=Image.Dither.NONE)
    compact = io.BytesIO()
    image.save(compact, format="png", optimize=True, pnginfo=info)
    return compact.getvalue()


def palette_png(fig, dpi: int = 72, colors: int = 128) -> bytes:
    """PNG bytes of a figure reduced to at most ``colors`` colours: about a quarter of a full-colour PNG.

    Every figure and explorer state is stored inline in its web page, so this keeps pages light.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return _quantize(buffer.getvalue(), colors)


def colour_bars(fig) -> dict:
    """What a figure's colour scales look like: ``{"heatmaps", "colorbars", "overlaps"}``.

    ``heatmaps``: panels showing a value image (``imshow`` of a matrix); ``colorbars``: colour-bar axes;
    ``overlaps``: colour bars whose box covers part of a panel's box (a bar drawn over a figure). One bar
    per heatmap, or one shared bar, placed beside the panels, is ``colorbars <= heatmaps`` and no overlap.
    """
    fig.canvas.draw()
    bars = [ax for ax in fig.axes if _is_colorbar(ax)]
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison and not _is_colorbar(ax)]
    heatmaps = [ax for ax in panels if any(np.ndim(image.get_array()) == 2 for image in ax.images)]
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


def figure_png(fig, dpi: int = 72, colors: int = 128, scale: int = SCALE, alt: str | None = None) -> tuple[bytes, dict]:
    """(PNG, metadata) of ``fig`` drawn at ``scale`` x ``dpi``, to be shown at ``dpi``.

    The metadata is Jupyter's for an image output: ``width``/``height`` in CSS pixels and ``alt``
    (``describe_figure`` unless given). The PNG carries both too (text chunks ``Description`` and
    ``attnlib-scale``), so the text alternative travels with the image wherever it goes.
    """
    alt = describe_figure(fig) if alt is None else alt
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi * scale, bbox_inches="tight")
    info = PngInfo()
    info.add_text(ALT_KEY, alt)
    info.add_text(SCALE_KEY, str(scale))
    info.add_text(COLORBARS_KEY, json.dumps(colour_bars(fig)))
    if cell_text_px(fig, dpi) is not None:
        info.add_text(CELL_TEXT_KEY, f"{cell_text_px(fig, dpi):g}")
    png = _quantize(buffer.getvalue(), colors, info)
    width, height = Image.open(io.BytesIO(png)).size
    return png, {"width": -(-width // scale), "height": -(-height // scale), "alt": alt}


def png_text(png: bytes) -> dict[str, str]:
    """The text chunks of a PNG (e.g. ``Description``, the alt text ``figure_png`` wrote)."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        return dict(getattr(image, "text", {}))


_SVG_ID = re.compile(r'\bid="([^"]+)"')


def figure_svg(fig, alt: str) -> str:
    """``fig`` as inline SVG markup (text as text), named by ``alt`` for screen readers.

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
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" style="max-width:100%;height:auto" ', 1)


def figure_to_html(fig, dpi: int = 72, alt: str | None = None) -> str:
    """The figure as inline HTML with its text alternative (closes the figure): SVG where that is smaller
    (line and bar charts: text stays text, sharp at any zoom), otherwise an ``<img>`` of a 2x palette PNG.

    The text alternative is ``describe_figure``'s account of it, after ``alt`` when one is given (a
    caller's title such as "weights at T = 0.5" leads, what the figure shows follows).
    """
    described = describe_figure(fig)
    alt = described if alt is None else f"{alt.rstrip('. ')}. {described}"
    png, meta = figure_png(fig, dpi=dpi, alt=alt)
    svg = figure_svg(fig, alt)
    plt.close(fig)
    if len(gzip.compress(svg.encode(), mtime=0)) < 0.8 * len(png):
        return svg
    data = base64.b64encode(png).decode("ascii")
    return (f'<img alt="{html.escape(alt)}" width="{meta["width"]}" height="{meta["height"]}" '
            f'style="max-width:100%;height:auto" src="data:image/png;base64,{data}"/>')


def use_compact_figures(dpi: int = 72, colors: int = 128) -> None:
    """Make the notebook's inline figures described 2x palette PNGs (``figure_png``); call once near the top."""
    shell = get_ipython()
    if shell is None:
        return
    plt.close(plt.figure())  # the inline backend installs its PNG formatter at the first figure; ours replaces it
    formatter = shell.display_formatter.formatters["image/png"]
    formatter.for_type(Figure, lambda fig: figure_png(fig, dpi=dpi, colors=colors))
