"""Explorers that work without a kernel: every state is precomputed and switched in the page.

An explorer is a row of controls (sliders, dropdowns) above a stack of precomputed views, one per
combination of settings. Each control is linked to the stack *in JavaScript* (``ipywidgets.jslink``
on the control's ``index`` and the stack's ``selected_index``), so moving a slider on the published
website shows the matching view with no Python running. In a notebook it behaves the same.

``explorer_states`` is the pure part (it computes every view); ``precomputed_explorer`` only draws.

Made for every reader: controls are labelled with words (``block_size`` -> "block size", ``d_k`` ->
"dₖ"), wrap onto their own lines on a narrow screen, and every state carries a short text saying what
it shows (the settings, and a figure's description as its ``alt``). The website's ``attnsite/a11y.py``
(its ``a11y.js``) gives the sliders their name and value for screen readers (``aria-label``,
``aria-valuetext``: temperature "1.0", not the option's index) and announces each new state
(``aria-live``), using the class names set here.
"""

from __future__ import annotations

import html
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from numbers import Number

import ipywidgets as widgets

from attnlib.views.images import figure_to_html

MAX_STATES = 64
EXPLORER_CLASS = "attnlib-explorer"  # the explorer's VBox; a11y.js finds explorers by it
STATE_CLASS = "attnlib-state"  # each precomputed view; its data-settings says which settings it shows
_SUBSCRIPTS = dict(zip("aeijklmnoprstuvx0123456789", "ₐₑᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ₀₁₂₃₄₅₆₇₈₉", strict=True))
VISUALLY_HIDDEN = ("position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;"
                   "clip:rect(0,0,0,0);white-space:nowrap;border:0")


def _as_html(view) -> str:
    if isinstance(view, str):
        return view
    if hasattr(view, "savefig"):  # a matplotlib Figure
        return figure_to_html(view)
    raise TypeError(f"expected render to return an HTML string or a matplotlib Figure, got {type(view).__qualname__}")


def label_of(name: str) -> str:
    """A control's label in words: ``"block_size"`` -> ``"block size"``, ``"d_k"`` -> ``"dₖ"``."""
    math = re.fullmatch(r"([A-Za-z])_([a-z0-9])", name)
    if math and math.group(2) in _SUBSCRIPTS:
        return math.group(1) + _SUBSCRIPTS[math.group(2)]
    return name.replace("_", " ").strip()


def _settings_text(labels: Sequence[str], combo: tuple) -> str:
    return ", ".join(f"{label} = {value}" for label, value in zip(labels, combo, strict=True))


def _described(view: str, settings: str) -> str:
    """A state's HTML in a container that says, for screen readers and a11y.js, which settings it shows."""
    return (f'<div class="{STATE_CLASS}" data-settings="{html.escape(settings)}">'
            f'<span style="{VISUALLY_HIDDEN}">Showing {html.escape(settings, quote=False)}.</span>{view}</div>')


def _check_options(options: Mapping[str, Sequence]) -> None:
    if not isinstance(options, Mapping) or not 1 <= len(options) <= 2:
        raise ValueError(f"expected options as a mapping of 1 or 2 control names to value lists, got {options!r}")
    for name, values in options.items():
        if isinstance(values, str) or not isinstance(values, Sequence) or len(values) == 0:
            raise ValueError(f"expected a non-empty list of values for control {name!r}, got {values!r}")
    count = 1
    for values in options.values():
        count *= len(values)
    if count > MAX_STATES:
        raise ValueError(f"expected at most {MAX_STATES} precomputed states (they are all stored in the page), "
                         f"got {count}")


def explorer_states(render: Callable[..., object], options: Mapping[str, Sequence]) -> dict[tuple, str]:
    """Render every combination of ``options`` ({name: values}); returns {(value, ...): html}.

    ``render(**settings)`` returns an HTML string or a matplotlib Figure (stored as an inline PNG).
    """
    _check_options(options)
    names = list(options)
    return {combo: _as_html(render(**dict(zip(names, combo, strict=True))))
            for combo in itertools.product(*options.values())}


def _control(label: str, values: Sequence, initial):
    """A slider for numbers, a dropdown otherwise; each takes a share of the row and wraps on a narrow screen."""
    index = list(values).index(initial) if initial is not None else 0
    options = [(str(v), i) for i, v in enumerate(values)]
    style = {"description_width": "initial"}
    layout = widgets.Layout(flex="1 1 16em", min_width="0", max_width="32em", width="auto")
    if all(isinstance(v, Number) for v in values) and len(values) > 1:
        control = widgets.SelectionSlider(options=options, index=index, description=label, style=style,
                                          continuous_update=True, layout=layout)
    else:
        control = widgets.Dropdown(options=options, index=index, description=label, style=style, layout=layout)
    control.add_class("attnlib-control")
    return control


def _stack(states: dict[tuple, str], options: Mapping[str, Sequence], prefix: tuple, indices: Sequence[int],
           labels: Sequence[str]):
    depth = len(prefix)
    values = list(options.values())[depth]
    if depth == len(options) - 1:
        children = [widgets.HTML(_described(states[prefix + (v,)], _settings_text(labels, prefix + (v,))))
                    for v in values]
    else:
        children = [_stack(states, options, prefix + (v,), indices, labels) for v in values]
    return widgets.Stack(children, selected_index=indices[depth])


def _link_all(control, stack, depth: int) -> None:
    if depth == 0:
        widgets.jslink((control, "index"), (stack, "selected_index"))
        return
    for child in stack.children:
        _link_all(control, child, depth - 1)


def precomputed_explorer(render: Callable[..., object], options: Mapping[str, Sequence],
                         initial: Mapping[str, object] | None = None, title: str | None = None,
                         labels: Mapping[str, str] | None = None) -> widgets.VBox:
    """An ipywidgets explorer over every combination of ``options`` (1 or 2 controls), linked in JavaScript.

    ``labels`` names a control in words where ``label_of(name)`` would not (e.g. ``{"d_k": "key width dₖ"}``).
    Returns a ``VBox`` of the controls and the stack of views; works on a static website.
    """
    initial = dict(initial or {})
    names = {name: (labels or {}).get(name, label_of(name)) for name in options}
    states = explorer_states(render, options)
    controls = [_control(names[name], values, initial.get(name)) for name, values in options.items()]
    stack = _stack(states, options, (), [c.index for c in controls], list(names.values()))
    for depth, control in enumerate(controls):
        _link_all(control, stack, depth)
    header = [widgets.HTML(f"<b>{html.escape(title, quote=False)}</b>")] if title else []  # a title is text, not markup
    row = widgets.HBox(controls, layout=widgets.Layout(flex_flow="row wrap", width="100%"))
    box = widgets.VBox([*header, row, stack], layout=widgets.Layout(max_width="100%"))
    box.add_class(EXPLORER_CLASS)
    return box
