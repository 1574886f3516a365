"""attnlib.views.widgets: explorers whose states are precomputed and switched in JavaScript."""

import ipywidgets as widgets
import matplotlib
from ipywidgets.widgets.widget import _instances as widget_instances
from ipywidgets.widgets.widget_link import Link

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from attnlib.views.widgets import MAX_STATES, explorer_states, precomputed_explorer


def _render(temperature, head):
    return f"<p>T={temperature} head={head}</p>"


OPTIONS = {"temperature": [0.5, 1.0, 2.0], "head": ["a", "b"]}


def test_explorer_states_renders_every_combination():
    states = explorer_states(_render, OPTIONS)
    assert set(states) == {(t, h) for t in OPTIONS["temperature"] for h in OPTIONS["head"]}
    assert states[(2.0, "b")] == "<p>T=2.0 head=b</p>"


def test_figures_become_inline_pngs():
    def render(n):
        fig, ax = plt.subplots()
        ax.plot(range(n))
        return fig

    states = explorer_states(render, {"n": [2, 3]})
    assert all(html.startswith("<img") and "data:image/png;base64," in html for html in states.values())


def _links(root):
    return [w for w in widget_instances.values() if isinstance(w, Link)
            and any(w.source[0] is c for c in root.children[1].children)]


def test_controls_are_linked_to_the_stack_in_javascript():
    box = precomputed_explorer(_render, OPTIONS, initial={"temperature": 1.0}, title="T")
    title, controls, stack = box.children
    slider, dropdown = controls.children
    assert isinstance(slider, widgets.SelectionSlider) and isinstance(dropdown, widgets.Dropdown)
    assert stack.selected_index == 1 and all(child.selected_index == 0 for child in stack.children)
    assert stack.children[2].children[1].value == _render(2.0, "b")
    links = _links(box)
    # one link for the outer stack, one per inner stack for the second control
    assert len(links) == 1 + len(OPTIONS["temperature"])
    assert {(link.source[1], link.target[1]) for link in links} == {("index", "selected_index")}


def test_title_is_text_not_markup():
    box = precomputed_explorer(_render, OPTIONS, title="<img src=x onerror=alert(1)> & 'quotes'")
    assert box.children[0].value == "<b>&lt;img src=x onerror=alert(1)&gt; &amp; 'quotes'</b>"


@pytest.mark.parametrize("options, error, message", [
    ({}, ValueError, "expected options as a mapping of 1 or 2"),
    ({"a": [1], "b": [1], "c": [1]}, ValueError, "expected options as a mapping of 1 or 2"),
    ({"a": []}, ValueError, "expected a non-empty list of values for control 'a'"),
    ({"a": "abc"}, ValueError, "expected a non-empty list of values for control 'a'"),
    ({"a": list(range(MAX_STATES + 1))}, ValueError, f"at most {MAX_STATES} precomputed states"),
])
def test_bad_options_are_refused(options, error, message):
    with pytest.raises(error, match=message):
        explorer_states(lambda **kw: "", options)


def test_render_must_return_html_or_a_figure():
    with pytest.raises(TypeError, match="expected render to return an HTML string or a matplotlib Figure, got int"):
        explorer_states(lambda a: 3, {"a": [1]})
