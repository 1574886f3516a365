"""attnlib.views.plots: heatmaps, head grids and compact inline PNGs."""

import base64
import io
import re
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from PIL import Image

from attnlib.views import alt_text, images, plots


def _weights(h=2, lq=3, lk=4, seed=0):
    return torch.softmax(torch.randn(h, lq, lk, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_to_numpy_copies_tensors_of_any_dtype():
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    out = plots.to_numpy(t)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3)
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3))


def test_heatmap_draws_the_matrix_with_labels_and_annotations():
    w = _weights()[0]
    ax = plots.heatmap(w, ["a", "b", "c"], ["w", "x", "y", "z"], title="t")
    np.testing.assert_allclose(ax.images[0].get_array(), w.numpy())
    assert [t.get_text() for t in ax.get_xticklabels()] == ["w", "x", "y", "z"]
    assert len(ax.texts) == 12 and ax.texts[0].get_text() == f"{w[0, 0].item():.2f}"
    plt.close("all")


@pytest.mark.parametrize("bad, message", [
    (dict(weights=np.zeros(3)), r"expected weights of shape \(Lq, Lk\), got \(3,\)"),
    (dict(weights=np.zeros((2, 2)), row_labels=["a"]), r"expected 2 row_labels .* got 1"),
])
def test_heatmap_rejects_bad_shapes(bad, message):
    with pytest.raises(ValueError, match=message):
        plots.heatmap(**bad)


def test_heatmap_shows_dollar_tokens_as_text_not_mathtext():
    tokens = ["$$", "$x^2$", "$_$", "cat"]  # as mathtext: a ValueError, a superscript, a ValueError
    ax = plots.heatmap(np.eye(4), tokens, tokens)
    ax.figure.canvas.draw()  # raises if any label is parsed as mathtext
    expected = [r"\$\$", r"\$x^2\$", r"\$_\$", "cat"]  # escaped dollars: drawn as written
    assert [label.get_text() for label in ax.get_xticklabels()] == expected
    assert [label.get_text() for label in ax.get_yticklabels()] == expected
    plt.close(ax.figure)


def test_head_grid_has_one_panel_per_head():
    fig = plots.head_grid(_weights(h=3), ["a", "b", "c", "d"], query_tokens=["a", "b", "c"], ncols=2)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 3 and [ax.get_title() for ax in drawn] == ["head 0", "head 1", "head 2"]
    with pytest.raises(ValueError, match=r"expected weights of shape \(H, Lq, Lk\), got \(3, 4\)"):
        plots.head_grid(_weights()[0], ["a"])
    plt.close("all")


def test_palette_png_is_smaller_and_keeps_the_picture():
    fig, ax = plt.subplots(figsize=(3, 3))
    plots.heatmap(_weights(lq=5, lk=5)[0], ax=ax)
    full = io.BytesIO()
    fig.savefig(full, format="png", dpi=72, bbox_inches="tight")
    compact = images.palette_png(fig, colors=64)
    assert len(compact) < len(full.getvalue())
    a = np.asarray(Image.open(io.BytesIO(compact)).convert("RGB"), dtype=float)
    b = np.asarray(Image.open(full).convert("RGB"), dtype=float)
    assert a.shape == b.shape and np.abs(a - b).mean() < 8  # same picture, fewer colours
    plt.close("all")


def _dense_figure():
    """A figure that is cheaper as pixels than as vectors (20 000 points)."""
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.scatter(*np.random.default_rng(0).random((2, 20_000)), s=1)
    return fig


