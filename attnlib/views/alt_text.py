"""Text alternatives of matplotlib figures: ``describe_figure`` says in words what a figure draws.

A figure's text alternative starts with its *message*, the one sentence its author wants the reader to take
from it, given with ``say(fig_or_ax, "...")`` in the cell that draws it (its numbers computed and rounded, never
typed). Then comes the data summary: titles, axes, the colour bar, and the pattern: each row's strongest key, a
curve's trend, the tallest bar, the points. The summary is read from the drawn figure only (no data passed beside
it), so the words cannot drift from the image. ``attnlib.views.images`` stores the text with the image (and the
message on its own, so tests can check every figure has one); the website's a11y extension writes it into ``alt``.
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import QuadMesh
from matplotlib.colors import LogNorm, to_rgb
from matplotlib.container import BarContainer
from matplotlib.figure import Figure, SubFigure

MAX_ROWS_DESCRIBED = 12  # a heatmap with more rows is summarised, not read row by row
MESSAGE_ATTR = "_attnlib_message"  # where ``say`` stores a figure's message on the Figure object
MIN_MESSAGE_WORDS = 4
_SECOND_SENTENCE = re.compile(r"[.!?] +[A-Z]")  # "... rises. The ...": a message is one sentence


def _figure_of(target) -> Figure:
    if isinstance(target, Axes):
        return target.get_figure(root=True)
    if isinstance(target, SubFigure):
        return target.get_figure(root=True)
    if isinstance(target, Figure):
        return target
    raise TypeError(f"expected a matplotlib Figure or Axes to say a message about, got {type(target).__qualname__}")


def check_message(message) -> str:
    """``message`` stripped, or a ValueError/TypeError saying why it is not one sentence a reader can take away."""
    if not isinstance(message, str):
        raise TypeError(f"expected the figure's message as a str (one sentence), got {type(message).__qualname__}")
    text = " ".join(message.split())
    problem = None
    if len(text.split()) < MIN_MESSAGE_WORDS:
        problem = f"at least {MIN_MESSAGE_WORDS} words"
    elif text[0].isalpha() and not text[0].isupper():
        problem = "a capital letter (or a number or symbol) first"
    elif text[-1] not in ".!?":
        problem = "a full stop (or ? or !) at the end"
    elif _SECOND_SENTENCE.search(text):
        problem = "one sentence only (the summary of the data follows it)"
    if problem:
        raise ValueError(f"expected the figure's message as one sentence with {problem}, got {message!r}")
    return text


def say(target, message: str) -> None:
    """Give the figure of ``target`` (a Figure or Axes) its message: the first sentence of its text alternative.

    Write it in the cell that draws the figure, true of what it shows, with computed numbers rounded as the page
    shows them: ``say(ax, f"The weights of cat peak at {w.max():.2f} on sat.")``. Returns None, so that a
    notebook cell ending with it does not show the figure a second time.
    """
    setattr(_figure_of(target), MESSAGE_ATTR, check_message(message))


def message_of(fig) -> str | None:
    """The message ``say`` gave ``fig`` (a Figure or Axes), or None."""
    return getattr(_figure_of(fig), MESSAGE_ATTR, None)


# On a linear scale, a value under this share of the largest magnitude it is read with reads as 0: a softmax
# weight of 3.8e-171 beside weights near 1 is 0 to the eye, and its digits are float noise another CPU may not
# reproduce. Log scales (where such a value is the point) keep every value.
NEGLIGIBLE = 1e-6


# Mathtext in labels and titles ($d_k$, $\mathcal{L}(w)$) as a screen reader should read it: symbols, no dollars,
# backslashes or braces; a subscript in Unicode where it has one (d_k -> dₖ), else run on (W_Q -> WQ).
_TEX = {r"\mathcal": "", r"\partial ": "∂", r"\partial": "∂", r"\sqrt": "√", r"\Vert": "‖", r"\|": "‖",
        r"\cdot": "·", r"\alpha": "α", r"\beta": "β", r"\sigma": "σ", r"\theta": "θ", r"\omega": "ω", r"\rho": "ρ",
        r"\to": "→", r"\infty": "∞",
        r"\top": "ᵀ", r"\times": "×", r"\,": " ", r"\!": "", r"\ ": " "}
_SUBSCRIPT = dict(zip("aehijklmnoprstuvx0123456789", "ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ₀₁₂₃₄₅₆₇₈₉", strict=True))


def _subscript(match: re.Match) -> str:
    chars = match.group(1) or match.group(2)
    return "".join(_SUBSCRIPT[c] for c in chars) if all(c in _SUBSCRIPT for c in chars) else chars


def _math_words(match: re.Match) -> str:
    text = match.group(1)
    for tex, plain in _TEX.items():
        text = text.replace(tex, plain)
    text = re.sub(r"\\(?:operatorname|mathrm|text)\{([^{}]*)\}", r"\1", text)
    text = re.sub(r"\\([a-zA-Z]+)", r"\1", text)  # any other command: its name
    text = re.sub(r"_(?:\{([^{}]*)\}|(\w))", _subscript, text)
    return text.replace("{", "").replace("}", "")


def plain_text(text: str) -> str:
    """``text`` with every ``$...$`` of mathtext read as words and symbols (``$1/\\sqrt{d_k}$`` -> ``1/√dₖ``)."""
    return re.sub(r"\$([^$]*)\$", _math_words, text)


def _number(value: float, scale: float = 0.0) -> str:
    """``value`` in 2 significant digits (2 decimals between 0.01 and 1000); "0" when it is negligible beside
    ``scale``, the largest magnitude it is read with (0: never)."""
    if abs(value) < NEGLIGIBLE * scale:
        return "0"
    return f"{value:.2g}" if abs(value) < 0.01 or abs(value) >= 1000 else f"{value:.2f}".rstrip("0").rstrip(".")


def _linear_scale(values: np.ndarray, linear: bool = True) -> float:
    """The ``scale`` of ``_number`` for values read on a linear axis (the largest finite magnitude), else 0."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if linear and finite.size else 0.0


