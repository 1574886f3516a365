"""Explorers that work without a kernel: every state is precomputed and switched in the page.

An explorer is a row of controls (sliders, dropdowns) above a stack of precomputed views, one per
combination of settings. Each control is linked to the stack *in JavaScript* (``ipywidgets.jslink``
on the control's ``index`` and the stack's ``selected_index``), so moving a slider on the published
website shows the matching view with no Python running. In a notebook it behaves the same.

``explorer_states`` is the pure part (it computes every view); ``precomputed_explorer`` only draws.
"""

from __future__ import annotations

import html
import itertools
from collections.abc import Callable, Mapping, Sequence
from numbers import Number

import ipywidgets as widgets

from attnlib.views.plots import figure_to_html

MAX_STATES = 64


def _as_html(view) -> str:
    if isinstance(view, str):
        return view
    if hasattr(view, "savefig"):  # a matplotlib Figure
        return figure_to_html(view)
    raise TypeError(f"expected render to return an HTML string or a matplotlib Figure, got {type(view).__qualname__}")


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


def _control(name: str, values: Sequence, initial):
    index = list(values).index(initial) if initial is not None else 0
    labels = [(str(v), i) for i, v in enumerate(values)]
    style = {"description_width": "initial"}
    if all(isinstance(v, Number) for v in values) and len(values) > 1:
        return widgets.SelectionSlider(options=labels, index=index, description=name, style=style,
                                       continuous_update=True)
    return widgets.Dropdown(options=labels, index=index, description=name, style=style)


def _stack(states: dict[tuple, str], options: Mapping[str, Sequence], prefix: tuple, indices: Sequence[int]):
    depth = len(prefix)
    values = list(options.values())[depth]
    if depth == len(options) - 1:
        children = [widgets.HTML(states[prefix + (v,)]) for v in values]
    else:
        children = [_stack(states, options, prefix + (v,), indices) for v in values]
    return widgets.Stack(children, selected_index=indices[depth])


def _link_all(control, stack, depth: int) -> None:
    if depth == 0:
        widgets.jslink((control, "index"), (stack, "selected_index"))
        return
    for child in stack.children:
        _link_all(control, child, depth - 1)


def precomputed_explorer(render: Callable[..., object], options: Mapping[str, Sequence],
                         initial: Mapping[str, object] | None = None, title: str | None = None):
    """An ipywidgets explorer over every combination of ``options`` (1 or 2 controls), linked in JavaScript.

    Returns a ``VBox`` of the controls and the stack of views; works on a static website.
    """
    initial = dict(initial or {})
    states = explorer_states(render, options)
    controls = [_control(name, values, initial.get(name)) for name, values in options.items()]
    stack = _stack(states, options, (), [c.index for c in controls])
    for depth, control in enumerate(controls):
        _link_all(control, stack, depth)
    header = [widgets.HTML(f"<b>{html.escape(title, quote=False)}</b>")] if title else []  # a title is text, not markup
    return widgets.VBox([*header, widgets.HBox(controls), stack])