def test_figure_to_html_is_an_inline_2x_png_with_escaped_alt():
    fig = _dense_figure()
    html = plots.figure_to_html(fig, alt='a "quoted" <alt>')
    assert html.startswith('<img alt="a &quot;quoted&quot; &lt;alt&gt;. 20000 plotted points." width="')
    payload = html.split("base64,")[1].rstrip('"/>')
    png = base64.b64decode(payload)
    assert png.startswith(b"\x89PNG")
    width = int(html.split('width="')[1].split('"')[0])
    assert width == -(-Image.open(io.BytesIO(png)).size[0] // 2)  # drawn at twice the size it is shown
    assert not plt.get_fignums()  # the figure was closed


def test_figure_to_html_describes_the_figure_by_default():
    fig, ax = plt.subplots()
    plots.heatmap(np.array([[0.9, 0.1], [0.3, 0.7]]), ["q1", "q2"], ["k1", "k2"], ax=ax, title="toy")
    html = plots.figure_to_html(fig)
    alt = re.search(r'(?:alt|aria-label)="([^"]*)"', html).group(1)
    assert alt.startswith("&quot;toy&quot;: heatmap of 2 rows (query) by 2 columns (key)")
    assert "q1: k1 0.9; q2: k2 0.7" in alt and "each row sums to 1" in alt
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    titled = re.search(r'(?:alt|aria-label)="([^"]*)"', plots.figure_to_html(fig, alt="the diagonal")).group(1)
    assert titled.startswith("the diagonal. a curve rises from 0 to 1")  # the caller's title, then the content


def test_html_heatmap_shades_cells_and_escapes_labels():
    m = np.array([[0.0, 0.5], [1.0, 0.25]])
    table = plots.html_heatmap(m, ["<b>q</b>", "r"], ["k1", "k&2"], caption="<i>c</i>")
    assert "&lt;b&gt;q&lt;/b&gt;" in table and "k&amp;2" in table and "&lt;i&gt;c&lt;/i&gt;" in table
    assert "<b>" not in table and "<i>" not in table
    assert table.count("<td style") == 4 and ">0.50</td>" in table
    assert "background:#1f77b4;color:#fff" in table  # the 1.0 cell at vmax=1
    relative = plots.html_heatmap(m / 4, ["a", "b"], ["x", "y"], vmax=None)
    assert "background:#1f77b4" in relative  # shaded against the matrix's own maximum
    with pytest.raises(ValueError, match=r"expected 2 col_labels .* got 1"):
        plots.html_heatmap(m, ["a", "b"], ["x"])


def test_heatmap_has_a_colour_bar_and_centres_signed_scores_at_zero():
    ax = plots.heatmap(np.array([[-2.0, 1.0], [0.5, 0.0]]), title="scores")
    image = ax.images[0]
    assert image.get_cmap().name == plots.DIVERGING
    assert image.norm.vmin == -2.0 and image.norm.vmax == 2.0  # symmetric: white is 0
    bars = [a for a in ax.figure.axes if alt_text.is_colorbar(a)]
    assert len(bars) == 1 and bars[0]._colorbar.mappable is image
    weights = plots.heatmap(np.array([[0.2, 0.8], [0.5, 0.5]]))
    assert weights.images[0].get_cmap().name == "viridis"
    assert not any(alt_text.is_colorbar(a) for a in plots.heatmap(np.eye(2), colorbar=False).figure.axes)
    plt.close("all")


def test_annotations_contrast_with_their_cells():
    ax = plots.heatmap(np.array([[0.0, 1.0]]), vmin=0, vmax=1, cmap="viridis")
    # viridis: 0 is dark purple (white text), 1 is light yellow (black text)
    assert [t.get_color() for t in ax.texts] == ["white", "black"]
    plt.close("all")


def test_head_grid_shares_one_colour_bar():
    fig = plots.head_grid(_weights(h=3), ["a", "b", "c", "d"], query_tokens=["a", "b", "c"], ncols=2)
    bars = [a for a in fig.axes if alt_text.is_colorbar(a)]
    assert len(bars) == 1 and bars[0].get_ylabel() == "weight"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chapters change labels and the size; the layout follows when it is drawn
        fig.set_size_inches(8, 5)
        fig.canvas.draw()
    panels = [a for a in fig.axes if not alt_text.is_colorbar(a) and a.get_visible() and a.axison]
    gap = bars[0].get_position().x0 - max(a.get_position().x1 for a in panels)
    assert 0 < gap < 0.06, f"the colour bar stands {gap:.2f} of the figure's width from the panels (chapter 5's gap)"
    plt.close("all")


def test_describe_figure_reads_curves_bars_and_panels():
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 2, 4], [1, 4, 16], label="squares")
    left.axhline(3)  # a reference line: not described
    left.set(xlabel="n", ylabel="n squared", title="growth")
    right.bar(range(3), [0.2, 0.5, 0.3])
    right.set_xticks(range(3), ["the", "cat", "sat"])
    text = plots.describe_figure(fig)
    assert text.startswith("Figure with 2 panels. Panel 1: \"growth\": n squared against n; squares rises from 1 to 16")
    assert "Panel 2:" in text and "3 bars, tallest cat at 0.5, lowest the at 0.2" in text
    fig.suptitle("two views")
    assert plots.describe_figure(fig).startswith('Figure with 2 panels, "two views". ')
    plt.close("all")