def _span(low: float, high: float, word: str = "from", scale: float = 0.0) -> str:
    """'from 1 to 3', or 'at 1' when the two ends print the same (never a degenerate 'from 1 to 1')."""
    a, b = _number(low, scale), _number(high, scale)
    return f"at {a}" if a == b else f"{word} {a} to {b}"


def _ticks(labels) -> list[str]:
    return [" ".join(t.get_text().replace(r"\$", "$").split()) for t in labels]


def is_colorbar(ax) -> bool:
    """Whether ``ax`` is a colour bar's axes (read with the panel it belongs to, never described alone)."""
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
             else f"{rows[i]}: {_ties(m[i], cols)} {_number(m[i, j])}" for i, j in enumerate(best)]
    return "largest value in each row: " + "; ".join(parts)


def _ties(row: np.ndarray, cols: list[str]) -> str:
    """The columns that hold ``row``'s largest value as printed, 'noun, actor' when two tie."""
    top = _number(np.nanmax(row))
    return ", ".join(c for c, v in zip(cols, row, strict=True) if _number(v) == top)


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
    return _describe_matrix(ax, image, m, (rows, _axis_label(ax, "y")), (cols, _axis_label(ax, "x")))


def mesh_matrix(mesh) -> np.ndarray | None:
    """The values of a ``pcolormesh`` drawn from a matrix, (Lq, Lk) for attention weights (NaN where masked), else
    None."""
    m = np.ma.filled(np.ma.asarray(mesh.get_array(), dtype=float), np.nan)
    return m if m.ndim == 2 else None


def value_meshes(ax) -> list:
    """The ``pcolormesh`` grids of ``ax`` drawn from a matrix: heatmaps on their data's own coordinates."""
    return [c for c in ax.collections if isinstance(c, QuadMesh) and mesh_matrix(c) is not None]


def _describe_mesh(ax, mesh) -> str:
    """A heatmap drawn with ``pcolormesh``: its rows and columns named by the coordinates of their centres."""
    m, corners = mesh_matrix(mesh), np.asarray(mesh.get_coordinates(), dtype=float)  # (rows + 1, cols + 1, 2)
    xs = (corners[0, :-1, 0] + corners[0, 1:, 0]) / 2
    ys = (corners[:-1, 0, 1] + corners[1:, 0, 1]) / 2
    axes = []
    for centres, label in ((ys, ax.get_ylabel()), (xs, ax.get_xlabel())):
        where = _span(centres.min(), centres.max())
        axes.append(([_number(v) for v in centres], f"{label}, {where}" if label else where))
    return _describe_matrix(ax, mesh, m, *axes)


