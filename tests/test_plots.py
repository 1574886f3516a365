"""attnlib.views.plots: heatmaps, head grids and compact inline PNGs."""

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from PIL import Image

from attnlib.views import plots


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
    compact = plots.palette_png(fig, colors=64)
    assert len(compact) < len(full.getvalue())
    a = np.asarray(Image.open(io.BytesIO(compact)).convert("RGB"), dtype=float)
    b = np.asarray(Image.open(full).convert("RGB"), dtype=float)
    assert a.shape == b.shape and np.abs(a - b).mean() < 8  # same picture, fewer colours
    plt.close("all")


def test_figure_to_html_is_an_inline_png_with_escaped_alt():
    fig, _ = plt.subplots()
    html = plots.figure_to_html(fig, alt='a "quoted" <alt>')
    assert html.startswith('<img alt="a &quot;quoted&quot; &lt;alt&gt;" src="data:image/png;base64,')
    payload = html.split("base64,")[1].rstrip('"/>')
    assert base64.b64decode(payload).startswith(b"\x89PNG")
    assert not plt.get_fignums()  # the figure was closed


def test_html_heatmap_shades_cells_and_escapes_labels():
    m = np.array([[0.0, 0.5], [1.0, 0.25]])
    table = plots.html_heatmap(m, ["<b>q</b>", "r"], ["k1", "k&2"], caption="<i>c</i>")
    assert "&lt;b&gt;q&lt;/b&gt;" in table and "k&amp;2" in table and "&lt;i&gt;c&lt;/i&gt;" in table
    assert "<b>" not in table and "<i>" not in table
    assert table.count("<td ") == 4 and ">0.50</td>" in table
    assert "rgba(31,119,180,1.00);color:white" in table  # the 1.0 cell at vmax=1
    relative = plots.html_heatmap(m / 4, ["a", "b"], ["x", "y"], vmax=None)
    assert "rgba(31,119,180,1.00)" in relative  # shaded against the matrix's own maximum
    with pytest.raises(ValueError, match=r"expected 2 col_labels .* got 1"):
        plots.html_heatmap(m, ["a", "b"], ["x"])