def test_figure_png_carries_its_description_and_scale():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0], label="down")
    png, meta = plots.figure_png(fig)
    text = plots.png_text(png)
    assert text[images.ALT_KEY] == meta["alt"] == plots.describe_figure(fig) and "down falls from 1 to 0" in meta["alt"]
    assert text[images.SCALE_KEY] == "2"
    width, height = Image.open(io.BytesIO(png)).size
    assert (meta["width"], meta["height"]) == (-(-width // 2), -(-height // 2))
    assert meta["width"] == pytest.approx(3 * 72, abs=30)  # shown at 72 dpi, whatever the tight box trims
    plt.close("all")


def test_use_compact_figures_gives_described_2x_images():
    from IPython.core.interactiveshell import InteractiveShell  # noqa: PLC0415 - only this test needs a shell

    shell = InteractiveShell.instance()
    try:
        plots.use_compact_figures()
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.set_title("a title")
        data, metadata = shell.display_formatter.format(fig)
        assert data["image/png"].startswith(b"\x89PNG")
        assert metadata["image/png"]["alt"].startswith('"a title"') and metadata["image/png"]["width"] > 0
    finally:
        InteractiveShell.clear_instance()
        plt.close("all")


def test_html_heatmap_colours_are_opaque_and_readable():
    table = plots.html_heatmap(np.array([[0.0, 1.0]]), ["q"], ["a", "b"], caption="c")
    cells = re.findall(r"background:(#[0-9a-f]{6});color:(#[0-9a-f]{3})", table)
    assert cells == [("#ffffff", "#000"), ("#1f77b4", "#fff")]
    assert '<th scope="row">q</th>' in table and '<th scope="col">a</th>' in table
    assert "linear-gradient(90deg,#fff,#1f77b4)" in table  # the colour bar


def test_small_charts_become_inline_svg_with_unique_ids():
    def chart(title):
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.bar(range(3), [0.2, 0.5, 0.3])
        ax.set_title(title)
        return fig

    first, second = plots.figure_to_html(chart("one")), plots.figure_to_html(chart("two"))
    assert first.startswith('<svg role="img" aria-label="&quot;one&quot;: 3 bars, tallest')
    assert "<text" in first and "<metadata>" not in first and "<?xml" not in first  # text stays text
    ids = [set(re.findall(r'\bid="([^"]+)"', html)) for html in (first, second)]
    assert ids[0] and not ids[0] & ids[1]  # two figures on one page never share an id
    for html, own in zip((first, second), ids, strict=True):
        assert set(re.findall(r"url\(#([^)]+)\)", html)) <= own  # every reference points inside its figure
    assert first == plots.figure_to_html(chart("one"))  # deterministic: same figure, same markup
    dense = plots.figure_to_html(_dense_figure())
    assert dense.startswith("<img") and "data:image/png;base64," in dense  # pixels are cheaper here
    assert plots.figure_to_html(plots.heatmap(np.eye(3)).figure).startswith("<img")  # a heatmap is an image
    assert not plt.get_fignums()


def test_figure_to_html_draws_only_the_format_it_keeps(monkeypatch):
    drawn, draws = [], []
    for name in ("_drawn_png", "figure_svg"):
        original = getattr(images, name)
        monkeypatch.setattr(images, name, lambda *a, _f=original, _n=name, **k: drawn.append(_n) or _f(*a, **k))
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(1) or draw(self, renderer))
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 0, 1])
    plots.figure_to_html(fig)
    assert len(draws) == 3  # once for the text alternative, twice by savefig (its crop, then the SVG)
    plots.figure_to_html(plots.heatmap(np.eye(2)).figure)
    assert drawn == ["figure_svg", "_drawn_png"]
    assert len(draws) == 6  # the PNG's text size and colour bars are read from the text alternative's draw


