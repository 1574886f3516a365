"""Matplotlib figures of attention: heatmaps of weight matrices and grids of heads.

Pure data in, an ``Axes`` or ``Figure`` out; nothing here computes attention.
"""

from __future__ import annotations

import base64
import html
import io

import matplotlib.pyplot as plt
import numpy as np
from IPython import get_ipython
from matplotlib.figure import Figure
from PIL import Image


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


def heatmap(weights, row_labels=None, col_labels=None, ax=None, title: str | None = None,
            annotate: bool = True, fmt: str = "{:.2f}", cmap: str = "viridis", vmin=None, vmax=None):
    """Draw a (Lq, Lk) matrix (e.g. attention weights) with one labelled row per query; returns the Axes."""
    m = to_numpy(weights)
    _check_matrix("weights", m, row_labels, col_labels)
    if ax is None:
        _, ax = plt.subplots(figsize=(0.55 * m.shape[1] + 2, 0.45 * m.shape[0] + 1.2))
    image = ax.imshow(m, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(m.shape[1]), _literal(col_labels, m.shape[1]), rotation=45, ha="right")
    ax.set_yticks(range(m.shape[0]), _literal(row_labels, m.shape[0]))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate and m.size <= 400:
        _annotate(ax, m, fmt, image)
    return ax


def _annotate(ax, m: np.ndarray, fmt: str, image) -> None:
    middle = (np.nanmin(m) + np.nanmax(m)) / 2 if np.isfinite(m).any() else 0.0
    for (i, j), value in np.ndenumerate(m):
        dark = image.norm(value) < image.norm(middle) if np.isfinite(value) else False
        ax.text(j, i, fmt.format(value), ha="center", va="center", fontsize=8,
                color="white" if dark else "black")


def head_grid(weights, tokens, ncols: int = 4, titles=None, query_tokens=None, annotate: bool = False,
              vmax=None):
    """One heatmap per head of weights (H, Lq, Lk), ``ncols`` per row; returns the Figure."""
    w = to_numpy(weights)
    if w.ndim != 3:
        raise ValueError(f"expected weights of shape (H, Lq, Lk), got {w.shape}")
    h = w.shape[0]
    ncols = min(ncols, h)
    nrows = -(-h // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.0 * nrows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= h:
            ax.axis("off")
            continue
        heatmap(w[i], query_tokens if query_tokens is not None else tokens, tokens, ax=ax,
                title=titles[i] if titles is not None else f"head {i}", annotate=annotate, vmin=0, vmax=vmax)
    fig.tight_layout()
    return fig


def html_heatmap(matrix, row_labels, col_labels, caption: str = "", vmax: float | None = 1.0,
                 fmt: str = "{:.2f}") -> str:
    """A (rows, cols) matrix as an HTML table, each cell shaded by ``value / vmax`` (None: the matrix max).

    A few kilobytes where a PNG heatmap costs tens: the light choice for explorer states. Labels are escaped.
    """
    m = to_numpy(matrix)
    _check_matrix("matrix", m, row_labels, col_labels)
    top = float(np.max(m)) if vmax is None else float(vmax)
    top = top if top > 0 else 1.0
    cell = 'style="padding:1px 4px;text-align:right;background:rgba(31,119,180,{:.2f});color:{}"'
    header = "".join(f"<th>{html.escape(str(c))}</th>" for c in col_labels)
    rows = []
    for label, values in zip(row_labels, m.tolist(), strict=True):
        shares = [min(max(v / top, 0.0), 1.0) for v in values]
        cells = "".join(f"<td {cell.format(a, 'white' if a > 0.55 else 'black')}>{fmt.format(v)}</td>"
                        for v, a in zip(values, shares, strict=True))
        rows.append(f"<tr><th>{html.escape(str(label))}</th>{cells}</tr>")
    return (f'<table style="border-collapse:collapse;font-size:12px"><caption>{html.escape(caption)}</caption>'
            f"<tr><th></th>{header}</tr>{''.join(rows)}</table>")


def palette_png(fig, dpi: int = 72, colors: int = 128) -> bytes:
    """PNG bytes of a figure reduced to at most ``colors`` colours: about a quarter of a full-colour PNG.

    Every figure and explorer state is stored inline in its web page, so this keeps pages light.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    image = Image.open(buffer).convert("RGB").quantize(colors=colors, dither=Image.Dither.NONE)
    compact = io.BytesIO()
    image.save(compact, format="png", optimize=True)
    return compact.getvalue()


def figure_to_html(fig, dpi: int = 72, alt: str = "figure") -> str:
    """An ``<img>`` tag holding the figure as an inline palette PNG (closes the figure)."""
    data = base64.b64encode(palette_png(fig, dpi=dpi)).decode("ascii")
    plt.close(fig)
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"/>'


def use_compact_figures(dpi: int = 72, colors: int = 128) -> None:
    """Make the notebook's inline figures palette PNGs (``palette_png``); call once near the top of a chapter."""
    shell = get_ipython()
    if shell is None:
        return
    plt.close(plt.figure())  # the inline backend installs its PNG formatter at the first figure; ours replaces it
    formatter = shell.display_formatter.formatters["image/png"]
    formatter.for_type(Figure, lambda fig: palette_png(fig, dpi=dpi, colors=colors))
