"""attnlib.views.colours: CIELAB differences and dichromat simulation (Machado et al. 2009), checked
against the definitions and the sRGB reference values, and d3's palette against the shipped d3."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from attnlib.views import colours
from attnlib.views import html as views_html


def test_category10_is_the_palette_the_shipped_d3_draws_with():
    assert "".join(c[1:] for c in colours.CATEGORY10) in views_html.library_source("d3")


def test_lab_of_srgb_primaries_and_extremes():
    lab = colours.to_lab(["#ff0000", "#ffffff", "#000000", "#808080"])
    assert np.allclose(lab[0], [53.24, 80.09, 67.20], atol=0.05)  # sRGB red, the standard's reference value
    assert np.allclose(lab[1], [100, 0, 0], atol=1e-3) and np.allclose(lab[2], 0, atol=1e-9)
    assert abs(lab[3, 1]) < 1e-3 and abs(lab[3, 2]) < 1e-3  # a grey has no chroma


def test_delta_e_is_the_euclidean_distance_in_lab():
    a, b = ["#1f77b4", "#ffffff"], ["#ff7f0e", "#000000"]
    expected = [np.sqrt(((colours.to_lab([x]) - colours.to_lab([y])) ** 2).sum()) for x, y in zip(a, b, strict=True)]
    assert np.allclose(colours.delta_e(a, b), expected) and np.isclose(colours.delta_e(a, b)[1], 100, atol=1e-3)


@pytest.mark.parametrize("kind", colours.KINDS)
def test_simulation_keeps_greys_and_is_the_matrix_on_linear_rgb(kind):
    greys = np.linspace(0, 1, 5)[:, None].repeat(3, axis=1)
    assert np.allclose(colours.simulate(greys, kind), greys, atol=1e-5)  # each matrix row sums to 1
    rgb = np.random.default_rng(0).random((6, 3))
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    seen = np.clip(linear @ np.array(colours._MACHADO[kind]).T, 0, 1)
    for got, want in zip(colours.simulate(rgb, kind), seen, strict=True):
        assert np.allclose(colours._linear(got), want, atol=1e-9)


def test_red_green_confusion_shrinks_for_red_green_dichromats_only():
    green, red = ["#2ca02c"], ["#d62728"]
    normal = colours.delta_e(green, red)[0]
    for kind in ("protanopia", "deuteranopia"):
        assert colours.delta_e(colours.simulate(green, kind), colours.simulate(red, kind))[0] < normal / 3
    assert colours.delta_e(colours.simulate(green, "tritanopia"), colours.simulate(red, "tritanopia"))[0] > normal / 2


@pytest.mark.parametrize("kind", [None, *colours.KINDS])
def test_closest_pairs_lists_every_pair_sorted_like_a_loop(kind):
    rgb = colours.to_rgb(colours.CATEGORY10) if kind is None else colours.simulate(colours.CATEGORY10, kind)
    loop = {(i, j): colours.delta_e(rgb[i:i + 1], rgb[j:j + 1])[0]
            for i, j in itertools.combinations(range(len(rgb)), 2)}
    pairs = colours.closest_pairs(colours.CATEGORY10, kind)
    assert len(pairs) == 45 and [p[2] for p in pairs] == sorted(p[2] for p in pairs)
    assert all(np.isclose(d, loop[i, j]) for i, j, d in pairs)
    assert colours.closest_pairs(["#000000"], kind) == []


def test_bad_colours_and_kinds_say_what_was_expected():
    with pytest.raises(ValueError, match="'#rrggbb'"):
        colours.to_rgb(["#fff"])
    with pytest.raises(TypeError, match="non-empty list"):
        colours.check_colours("#ffffff")
    with pytest.raises(ValueError, match="expected kind in"):
        colours.simulate(["#ffffff"], "achromatopsia")