def test_only_savefig_renders_pixels(monkeypatch):
    """The text alternative, the text size and the colour bars read the figure's layout: one pass without pixels
    (``draw_without_rendering``). Only the file's own draw rasterizes, as one plain ``savefig`` does."""
    rendered = []
    draw_path = RendererAgg.draw_path  # every line, patch and spine (an instance without pixels has its own no-op)
    monkeypatch.setattr(RendererAgg, "draw_path", lambda self, *a, **k: rendered.append(1) or draw_path(self, *a, **k))
    plots.heatmap(np.eye(2)).figure.savefig(io.BytesIO(), format="png")
    once = len(rendered)
    assert once > 0
    rendered.clear()
    images.figure_png(plots.heatmap(np.eye(2)).figure)
    assert len(rendered) == once
    rendered.clear()
    plots.figure_to_html(plots.heatmap(np.eye(2)).figure)
    assert len(rendered) == once
    plt.close("all")


def test_colour_images_say_which_rows_change_sharply():
    fig, ax = plt.subplots()
    smooth = np.linspace(0, 1, 50)[None, :, None] * np.ones((1, 1, 3))
    steps = np.repeat(np.eye(3)[None, [0, 0, 1, 1, 2]], 10, axis=1)  # (1, 50, 3): two jumps of colour
    ax.imshow(np.concatenate([smooth, steps]), aspect="auto")
    ax.set_yticks([0, 1], ["soft", "hard"])
    ax.set(xlabel="direction", title="lookup")
    text = plots.describe_figure(fig)
    assert text == ('"lookup": colour grid of 2 rows by 50 columns along direction; soft: changes gradually; '
                    "hard: 2 sharp colour changes.")
    plt.close("all")


# --- true text alternatives, and colour bars, of every figure ---------------------------------------------

DEGENERATE = re.compile(r"from (-?[\d.e+-]+) to \1(?![\d.])")  # "from 3.5 to 3.5": a range that is a point
PLACEHOLDER = re.compile(r"\((rows|columns)\)")
EMPTY_NAME = re.compile(r"(^|[;:.] )\s*:|:  |: ;")  # a label with nothing before its colon ("[CLS]:  0.98")
POINT_AS_RANGE = re.compile(r"goes at [^;.]+")  # "as x goes at 120": points over one x read as a curve


def alt_problems(alt: str) -> list[str]:
    """What is wrong with a generated text alternative (empty when nothing)."""
    problems = [f"degenerate range {m.group(0)!r}" for m in DEGENERATE.finditer(alt)]
    problems += [f"placeholder {m.group(0)!r}" for m in PLACEHOLDER.finditer(alt)]
    problems += [f"empty label near {alt[max(m.start() - 20, 0):m.end() + 10]!r}" for m in EMPTY_NAME.finditer(alt)]
    problems += [f"points over one x read as a curve: {m.group(0)!r}" for m in POINT_AS_RANGE.finditer(alt)]
    panels = re.findall(r"Panel \d+: (.*?)(?= Panel \d+: |$)", alt)
    if len(panels) != len(set(panels)):
        problems.append("two panels described identically")
    return problems


def test_describer_reads_reference_lines_flat_lines_arrows_and_legends():
    fig, (left, middle, right) = plt.subplots(1, 3)
    left.plot([24, 500, 999], [3.47] * 3, label="guessing")
    left.axvline(3.5, color="red")
    left.set(xlabel="training step", ylabel="loss")
    middle.annotate("", xy=(2, 1), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "tab:green"})
    middle.plot([], [], color="tab:green", label="key k")
    middle.legend()
    for offset, label in ((-0.2, "step 0"), (0.2, "step 100")):
        right.bar(np.arange(3) + offset, [0.1, 0.5, 0.2] if offset < 0 else [0.3, 0.3, 0.3], width=0.4, label=label)
    right.set_xticks(range(3), ["layer 1\nhead 0", "layer 1\nhead 1", "layer 2\nhead 0"])
    text = plots.describe_figure(fig)
    assert alt_problems(text) == [], text
    assert "guessing: a horizontal line at loss = 3.47" in text and "a vertical line at training step = 3.5" in text
    assert "arrow key k: from (0, 0) to (2, 1)" in text
    assert 'bars "step 0": 3 bars, tallest layer 1 head 1 at 0.5' in text
    assert 'bars "step 100": 3 bars, all at 0.3' in text
    plt.close("all")


