"""Matplotlib figures of attention: heatmaps of weight matrices and grids of heads.

Pure data in, an ``Axes`` or ``Figure`` out; nothing here computes attention. A figure's text alternative is
written by ``attnlib.views.alt_text`` and its image (a described 2x palette PNG, or inline SVG for an explorer's
chart) by ``attnlib.views.images``; the names chapters use from those two are importable from here too.
"""

from __future__ import annotations

import html

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from attnlib.views.alt_text import describe_axes, describe_figure, message_of, say
from attnlib.views.images import figure_png, figure_to_html, png_text, use_compact_figures

__all__ = ["DIVERGING", "describe_axes", "describe_figure", "figure_png", "figure_to_html", "head_grid", "heatmap",
           "html_heatmap", "message_of", "png_text", "say", "to_numpy", "use_compact_figures"]

CELL_FONT_SIZE = 9  # points: 9 CSS px at the 72 dpi figures are shown at; a11y.py keeps phones from shrinking them
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


COLUMN_PX = 688  # CSS px of the website's text column, where a figure wider than this is scaled down
GRID_COLUMNS = 3  # panels per row of a head grid: at 3.2 in each its text keeps 9 px or more in the column


def head_grid(weights, tokens, ncols: int = GRID_COLUMNS, titles=None, query_tokens=None, annotate: bool = False,
              vmax=None, label: str = "weight") -> Figure:
    """One heatmap per head of weights (H, Lq, Lk), ``ncols`` per row, one shared colour bar (``label``)
    beside them; returns the Figure.

    The default of three per row keeps the figure about ``COLUMN_PX`` wide: four (13.4 in) were scaled to 71 % in
    the site's column, its 10 pt tick labels to 7 px; a grid needs a few panels per row to stay readable."""
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"expected weights of shape (H, Lq, Lk), got {w.shape}")
    h = w.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, grid = plt.subplots(nrows, ncols, figsize=(3.2 * ncols + 0.6, 3.0 * nrows), layout="constrained",
                             squeeze=False)
    axes = list(grid.flat)
    top = float(np.nanmax(w)) if vmax is None else vmax
    for i, ax in enumerate(axes):
        if i >= h:
            ax.axis("off")
            continue
        heatmap(w[i], query_tokens if query_tokens is not None else tokens, tokens, ax=ax,
                title=titles[i] if titles is not None else f"head {i}", annotate=annotate, vmin=0, vmax=top,
                cmap="viridis", colorbar=False)
    fig.colorbar(axes[0].images[0], ax=grid, shrink=0.9, label=label)  # beside the panels, not a column away
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
    cell = '<td style="padding:1px 3px;text-align:right;background:{};color:{}">{}</td>'
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
            f'<caption style="color:#000;text-align:left">{html.escape(caption)}</caption>'
            f"<tr><td></td>{header}</tr>{''.join(rows)}</table>{legend}</div>")
