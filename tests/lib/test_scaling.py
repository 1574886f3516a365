"""attnlib.scaling: the 1/√Dk scale, and the measurements that justify it, against their theory."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers.models.gemma2.modeling_gemma2 import eager_attention_forward

from attnlib import scale_scores, softmax
from attnlib.scaling import (
    _random_qk,
    _sample_scores,
    attention_gradients,
    by_weight_rank,
    qk_norm,
    query_gradient_norm,
    score_gradients,
    score_variance,
    self_attention_scores,
    softcap,
    softmax_gradient_norm,
    softmax_saturation,
    temperature_for,
)
from tests.lib.tensors import randn, tol

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


@pytest.mark.slow  # seconds: make check leaves it to make test
def test_saturation_grows_towards_one_without_scaling():
    values = [softmax_saturation(d) for d in WIDTHS]
    assert all(a < b for a, b in zip(values, values[1:], strict=False))
    assert values[0] < 0.5 and values[-1] > 0.9  # from spread out to one key taking nearly all weight


@pytest.mark.slow  # seconds: make check leaves it to make test
def test_saturation_stays_flat_with_scaling():
    values = [softmax_saturation(d, scaled=True) for d in WIDTHS]
    assert max(values) - min(values) < 0.1
    assert all(1 / 8 < v < 0.5 for v in values)  # between uniform (1/n_keys) and saturated


@pytest.mark.slow  # autograd over every width's sample: ~7 s of CPU
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


# --- what each gradient is taken with respect to -----------------------------------------------------


def _reference_gradients(q, k, g, scaled):
    """The same gradients from torch.func, a route that shares no code with attention_gradients."""
    scale = 1 / math.sqrt(q.shape[-1]) if scaled else 1.0

    def loss_of_input(z):
        return (torch.softmax(z, -1) * g).sum()

    def loss_of_qk(q_, k_):
        return loss_of_input(torch.einsum("nd,nkd->nk", q_, k_) * scale)

    z = torch.einsum("nd,nkd->nk", q, k) * scale
    d_input = torch.func.grad(loss_of_input)(z)
    d_query, d_keys = torch.func.grad(loss_of_qk, argnums=(0, 1))(q, k)
    return d_input, d_input * scale, d_query, d_keys


@pytest.mark.parametrize("scaled", [False, True])
@pytest.mark.parametrize(("n", "lk", "d_k"), [(3, 5, 4), (2, 1, 7), (4, 8, 64)])
def test_attention_gradients_match_torch_func(scaled, n, lk, d_k):
    q, k, g = randn(n, d_k, seed=1), randn(n, lk, d_k, seed=2), randn(n, lk, seed=3)
    grads = attention_gradients(q, k, g, scaled=scaled)
    expected = _reference_gradients(q, k, g, scaled)
    for got, want in zip((grads.softmax_input, grads.scores, grads.query, grads.keys), expected, strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))
    assert grads.weights.shape == (n, lk) and grads.keys.shape == (n, lk, d_k)
    assert not q.requires_grad and q.grad is None  # the caller's tensors are left alone


def test_attention_gradients_by_hand_on_two_keys():
    # q = e1 (Dk = 4), keys 0 and 2 ln3 e1, scaled: z = (0, ln 3), p = (1/4, 3/4); upstream g = (1, 0).
    # ∂L/∂z_j = p_j (g_j - p·g) = (1/4 · 3/4, 3/4 · (-1/4)) = (3/16, -3/16); ∂L/∂s = ∂L/∂z / √4;
    # ∂L/∂q = Σ_j ∂L/∂s_j k_j = -3/32 · 2 ln3 e1; ∂L/∂k_j = ∂L/∂s_j q.
    q = torch.tensor([[1.0, 0, 0, 0]], dtype=torch.float64)
    k = torch.tensor([[[0.0, 0, 0, 0], [2 * math.log(3), 0, 0, 0]]], dtype=torch.float64)
    g = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    grads = attention_gradients(q, k, g, scaled=True)
    t = torch.tensor
    torch.testing.assert_close(grads.weights, t([[0.25, 0.75]], dtype=torch.float64))
    torch.testing.assert_close(grads.softmax_input, t([[3 / 16, -3 / 16]], dtype=torch.float64))
    torch.testing.assert_close(grads.scores, t([[3 / 32, -3 / 32]], dtype=torch.float64))
    torch.testing.assert_close(grads.query, t([[-3 / 16 * math.log(3), 0, 0, 0]], dtype=torch.float64))
    torch.testing.assert_close(grads.keys, t([[[3 / 32, 0, 0, 0], [-3 / 32, 0, 0, 0]]], dtype=torch.float64))


def test_gradient_at_the_softmax_input_is_p_times_centred_upstream():
    grads = score_gradients(16, n_samples=300, scaled=True, seed=5)
    g = torch.randn(300, 8, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    p = grads.weights
    torch.testing.assert_close(grads.softmax_input, p * (g - (p * g).sum(-1, keepdim=True)), **tol(torch.float64))
    # shift invariance: adding c to every score changes nothing, so the gradient sums to 0 over keys
    torch.testing.assert_close(grads.softmax_input.sum(-1), torch.zeros(300, dtype=torch.float64),
                               **tol(torch.float64))


def test_unscaled_query_gradient_does_not_vanish_while_the_input_gradient_does():
    q_grad = [query_gradient_norm(d, n_samples=1_000) for d in (1, 64)]
    z_grad = [softmax_gradient_norm(d, n_samples=1_000) for d in (1, 64)]
    assert q_grad[1] > 3 * q_grad[0]  # grows with Dk (the keys it is built from have norm ≈ √Dk)
    assert z_grad[1] < z_grad[0] / 2
    scaled = [query_gradient_norm(d, n_samples=1_000, scaled=True) for d in (1, 64, 512)]
    assert max(scaled) / min(scaled) < 1.6


def test_saturation_starves_every_key_but_the_top_ones():
    unscaled, scaled = score_gradients(512), score_gradients(512, scaled=True)
    starved = by_weight_rank(unscaled.keys.norm(dim=-1), unscaled.weights)
    spread = by_weight_rank(scaled.keys.norm(dim=-1), scaled.weights)
    assert (starved[2:] < starved[0] / 10).all()  # keys ranked 3rd and below get < 1/10 of the winner's
    assert (spread[2:] > spread[0] / 20).all()
    assert torch.all(starved[:-1] >= starved[1:]) and torch.all(spread[:-1] >= spread[1:])


def test_by_weight_rank_sorts_each_row_by_its_weights():
    values = torch.tensor([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    weights = torch.tensor([[0.2, 0.5, 0.3], [0.7, 0.1, 0.2]])
    # row 0 by weight: keys 1, 2, 0 -> |-2|, 3, 1; row 1: keys 0, 2, 1 -> 4, |-6|, 5
    torch.testing.assert_close(by_weight_rank(values, weights), torch.tensor([3.0, 4.5, 3.0]))
    with pytest.raises(ValueError, match="same shape"):
        by_weight_rank(values, weights[:, :2])


def test_attention_gradients_reject_mismatched_shapes():
    with pytest.raises(ValueError, match=r"expected query \(N, Dk\), keys"):
        attention_gradients(randn(2, 4), randn(2, 3, 5), randn(2, 3))
    with pytest.raises(ValueError, match="dims"):
        attention_gradients(randn(4), randn(2, 3, 4), randn(2, 3))
    with pytest.raises(TypeError, match="bool"):
        score_gradients(4, scaled=1)


@pytest.mark.parametrize("d_k", [4, 64])
def test_self_attention_scores_independent_projections_have_variance_dk(d_k):
    scores = self_attention_scores(d_k, n_samples=2_000)
    assert scores.shape == (2_000, 8, 8)
    assert abs(scores.var().item() / d_k - 1) < 0.1
    assert abs(scores.mean().item()) < 0.1 * math.sqrt(d_k)


def test_tied_projections_put_mean_dk_on_the_diagonal():
    d_k = 64
    scores = self_attention_scores(d_k, n_samples=2_000, correlation=1.0)
    diagonal = scores.diagonal(dim1=-2, dim2=-1)  # q_i · k_i = |x_i W_Q|² when W_K = W_Q
    assert (diagonal > 0).all()
    assert abs(diagonal.mean().item() / d_k - 1) < 0.05
    with pytest.raises(ValueError, match="correlation"):
        self_attention_scores(4, correlation=1.5)


# --- bounding the scores: soft-capping and QK-norm ---------------------------------------------------------

@pytest.mark.parametrize("cap", [1.0, 30.0, 50.0])
def test_softcap_is_its_closed_form_and_stays_inside_the_cap(cap):
    scores = torch.linspace(-1e4, 1e4, 2001, dtype=torch.float64)
    capped = softcap(scores, cap)
    torch.testing.assert_close(capped, cap * torch.tanh(scores / cap), atol=0, rtol=0)
    assert capped.abs().max() <= cap and torch.equal(capped, -softcap(-scores, cap))  # bounded, odd
    small = randn(100, seed=1) * cap * 1e-4
    torch.testing.assert_close(softcap(small, cap), small, atol=cap * 1e-11, rtol=1e-7)  # identity near 0


def test_softcap_gradient_is_finite_and_matches_its_derivative():
    scores = torch.tensor([-1e6, -100.0, -3.0, 0.0, 2.0, 50.0, 1e6], dtype=torch.float64, requires_grad=True)
    softcap(scores, 50.0).sum().backward()
    assert torch.isfinite(scores.grad).all()
    torch.testing.assert_close(scores.grad, 1 - torch.tanh(scores.detach() / 50.0) ** 2)  # d/ds cap·tanh(s/cap)


def test_softcapped_attention_equals_transformers_gemma2():
    q, k, v = randn(2, 4, 7, 8, seed=1) * 10, randn(2, 4, 7, 8, seed=2) * 10, randn(2, 4, 7, 5, seed=3)
    module = SimpleNamespace(num_key_value_groups=1, training=False, head_dim=8)
    expected, expected_weights = eager_attention_forward(module, q, k, v, None, scaling=8**-0.5, softcap=20.0)
    weights = softmax(softcap(scale_scores(q @ k.transpose(-2, -1), 8), 20.0))  # (B, H, Lq, Lk)
    # Gemma's softmax runs in float32 even for float64 inputs: float32's tolerance
    torch.testing.assert_close(weights, expected_weights, **tol(torch.float32))
    torch.testing.assert_close((weights @ v).transpose(1, 2), expected, **tol(torch.float32))  # (B, L, H, Dv)


def test_rms_qk_norm_equals_torch_rms_norm_with_gains():
    q, k = randn(2, 3, 5, 16, seed=1) * 7, randn(2, 3, 9, 16, seed=2)
    gain_q, gain_k = randn(16, seed=3), randn(16, seed=4)
    nq, nk = qk_norm(q, k, "rms", gain_q, gain_k)
    torch.testing.assert_close(nq, F.rms_norm(q, (16,), gain_q, eps=1e-6), **tol(torch.float64))
    torch.testing.assert_close(nk, F.rms_norm(k, (16,), gain_k, eps=1e-6), **tol(torch.float64))


def test_l2_qk_norm_equals_torch_normalize_and_bounds_the_scores():
    q, k = randn(4, 6, 8, seed=5) * 100, randn(4, 6, 8, seed=6) * 100
    nq, nk = qk_norm(q, k, "l2", eps=1e-12)
    torch.testing.assert_close(nq, F.normalize(q, dim=-1), **tol(torch.float64))
    cosines = nq @ nk.transpose(-2, -1)  # (4, 6, 6): |q̂·k̂| <= 1 however large q and k are
    assert cosines.abs().max() <= 1 + 1e-12
    rq, rk = qk_norm(q, k, "rms")  # rows of norm √Dk: scaled scores q̂·k̂/√Dk lie in [−√Dk, √Dk]
    assert (scale_scores(rq @ rk.transpose(-2, -1), 8).abs() <= math.sqrt(8) + 1e-9).all()


def test_qk_norm_gains_are_learned_parameters_with_finite_gradients():
    q, k = randn(3, 4, 8, seed=7) * 1e3, randn(3, 4, 8, seed=8) * 1e3
    gain = torch.ones(8, dtype=torch.float64, requires_grad=True)
    nq, nk = qk_norm(q, k, "rms", gain, gain)
    softmax(scale_scores(nq @ nk.transpose(-2, -1), 8)).max(dim=-1).values.sum().backward()
    assert torch.isfinite(gain.grad).all() and gain.grad.abs().sum() > 0


def test_qk_norm_bad_input():
    q = torch.zeros(2, 3, 4)
    with pytest.raises(ValueError, match="kind in"):
        qk_norm(q, q, "layer")
    with pytest.raises(ValueError, match=r"key of shape \(\.\.\., Lk, Dk\) with Dk=4"):
        qk_norm(q, torch.zeros(2, 3, 5))
    with pytest.raises(ValueError, match=r"query_gain of shape \(Dk,\) with Dk=4"):
        qk_norm(q, q, query_gain=torch.ones(3))
    with pytest.raises(ValueError, match="cap"):
        softcap(q, 0.0)