def test_an_arrow_is_named_by_the_text_beside_its_head_not_by_a_label_of_another_arrow():
    """Two black arrows, each with a black label near its own head (as chapter 1's angle figure): each arrow
    gets its own label; a lone label far from every arrow still names the one arrow of its colour."""
    fig, (both, alone) = plt.subplots(1, 2)
    for head, name in (((2.0, 1.0), "q"), ((1.3, 0.7), "0°")):
        both.annotate("", xy=head, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "black"})
        both.text(head[0] * 1.2, head[1] * 1.2 - 0.1, name)
    both.set(xlim=(-3, 3), ylim=(-3, 3))
    alone.annotate("", xy=(1, 1), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "tab:red"})
    alone.text(-2, -2, "r", color="tab:red")
    alone.set(xlim=(-3, 3), ylim=(-3, 3))
    text = plots.describe_figure(fig)
    assert "arrow q: from (0, 0) to (2, 1)" in text and "arrow 0°: from (0, 0) to (1.3, 0.7)" in text, text
    assert "arrow r: from (0, 0) to (1, 1)" in text, text
    plt.close("all")


def test_a_value_negligible_beside_the_largest_reads_as_zero_on_a_linear_scale_only():
    """Chapter 3's entropy curve starts at 3.8e-171 beside values near 1.8: on a linear axis it reads as 0 (and a
    heatmap of softmax weights from 0 to 1, not from 1.1e-07); on a log axis every value keeps its digits."""
    fig, (linear, log, weights) = plt.subplots(1, 3)
    y = np.array([3.8e-171, 0.5, 1.79])
    linear.plot([0.01, 1, 100], y, label="entropy")
    log.semilogy([1, 2, 3], [1e-40, 1e-20, 1.0], label="gradient")
    plots.heatmap(np.array([[1.1e-7, 1 - 1.1e-7], [0.5, 0.5]]), ["a", "b"], ["a", "b"], ax=weights)
    text = plots.describe_figure(fig)
    assert "entropy rises from 0 to 1.79" in text, text
    assert "gradient rises from 1e-40 to 1" in text, text
    assert "values from 0 to 1" in text and "e-07" not in text, text
    plt.close("all")


def test_describer_reads_points_over_one_x_as_points_not_a_curve():
    fig, ax = plt.subplots()
    ax.plot(np.arange(0, 361, 30), np.cos(np.radians(np.arange(0, 361, 30))), label="q·k")
    ax.plot([120], [-0.5], "o")  # an explorer's current state: one marker
    ax.plot([0.998, 0.999, 1.0], [3.34, 3.345, 3.35], "^", label="decoding step")  # x alike once printed
    ax.set(xlabel="θ (degrees)", ylabel="score")
    text = plots.describe_figure(fig)
    assert alt_problems(text) == [], text
    assert "a point at θ (degrees) = 120, score = -0.5" in text
    assert "decoding step: 3 points at θ (degrees) = 1, score from 3.34 to 3.35" in text
    assert alt_problems("a curve at -1.68 as θ (degrees) goes at 120.")  # what it used to say
    plt.close("all")


def test_describer_names_panels_of_a_grid_and_tells_heads_apart():
    weights = np.zeros((2, 16, 16))
    weights[0, np.arange(16), np.maximum(np.arange(16) - 1, 0)] = 1  # previous token
    weights[1, np.arange(16), np.maximum(np.arange(16) - 7, 0)] = 1  # seven back
    fig = plots.head_grid(weights, [f"t{i}" for i in range(16)], ncols=2)
    for ax in fig.axes[1:2]:
        ax.set_yticklabels([])
        ax.set_ylabel("")
    text = plots.describe_figure(fig)
    assert alt_problems(text) == [], text
    assert "1 position before the query" in text and "7 positions before the query" in text
    assert text.count("(query)") == 2  # the blank panel borrows its neighbour's axis name
    flat = plots.describe_figure(plots.heatmap(np.zeros((1, 3)), ["a"], ["x", "y", "z"]).figure)
    assert "every value 0" in flat and alt_problems(flat) == []
    plt.close("all")