def _describe_matrix(ax, mappable, m: np.ndarray, rows: tuple, cols: tuple) -> str:
    """A matrix drawn as colours (``mappable``: an image or a mesh): its size, values, each row's largest and its
    colour bar; ``rows`` and ``cols``: (the name of each row or column, what the axis says of them)."""
    (names, ylabel), (columns, xlabel) = rows, cols
    text = (f"heatmap of {_count(m.shape[0], 'row')}" + (f" ({ylabel})" if ylabel else "")
            + f" by {_count(m.shape[1], 'column')}" + (f" ({xlabel})" if xlabel else ""))
    finite = m[np.isfinite(m)]
    if finite.size:
        scale = _linear_scale(finite, not isinstance(mappable.norm, LogNorm))
        low, high = _number(finite.min(), scale), _number(finite.max(), scale)
        text += f", every value {low}" if low == high else f", values from {low} to {high}"
        if finite.min() >= 0 and np.allclose(np.nansum(m, axis=1), 1, atol=1e-2):
            text += ", each row sums to 1"
        if low != high:
            text += "; " + _row_pattern(m, names, columns)
    bar = _colorbar_of(ax, mappable)
    if bar is not None:
        text += f"; colour bar: {bar.ax.get_ylabel()}" if bar.ax.get_ylabel() else "; with a colour bar"
    return text


def _trend(y: np.ndarray, scale: float = 0.0) -> str:
    """How ``y`` goes; ``scale`` as in ``_number``."""
    y = y[np.isfinite(y)]
    if y.size < 2:
        return f"at {_number(y[0], scale)}" if y.size else "empty"
    if _number(y.min(), scale) == _number(y.max(), scale):
        return f"flat at {_number(y[0], scale)}"
    d = np.diff(y)
    shape = "rises" if (d >= 0).all() else "falls" if (d <= 0).all() else "varies"
    ends = _span(y[0], y[-1], scale=scale)
    if shape != "varies":
        return f"{shape} {ends}"
    between = f"between {_number(y.min(), scale)} and {_number(y.max(), scale)}"
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


def _describe_curve(label: str | None, x: np.ndarray, y: np.ndarray, x_name: str, y_name: str,
                    linear: bool = True) -> str:
    """A line's trend over x ('a curve rises from 0 to 4 as x goes from 0 to 2'), or its points when x is one value;
    ``linear``: whether the y axis is linear (values negligible beside the largest then read as 0)."""
    xs = _span(np.nanmin(x), np.nanmax(x))
    if xs.startswith("at"):  # one x: a point, or points stacked over it
        return _describe_one_x(label, x, y, x_name, y_name)
    scale = _linear_scale(y, linear)
    turn = _one_turn(x, y, x_name, scale)
    if turn:
        return f"{label or 'a curve'} {turn}"
    return f"{label or 'a curve'} {_trend(y, scale)} as {x_name} goes {xs}"


