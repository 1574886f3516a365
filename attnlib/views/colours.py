"""Categorical colours as readers with a colour-vision deficiency see them.

BertViz's head view gives head ``h`` the colour ``CATEGORY10[h % 10]`` (d3's ``schemeCategory10``
through ``d3.scaleOrdinal``), and its model view gives layer ``n`` the colour ``CATEGORY10[n % 10]``.
This module measures how far apart such colours stay:

* ``simulate``: the colour a dichromat sees, with the matrices of Machado, Oliveira & Fernandes (2009)
  at severity 1 (protanopia, deuteranopia, tritanopia), applied to linear RGB;
* ``delta_e``: the CIELAB colour difference ΔE*ab (CIE 1976) between sRGB colours (D65 white);
* ``closest_pairs``: every pair of a palette, with its ΔE as seen with each deficiency, closest first.

Colours are N ``'#rrggbb'`` strings or arrays of shape (N, 3) with sRGB values in [0, 1] (N counts colours here).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

import numpy as np

# d3 5.7.0's schemeCategory10 (a test finds this exact sequence in the shipped d3.min.js)
CATEGORY10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
              "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
# Okabe & Ito (2008), "Color Universal Design": eight colours chosen to stay apart for dichromats
OKABE_ITO = ("#000000", "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7")
KINDS = ("protanopia", "deuteranopia", "tritanopia")
# Machado et al. (2009), severity 1.0: linear RGB -> linear RGB as the dichromat sees it
_MACHADO = {
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "tritanopia": ((1.255528, -0.076749, -0.178779), (-0.078411, 0.930809, 0.147602), (0.004733, 0.691367, 0.303900)),
}
# sRGB (linear) -> CIE XYZ, D65 white (IEC 61966-2-1)
_RGB_TO_XYZ = np.array([(0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505)])
_HEX = re.compile(r"#[0-9a-fA-F]{6}")


def check_colours(colours) -> list[str]:
    """``colours`` as a list of at least one ``'#rrggbb'`` string, or a clear error."""
    if isinstance(colours, str) or not isinstance(colours, Sequence) or len(colours) == 0:
        raise TypeError(f"expected colours as a non-empty list of '#rrggbb' strings, got {colours!r}")
    bad = [c for c in colours if not isinstance(c, str) or not _HEX.fullmatch(c)]
    if bad:
        raise ValueError(f"expected every colour as '#rrggbb' (six hex digits), got {bad[0]!r}")
    return [c.lower() for c in colours]


def to_rgb(colours) -> np.ndarray:
    """``'#rrggbb'`` strings (N of them) -> sRGB array (N, 3) in [0, 1]; an array passes through as float."""
    if isinstance(colours, np.ndarray):
        return colours.astype(np.float64)
    return np.array([[int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)] for c in check_colours(colours)])


def _linear(rgb: np.ndarray) -> np.ndarray:
    """sRGB (..., 3) in [0, 1] -> linear RGB (the sRGB transfer function undone)."""
    return np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)


def _encoded(linear: np.ndarray) -> np.ndarray:
    """Linear RGB (..., 3) -> sRGB in [0, 1] (clipped first)."""
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, 12.92 * linear, 1.055 * linear ** (1 / 2.4) - 0.055)


def simulate(colours, kind: str) -> np.ndarray:
    """sRGB colours (N, 3) or N hex strings -> (N, 3): how a reader with ``kind`` (see ``KINDS``) sees them."""
    if kind not in _MACHADO:
        raise ValueError(f"expected kind in {KINDS}, got {kind!r}")
    matrix = np.array(_MACHADO[kind])
    return _encoded(_linear(to_rgb(colours)) @ matrix.T)  # (N, 3) @ (3, 3) -> (N, 3)


def to_lab(colours) -> np.ndarray:
    """sRGB colours (N, 3) or N hex strings -> CIELAB (N, 3): L* in [0, 100], a*, b* (D65 white)."""
    xyz = _linear(to_rgb(colours)) @ _RGB_TO_XYZ.T / _RGB_TO_XYZ.sum(axis=1)  # normalised by the white point
    f = np.where(xyz > (6 / 29) ** 3, np.cbrt(xyz), xyz / (3 * (6 / 29) ** 2) + 4 / 29)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def delta_e(first, second) -> np.ndarray:
    """ΔE*ab = ‖Lab(first) − Lab(second)‖ for colours (N, 3) or N hex strings each -> (N,)."""
    return np.linalg.norm(to_lab(first) - to_lab(second), axis=-1)


def closest_pairs(colours, kind: str | None = None) -> list[tuple[int, int, float]]:
    """Every pair (i, j, ΔE*ab) of a palette of N distinct colours as seen with ``kind``
    (``None``: normal vision), closest first."""
    rgb = to_rgb(colours) if kind is None else simulate(colours, kind)
    pairs = list(itertools.combinations(range(len(rgb)), 2))
    if not pairs:
        return []
    first, second = zip(*pairs, strict=True)
    distances = delta_e(rgb[list(first)], rgb[list(second)])
    return sorted(((i, j, float(d)) for (i, j), d in zip(pairs, distances, strict=True)), key=lambda p: p[2])
