"""attnlib.views.widgets: explorers whose states are precomputed and switched in JavaScript."""

import ipywidgets as widgets
import matplotlib
from ipywidgets.widgets.widget import _instances as widget_instances
from ipywidgets.widgets.widget_link import Link

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest

from attnlib.views.widgets import EXPLORER_CLASS, MAX_STATES, explorer_states, label_of, precomputed_explorer


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

    states = explorer_states(render, {"n": [2, 3]})  # a small line chart: inline SVG, named for screen readers
    assert all(html.startswith('<svg role="img" aria-label="') for html in states.values())


def _links(root):
    return [w for w in widget_instances.values() if isinstance(w, Link)
            and any(w.source[0] is c for c in root.children[1].children)]


def test_controls_are_linked_to_the_stack_in_javascript():
    box = precomputed_explorer(_render, OPTIONS, initial={"temperature": 1.0}, title="T")
    title, controls, stack = box.children
    slider, dropdown = controls.children
    assert isinstance(slider, widgets.SelectionSlider) and isinstance(dropdown, widgets.Dropdown)
    assert stack.selected_index == 1 and all(child.selected_index == 0 for child in stack.children)
    state = stack.children[2].children[1].value
    assert state.endswith(_render(2.0, "b") + "</div>")
    assert state.startswith('<div class="attnlib-state" data-settings="temperature = 2.0, head = b">')
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


@pytest.mark.parametrize("name, label", [("temperature", "temperature"), ("block_size", "block size"),
                                         ("tiles_seen", "tiles seen"), ("d_k", "dₖ"), ("x_1", "x₁")])
def test_controls_are_labelled_in_words(name, label):
    assert label_of(name) == label
    box = precomputed_explorer(lambda **kw: "<p></p>", {name: [1, 2]})
    assert box.children[0].children[0].description == label


def test_labels_can_be_given():
    box = precomputed_explorer(lambda d_k: f"<p>{d_k}</p>", {"d_k": [1, 2]}, labels={"d_k": "key width dₖ"})
    control = box.children[0].children[0]
    assert control.description == "key width dₖ"
    assert 'data-settings="key width dₖ = 2"' in box.children[1].children[1].value


def test_explorer_wraps_on_a_narrow_screen_and_is_marked_for_the_site():
    box = precomputed_explorer(_render, OPTIONS, title="T")
    _, controls, _ = box.children
    assert EXPLORER_CLASS in box._dom_classes
    assert controls.layout.flex_flow == "row wrap"
    for control in controls.children:
        assert control.layout.flex == "1 1 16em" and control.layout.min_width == "0"
        assert "attnlib-control" in control._dom_classes
    slider = controls.children[0]
    assert slider.options == (("0.5", 0), ("1.0", 1), ("2.0", 2)) and slider.readout  # the value is shown, as text


def test_figure_states_carry_a_description():
    def render(n):
        fig, ax = plt.subplots()
        ax.plot(range(n), label="line")
        ax.set_title(f"n = {n}")
        return fig

    box = precomputed_explorer(render, {"n": [2, 3]})
    state = box.children[1].children[1].value
    assert 'aria-label="&quot;n = 3&quot;: ' in state and "line rises from 0 to 2" in state
    assert "Showing n = 3." in state
