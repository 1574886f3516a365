"""Scaling the scores by 1/√Dk, and the measurements that show why.

For q, k with independent standard-normal entries, ``q·k`` has mean 0 and variance ``Dk``. Without
scaling, wider heads give larger scores and the softmax saturates (one weight near 1). The gradient
through a saturated softmax is ∝ p_j for every key j, so every key except the winner gets almost none.
The functions below measure these on random samples so the book can plot them, and each gradient
function says what it differentiates with respect to.

Scaling fixes the *expected* size of the scores, not their size during training, when weights can grow
until the softmax collapses onto one key. Two remedies bound the scores themselves:

* ``qk_norm``: normalise each query and key before the dot product, so |q·k| is bounded by the
  normalised vectors' norms (Henry et al. 2020: L2 with a learned scale; RMS norm with learned gains,
  the per-head form OLMo 2 and Qwen3 use in place of the LayerNorm of Dehghani et al. 2023);
* ``softcap``: squash the scores smoothly into (−cap, cap) with ``cap · tanh(s / cap)`` (Gemma 2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real

import torch

from attnlib._checks import (
    checked,
    require_bool,
    require_float,
    require_float_tensor,
    require_key_width,
    require_positive,
    require_positive_int,
    require_rank,
    require_tensor,
)


def check_scale_args(scores, d_k, require=require_tensor) -> None:
    """scale_scores' inputs: float scores (..., Lq, Lk) and a positive int Dk."""
    require_float_tensor("scores", scores, 0, "", require=require)
    require_positive_int("d_k", d_k)