def test_colour_bar_census_sees_a_bar_drawn_over_a_panel():
    fig, axes = plt.subplots(1, 2)
    for ax in axes:
        plots.heatmap(np.eye(3), ax=ax)  # a bar beside each panel
    assert images.colour_bars(fig) == {"heatmaps": 2, "colorbars": 2, "overlaps": []}
    fig.colorbar(axes[0].images[0], ax=axes)  # ... and one more for both: three bars for two heatmaps
    assert images.colour_bars(fig)["colorbars"] == 3
    inset = fig.add_axes(axes[0].get_position().bounds)  # a bar placed right on top of a panel
    fig.colorbar(axes[0].images[0], cax=inset)
    assert images.colour_bars(fig)["overlaps"]
    plt.close("all")


# --- a figure's message: the first sentence of its text alternative ----------------------------------------


def test_say_puts_the_message_first_and_the_data_summary_after():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [0, 1, 4], label="cost")
    summary = plots.describe_figure(fig)
    assert plots.say(ax, "The cost grows  faster than\nthe length.") is None  # a cell ending with it shows nothing
    assert plots.message_of(fig) == "The cost grows faster than the length."
    assert plots.describe_figure(fig) == f"The cost grows faster than the length. {summary}"
    png, meta = plots.figure_png(fig)
    assert meta["alt"] == plots.png_text(png)[images.ALT_KEY] == plots.describe_figure(fig)
    assert plots.png_text(png)[images.MESSAGE_KEY] == "The cost grows faster than the length."
    plt.close("all")


def test_explorer_states_lead_with_the_message_then_the_caller_title_then_the_data():
    for dense in (False, True):  # inline SVG and described PNG
        fig = _dense_figure() if dense else plt.subplots()[0]
        if not dense:
            fig.axes[0].plot([0, 1], [0, 1])
        plots.say(fig, 'A "quoted" message says <what> it shows.')
        html = plots.figure_to_html(fig, alt="state 2")
        alt = re.search(r'(?:alt|aria-label)="([^"]*)"', html).group(1)
        assert alt.startswith("A &quot;quoted&quot; message says &lt;what&gt; it shows. state 2. ")
        assert len(alt) > len("A &quot;quoted&quot; message says &lt;what&gt; it shows. state 2. ") + 10
        assert f'{images.MESSAGE_ATTRIBUTE}="A &quot;quoted&quot; message says &lt;what&gt; it shows."' in html


def test_a_figure_without_a_message_keeps_the_summary_alone():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png, meta = plots.figure_png(fig)
    assert plots.message_of(ax) is None and images.MESSAGE_KEY not in plots.png_text(png)
    assert meta["alt"] == plots.describe_figure(fig) and meta["alt"].startswith("a curve falls")
    assert images.MESSAGE_ATTRIBUTE not in plots.figure_to_html(fig)


@pytest.mark.parametrize(("message", "expected"), [
    ("", "at least 4 words"),
    ("Rises.", "at least 4 words"),
    ("the weights rise with T.", "a capital letter"),
    ("The weights rise with T", "a full stop"),
    ("The weights rise. Then they fall.", "one sentence only"),
])
def test_say_refuses_what_is_not_one_sentence(message, expected):
    fig = plt.figure()
    with pytest.raises(ValueError, match=expected) as error:
        plots.say(fig, message)
    assert repr(message) in str(error.value)  # says what came
    assert plots.message_of(fig) is None
    plt.close("all")


def test_say_names_what_it_expected_for_a_wrong_type():
    with pytest.raises(TypeError, match="expected the figure's message as a str .*got int"):
        plots.say(plt.figure(), 42)
    with pytest.raises(TypeError, match="expected a matplotlib Figure or Axes .*got str"):
        plots.say("figure 3", "The weights rise with T.")
    fig = plt.figure()
    plots.say(fig, "√dₖ scaling keeps the spread near 1.")  # a symbol may open a sentence
    assert plots.message_of(fig) == "√dₖ scaling keeps the spread near 1."
    plt.close("all")


