"""attnlib.scaling: the 1/√Dk scale, and the measurements that justify it, against their theory."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import randn, tol

from attnlib import scale_scores, softmax
from attnlib.scaling import (
    _random_qk,
    _sample_scores,
    score_variance,
    softmax_gradient_norm,
    softmax_saturation,
    temperature_for,
)

WIDTHS = [1, 4, 16, 64, 256, 1024]
N_SAMPLES = 10_000
SIGMAS = 5  # a 5-sigma band: a correct implementation fails it with probability ~6e-7


def variance_sd(d_k: int, n: int, scaled: bool) -> float:
    """Standard error of the sample variance of q·k over n samples.

    q·k is a sum of Dk products of independent standard normals (each with variance 1 and fourth
    moment 9), so Var(q·k) = Dk and its fourth central moment is 3 Dk² + 6 Dk. The sample variance
    then has variance (μ4 - σ⁴) / n = (2 Dk² + 6 Dk) / n; scaling by 1/√Dk divides its sd by Dk.
    """
    sd = math.sqrt((2 * d_k**2 + 6 * d_k) / n)
    return sd / d_k if scaled else sd


def test_scale_scores_divides_by_sqrt_dk():
    scores = randn(2, 4, 6, seed=1)
    torch.testing.assert_close(scale_scores(scores, 64), scores / 8, **tol(torch.float64))
    assert scale_scores(scores.float(), 64).dtype == torch.float32


@pytest.mark.parametrize("d_k", WIDTHS)
def test_unscaled_score_variance_is_dk(d_k):
    measured = score_variance(d_k, n_samples=N_SAMPLES)
    assert abs(measured - d_k) < SIGMAS * variance_sd(d_k, N_SAMPLES, scaled=False)


@pytest.mark.parametrize("d_k", WIDTHS)
def test_scaled_score_variance_is_one(d_k):
    measured = score_variance(d_k, n_samples=N_SAMPLES, scaled=True)
    assert abs(measured - 1) < SIGMAS * variance_sd(d_k, N_SAMPLES, scaled=True)


def test_score_variance_is_reproducible_and_depends_on_the_seed():
    assert score_variance(32, seed=3) == score_variance(32, seed=3)
    assert score_variance(32, seed=3) != score_variance(32, seed=4)


def test_saturation_grows_towards_one_without_scaling():
    values = [softmax_saturation(d) for d in WIDTHS]
    assert all(a < b for a, b in zip(values, values[1:], strict=False))
    assert values[0] < 0.5 and values[-1] > 0.9  # from spread out to one key taking nearly all weight


def test_saturation_stays_flat_with_scaling():
    values = [softmax_saturation(d, scaled=True) for d in WIDTHS]
    assert max(values) - min(values) < 0.1
    assert all(1 / 8 < v < 0.5 for v in values)  # between uniform (1/n_keys) and saturated


def test_gradient_collapses_without_scaling_and_stays_flat_with_it():
    unscaled = [softmax_gradient_norm(d) for d in WIDTHS]
    scaled = [softmax_gradient_norm(d, scaled=True) for d in WIDTHS]
    assert all(a > b for a, b in zip(unscaled[1:], unscaled[2:], strict=False))  # decreasing from Dk=4
    assert unscaled[-1] < scaled[-1] / 5
    assert max(scaled) / min(scaled) < 1.5


def test_gradient_norm_equals_the_softmax_jacobian_by_hand():
    # d(w·g)/dz = w ⊙ (g - w·g) for w = softmax(z): the same quantity without autograd, on the same sample.
    q, k = _random_qk(16, 500, 8, seed=0)
    upstream = torch.randn(500, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    w = torch.softmax(_sample_scores(q, k, scaled=True), -1)
    grad = w * (upstream - (w * upstream).sum(-1, keepdim=True))
    expected = grad.norm(dim=-1).mean().item()
    assert math.isclose(softmax_gradient_norm(16, n_samples=500, scaled=True), expected, rel_tol=1e-12)


@pytest.mark.parametrize("d_k", [4, 64])
def test_temperature_sqrt_dk_is_the_same_as_scaling(d_k):
    scores = randn(3, 5, seed=2) * math.sqrt(d_k)
    torch.testing.assert_close(softmax(scores, temperature=temperature_for(d_k)),
                               softmax(scale_scores(scores, d_k)), **tol(torch.float64))
    assert temperature_for(d_k) == math.sqrt(d_k)
