"""Scaling the scores by 1/√Dk, and the three measurements that show why.

For q, k with independent standard-normal entries, ``q·k`` has mean 0 and variance ``Dk``. Without
scaling, wider heads give larger scores, the softmax saturates (one weight near 1) and its gradients
vanish. The functions below measure all three on random samples so the book can plot them.
"""

from __future__ import annotations

import math

import torch

from attnlib._checks import require_float, require_positive, require_positive_int, require_tensor


def scale_scores(scores: torch.Tensor, d_k: int) -> torch.Tensor:
    """Scores (..., Lq, Lk) divided by √Dk."""
    require_tensor("scores", scores)
    require_float("scores", scores)
    require_positive_int("d_k", d_k)
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


def softmax_gradient_norm(d_k: int, n_keys: int = 8, n_samples: int = 2_000, scaled: bool = False,
                          seed: int = 0) -> float:
    """Mean norm of the gradient that flows back through the softmax into its input scores.

    The loss is ``weights · g`` for a random upstream gradient ``g`` (N, Lk); the function returns the
    mean over samples of ``‖∂loss/∂scores‖`` (scores (N, Lk), after scaling when ``scaled``), measured
    with autograd. It collapses towards 0 when the softmax saturates.
    """
    require_positive_int("d_k", d_k)
    require_positive_int("n_keys", n_keys)
    require_positive_int("n_samples", n_samples)
    q, k = _random_qk(d_k, n_samples, n_keys, seed)
    upstream = torch.randn(n_samples, n_keys, generator=torch.Generator().manual_seed(seed + 1),
                           dtype=torch.float64)
    scores = _sample_scores(q, k, scaled).requires_grad_(True)  # (N, Lk)
    (torch.softmax(scores, dim=-1) * upstream).sum().backward()
    return scores.grad.norm(dim=-1).mean().item()


def temperature_for(d_k: int) -> float:
    """The softmax temperature equivalent to scaling by 1/√Dk, namely √Dk."""
    require_positive("d_k", d_k)
    return math.sqrt(d_k)