def test_figures_carry_their_smallest_text_size():
    """The site's browser tests read each figure's smallest text (``attnlib-text-px``) and multiply it by the
    figure's scale on the page: it must be the smallest of every text drawn, ticks in view included."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6, 2))
    left.plot([0, 1], [1, 0], label="down")
    left.legend(fontsize=7)
    left.set_title("big", fontsize=14)
    right.set_xlim(0, 1)
    right.tick_params(labelsize=8)
    right.text(0.5, 0.5, "", fontsize=3)  # empty: never drawn
    assert images.text_px(fig) == 7
    png, _ = plots.figure_png(fig)
    assert plots.png_text(png)[images.TEXT_KEY] == "7"
    left.get_legend().remove()
    assert images.text_px(fig) == 8  # the right panel's tick labels
    assert images.text_px(fig, dpi=144) == 16
    html = plots.figure_to_html(_dense_figure())
    assert re.search(rf'{images.TEXT_ATTRIBUTE}="[0-9.]+"', html)
    plt.close("all")


@pytest.mark.slow  # seconds: make check leaves it to make test
def test_head_grid_text_stays_legible_in_the_column():
    """A 12-head grid at its default width, shown in the 688 px column, keeps its text at 9 px or more."""
    fig = plots.head_grid(np.full((12, 6, 6), 1 / 6), [f"t{i}" for i in range(6)])
    png, meta = plots.figure_png(fig)
    shown = float(plots.png_text(png)[images.TEXT_KEY]) * min(1.0, 688 / meta["width"])
    assert shown >= 9, f"the grid is {meta['width']} px wide: its smallest text shows at {shown:.1f} px"
    plt.close("all")


def test_alt_text_reads_mathtext_a_curves_turn_ties_and_negligible_bars():
    """A screen reader hears symbols, not TeX; a curve with one valley is read with where it turns; a heatmap row's
    tied largest values are all named; a bar a millionth of the tallest reads as 0 (issue #45)."""
    fig, (left, right) = plt.subplots(1, 2)
    w = np.linspace(-1, 5, 61)
    left.plot(w, (w - 2) ** 2, label="loss $\\mathcal{L}(w)$")
    left.set(xlabel="w", ylabel="scaled by $1/\\sqrt{d_k}$")
    right.bar(range(3), [1.0, 0.5, 1e-9])
    text = plots.describe_figure(fig)
    assert "$" not in text and "\\" not in text and "scaled by 1/√dₖ" in text, text
    assert "loss L(w) falls from 9 to 0 at w = 2, then rises to 9" in text, text
    assert "lowest 2 at 0" in text, text
    ties = plots.describe_figure(plots.heatmap(np.array([[1.0, 1.0, 0.0], [0.0, 0.2, 1.0]]), ["cat", "mat"],
                                               ["noun", "actor", "place"]).figure)
    assert "cat: noun, actor 1; mat: place 1" in ties, ties
    plt.close("all")


def test_alt_text_reads_a_turn_too_small_to_print_as_a_trend_and_a_pcolormesh_as_a_heatmap():
    """A curve whose rise is below the printed digits falls (never 'rises from 2.79 to 2.79'); a matrix drawn with
    pcolormesh on its data's coordinates is a heatmap, its rows and columns named by them, with its colour bar."""
    fig, (left, right) = plt.subplots(1, 2)
    left.plot(np.linspace(0, 5, 52), np.concatenate([[2.79, 2.791], np.linspace(2.79, 2.17, 50)]), label="σ = 2")
    keys, queries = np.array([0.5, 1.2, 3.0, 4.4]), np.linspace(0, 5, 6)
    weights = np.exp(-((queries[:, None] - keys[None]) ** 2))
    mesh = right.pcolormesh(keys, queries, weights / weights.sum(1, keepdims=True), shading="nearest", vmin=0)
    fig.colorbar(mesh, ax=right, label="weight")
    right.set(xlabel="observed x (key)", ylabel="query x")
    text = plots.describe_figure(fig)
    assert "σ = 2 falls from 2.79 to 2.17" in text, text
    assert ("heatmap of 6 rows (query x, from 0 to 5) by 4 columns (observed x (key), from 0.5 to 4.4), values from"
            in text and "each row sums to 1; largest value in each row: 0: 0.5" in text), text
    assert "colour bar: weight" in text and "plotted points" not in text, text
    assert images.colour_bars(fig) == {"heatmaps": 1, "colorbars": 1, "overlaps": []}
    plt.close("all")