@checked(check_scale_args)
def scale_scores(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Scores (..., Lq, Lk) divided by √Dk."""
    return scores / math.sqrt(d_k)


def _random_qk(d_k: int, n_queries: int, n_keys: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(n_queries, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n_queries, n_keys, d_k, generator=generator, dtype=torch.float64)
    return q, k


def _sample_scores(q: torch.Tensor, k: torch.Tensor, scaled: bool) -> torch.Tensor:
    scores = torch.einsum("nd,nkd->nk", q, k)  # (N, Dk) . (N, Lk, Dk) -> (N, Lk)
    return scores / math.sqrt(q.shape[-1]) if scaled else scores


def score_variance(d_k: int, n_samples: int = 10_000, scaled: bool = False, seed: int = 0) -> float:
    """Measured variance of ``q·k`` (or ``q·k/√Dk``) over ``n_samples`` standard-normal pairs.

    Theory: Dk unscaled, 1 scaled. Computed in float64 on the CPU, so it is the same on every machine.
    """
    require_positive_int("d_k", d_k)
    require_positive_int("n_samples", n_samples)
    q, k = _random_qk(d_k, n_samples, 1, seed)
    return _sample_scores(q, k, scaled).var().item()


def softmax_saturation(d_k: int, n_keys: int = 8, n_samples: int = 2_000, scaled: bool = False,
                       seed: int = 0) -> float:
    """Mean over random queries of the largest softmax weight over ``n_keys`` random keys.

    Near ``1/n_keys`` the weights are spread out; near 1 the softmax has saturated onto one key.
    """
    require_positive_int("d_k", d_k)
    require_positive_int("n_keys", n_keys)
    require_positive_int("n_samples", n_samples)
    q, k = _random_qk(d_k, n_samples, n_keys, seed)
    weights = torch.softmax(_sample_scores(q, k, scaled), dim=-1)
    return weights.amax(dim=-1).mean().item()


@dataclass(frozen=True)
class ScoreGradients:
    """Gradients of the loss ``L = Σ_j p_j g_j`` for N queries, each against its own Lk keys.

    ``p = softmax(z)`` with ``z = s / √Dk`` when scaled, else ``z = s``; ``s_j = q · k_j`` are the raw scores.
    Every field is a float64 CPU tensor: ``weights`` p (N, Lk); ``softmax_input`` ∂L/∂z (N, Lk);
    ``scores`` ∂L/∂s (N, Lk), equal to ``softmax_input`` unscaled and to it divided by √Dk scaled;
    ``query`` ∂L/∂q (N, Dk); ``keys`` ∂L/∂k_j (N, Lk, Dk).
    """

    weights: torch.Tensor
    softmax_input: torch.Tensor
    scores: torch.Tensor
    query: torch.Tensor
    keys: torch.Tensor


def attention_gradients(query: torch.Tensor, keys: torch.Tensor, upstream: torch.Tensor,
                        scaled: bool = False) -> ScoreGradients:
    """Autograd's gradients of ``L = softmax(z) · upstream`` at query (N, Dk), keys (N, Lk, Dk), upstream (N, Lk).

    ``upstream`` stands for ∂L/∂p, what the rest of the network sends back to the weights.
    """
    for name, x, layout in (("query", query, "(N, Dk)"), ("keys", keys, "(N, Lk, Dk)"),
                            ("upstream", upstream, "(N, Lk)")):
        require_tensor(name, x)
        require_float(name, x)
        rank = layout.count(",") + 1
        require_rank(name, x, rank, layout, max_rank=rank)
    if keys.shape[::2] != query.shape or upstream.shape != keys.shape[:2]:
        raise ValueError(f"expected query (N, Dk), keys (N, Lk, Dk), upstream (N, Lk), got "
                         f"{tuple(query.shape)}, {tuple(keys.shape)}, {tuple(upstream.shape)}")
    q, k = query.detach().clone().requires_grad_(True), keys.detach().clone().requires_grad_(True)
    s = _sample_scores(q, k, scaled=False)  # (N, Lk) raw scores q·k_j
    z = s / math.sqrt(q.shape[-1]) if scaled else s * 1.0  # (N, Lk) the softmax input
    s.retain_grad()
    z.retain_grad()
    p = torch.softmax(z, dim=-1)
    (p * upstream.detach()).sum().backward()
    return ScoreGradients(p.detach(), z.grad, s.grad, q.grad, k.grad)


def score_gradients(d_k: int, n_keys: int = 8, n_samples: int = 1_000, scaled: bool = False,
                    seed: int = 0) -> ScoreGradients:
    """`attention_gradients` at ``n_samples`` standard-normal queries (N, Dk), keys (N, Lk, Dk), upstream (N, Lk)."""
    require_positive_int("d_k", d_k)
    require_positive_int("n_keys", n_keys)
    require_positive_int("n_samples", n_samples)
    require_bool("scaled", scaled)
    q, k = _random_qk(d_k, n_samples, n_keys, seed)
    upstream = torch.randn(n_samples, n_keys, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    return attention_gradients(q, k, upstream, scaled=scaled)


def softmax_gradient_norm(d_k: int, n_keys: int = 8, n_samples: int = 2_000, scaled: bool = False,
                          seed: int = 0) -> float:
    """Mean over samples of ‖∂L/∂z‖, the gradient at the softmax *input* z (N, Lk): s/√Dk scaled, s unscaled."""
    return score_gradients(d_k, n_keys, n_samples, scaled, seed).softmax_input.norm(dim=-1).mean().item()


def query_gradient_norm(d_k: int, n_keys: int = 8, n_samples: int = 2_000, scaled: bool = False,
                        seed: int = 0) -> float:
    """Mean over samples of ‖∂L/∂q‖, the gradient at the query q (N, Dk) (the same samples as above)."""
    return score_gradients(d_k, n_keys, n_samples, scaled, seed).query.norm(dim=-1).mean().item()


def by_weight_rank(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Mean of ``|values|`` (N, Lk) per rank of the key's weight (N, Lk): (Lk,), rank 0 the largest weight.

    For the keys' gradients pass their norms, ``grads.keys.norm(dim=-1)`` (N, Lk).
    """
    require_tensor("values", values)
    require_tensor("weights", weights)
    require_rank("values", values, 2, "(N, Lk)", max_rank=2)
    if values.shape != weights.shape:
        raise ValueError(f"expected values and weights of the same shape (N, Lk), got "
                         f"{tuple(values.shape)} and {tuple(weights.shape)}")
    order = weights.argsort(dim=-1, descending=True)  # (N, Lk) key indices, largest weight first
    return values.abs().gather(-1, order).mean(dim=0)


def self_attention_scores(d_k: int, d_model: int = 64, length: int = 8, n_samples: int = 1_000,
                          correlation: float = 0.0, seed: int = 0) -> torch.Tensor:
    """Raw self-attention scores (N, L, L) ``(x W_Q)(x W_K)ᵀ``, q and k made from the *same* tokens x.

    Per sample: x (L, D) and W_Q (D, Dk) standard normal / √D; ``W_K = ρ W_Q + √(1-ρ²) W'`` with W' like
    W_Q and ρ = ``correlation``. ρ = 0 is independent random projections, ρ = 1 ties W_K to W_Q.
    """
    require_positive_int("d_k", d_k)
    require_positive_int("d_model", d_model)
    require_positive_int("length", length)
    require_positive_int("n_samples", n_samples)
    if not isinstance(correlation, Real) or not 0 <= correlation <= 1:
        raise ValueError(f"expected correlation to be a number in [0, 1], got {correlation!r}")
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n_samples, length, d_model, generator=generator, dtype=torch.float64)
    w_q, w_other = (torch.randn(n_samples, d_model, d_k, generator=generator, dtype=torch.float64)
                    / math.sqrt(d_model) for _ in range(2))
    w_k = correlation * w_q + math.sqrt(1 - correlation**2) * w_other
    q, k = x @ w_q, x @ w_k  # (N, L, D) @ (N, D, Dk) -> (N, L, Dk)
    return q @ k.transpose(-2, -1)  # (N, L, Dk) @ (N, Dk, L) -> (N, L, L)