def _one_turn(x: np.ndarray, y: np.ndarray, x_name: str, scale: float) -> str | None:
    """'falls from 3.3 to 0.09 at w = 2.1, then rises to 3' for a curve with one valley (or peak) inside its
    range; None otherwise."""
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if y.size < 3:
        return None
    signs = np.sign(np.diff(y))
    signs = signs[signs != 0]
    if signs.size < 2 or np.count_nonzero(np.diff(signs)) != 1:
        return None
    i = int(np.argmin(y) if signs[0] < 0 else np.argmax(y))
    first, then = ("falls", "rises") if signs[0] < 0 else ("rises", "falls")
    start, turn, end = (_number(v, scale) for v in (y[0], y[i], y[-1]))
    if turn in (start, end):  # one leg too small to print: a trend (None when both are: flat)
        return None if start == turn == end else f"{then if start == turn else first} from {start} to {end}"
    return f"{first} from {start} to {turn} at {x_name} = {_number(x[i])}, then {then} to {end}"


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
            out.append(_describe_curve(label, x, y, x_name, y_name, ax.get_yscale() == "linear"))
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
    """Annotations drawn as arrows: each one's name (legend entry of its colour, or the one text of its colour
    beside its head: a text placed in data coordinates nearer another arrow's head names that one)."""
    from matplotlib.text import Annotation  # noqa: PLC0415

    arrows = [t for t in ax.texts if isinstance(t, Annotation) and t.arrow_patch is not None]
    if not arrows:
        return []
    names, labels = _colour_names(ax), [t for t in ax.texts if not isinstance(t, Annotation) and t.get_text()]
    heads = np.array([arrow.xy for arrow in arrows], dtype=float)  # (arrows, 2)

    def beside(text, i: int) -> bool:
        """Whether ``text`` may name arrow ``i``: not a label placed in data coordinates nearer another head."""
        if text.get_transform() != ax.transData:
            return True
        return int(np.argmin(np.linalg.norm(heads - np.asarray(text.get_position(), dtype=float), axis=1))) == i

    out = []
    for i, arrow in enumerate(arrows):
        head, tail = np.asarray(arrow.xy, dtype=float), np.asarray(arrow.xyann, dtype=float)
        colour = tuple(np.round(to_rgb(arrow.arrow_patch.get_edgecolor()), 3))
        near = [t.get_text() for t in labels if tuple(np.round(to_rgb(t.get_color()), 3)) == colour and beside(t, i)]
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
        scale = _linear_scale(heights, ax.get_yscale() == "linear")
        label = container.get_label()
        named = f'bars "{label}"' if label and not label.startswith("_") else (
            f"bar set {k + 1}" if len(containers) > 1 else "")
        count = f"{named}: {heights.size} bars" if named else f"{heights.size} bars"
        if _number(np.nanmin(heights), scale) == _number(np.nanmax(heights), scale):
            out.append(f"{count}, all at {_number(heights[0], scale)}")
            continue
        top, low = int(np.nanargmax(heights)), int(np.nanargmin(heights))
        out.append(f"{count}, tallest {names[top]} at {_number(heights[top], scale)}, "
                   f"lowest {names[low]} at {_number(heights[low], scale)}")
    return out


def _describe_points(ax) -> list[str]:
    counts = [len(c.get_offsets()) for c in ax.collections
              if hasattr(c, "get_offsets") and len(c.get_offsets()) and not isinstance(c, QuadMesh)]
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
    details, meshes = [], value_meshes(ax)
    if not ax.images and not meshes and (ax.get_xlabel() or ax.get_ylabel()):
        details.append(_axes_words(ax))
    details += [_describe_image(ax, image) for image in ax.images] + [_describe_mesh(ax, mesh) for mesh in meshes]
    details += _describe_lines(ax) + _describe_arrows(ax) + _describe_bars(ax) + _describe_points(ax)
    text, title = "; ".join(details), " ".join(ax.get_title().split())  # a title's spacing is layout, not words
    if title and text:
        return f'"{title}": {text}'
    return f'"{title}"' if title else text


def describe_figure(fig, draw: bool = True) -> str:
    """A text alternative for ``fig``: its message (``say``) first, then ``summarize_figure``'s data summary."""
    message, summary = message_of(fig), summarize_figure(fig, draw)
    return f"{message} {summary}" if message else summary


def summarize_figure(fig, draw: bool = True) -> str:
    """The data of ``fig`` in words: its title and every visible panel (colour bars are read with their panel).
    ``draw=False``: the figure was drawn since it last changed (its tick labels are those of that draw)."""
    if draw:
        fig.draw_without_rendering()  # tick labels exist only once laid out (no pixels needed)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.axison and not is_colorbar(ax)]
    described = [describe_axes(ax) for ax in panels]
    described = [d for d in described if d]
    heading = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    if len(described) == 1 and not heading:
        return plain_text(f"{described[0]}.")
    intro = f"Figure with {len(described)} panels" if len(described) > 1 else "Figure"
    intro = f'{intro}, "{heading}"' if heading else intro
    if not described:
        return plain_text(f"{intro}, nothing plotted.")
    if len(described) == 1:
        return plain_text(f"{intro}: {described[0]}.")
    return plain_text(f"{intro}. " + " ".join(f"Panel {i + 1}: {d}." for i, d in enumerate(described)))