def temperature_for(d_k: int) -> float:
    """The softmax temperature equivalent to scaling by 1/√Dk, namely √Dk."""
    require_positive("d_k", d_k)
    return math.sqrt(d_k)


# --- bounding the scores: QK-norm and soft-capping ------------------------------------------------------------

def softcap(scores: torch.Tensor, cap: float) -> torch.Tensor:
    """``cap · tanh(scores / cap)``, scores (..., Lq, Lk) -> (..., Lq, Lk) strictly inside (−cap, cap).

    Near 0 it is the identity (slope 1); large scores saturate at ±cap. Gemma 2 caps attention logits at 50.
    """
    require_tensor("scores", scores)
    require_float("scores", scores)
    require_positive("cap", cap)
    return cap * torch.tanh(scores / cap)


QK_NORMS = ("rms", "l2")


def _normalise(x: torch.Tensor, kind: str, gain, eps: float) -> torch.Tensor:
    """x (..., L, Dk) divided by its RMS (or L2 norm) over Dk, times ``gain`` (Dk,) or a scalar when given."""
    square = x.pow(2).mean(dim=-1, keepdim=True) if kind == "rms" else x.pow(2).sum(dim=-1, keepdim=True)
    normed = x * torch.rsqrt(square + eps)  # (..., L, Dk) / (..., L, 1)
    return normed if gain is None else normed * gain


def _check_gain(name: str, gain, x: torch.Tensor) -> None:
    if gain is None:
        return
    require_tensor(name, gain)
    require_float(name, gain)
    if gain.ndim > 1 or (gain.ndim == 1 and gain.shape[0] not in (1, x.shape[-1])):
        raise ValueError(f"expected {name} of shape (Dk,) with Dk={x.shape[-1]} or a scalar, got {tuple(gain.shape)}")


def qk_norm(query: torch.Tensor, key: torch.Tensor, kind: str = "rms", query_gain: torch.Tensor | None = None,
            key_gain: torch.Tensor | None = None, eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalise each query (..., Lq, Dk) and key (..., Lk, Dk) row over Dk; returns both, shapes kept.

    ``kind="rms"``: x / RMS(x) · gain, so each row has norm √Dk (times its gains): RMSNorm per head.
    ``kind="l2"``: x / ‖x‖ · gain, unit rows, so q·k is a cosine in [−1, 1] (Henry et al. 2020, who learn
    one scalar g and use it in place of 1/√Dk: pass it as attention's ``scale``).
    Gains (Dk,) or scalars are the learned parameters (None: 1); ``eps`` is added under the root.
    """
    if kind not in QK_NORMS:
        raise ValueError(f"expected kind in {QK_NORMS}, got {kind!r}")
    for name, x, layout in (("query", query, "(..., Lq, Dk)"), ("key", key, "(..., Lk, Dk)")):
        require_tensor(name, x)
        require_float(name, x)
        require_rank(name, x, 2, layout)
    require_key_width(query, key)
    _check_gain("query_gain", query_gain, query)
    _check_gain("key_gain", key_gain, key)
    require_positive("eps", eps)
    return _normalise(query, kind, query_gain, eps), _normalise(key, kind, key_gain, eps)
