"""Dot-product attention among its alternatives: other ways to score, and attention as kernel regression.

* ``additive_scores``: Bahdanau et al. (2015), ``vᵀ tanh(q W_q + k W_k)``: a small network per pair;
* ``bilinear_scores``: Luong et al. (2015), ``q M kᵀ``; the dot product is M = I, and
  ``x_i W_Q W_Kᵀ x_jᵀ`` shows that scaled dot-product attention is bilinear in X with M = W_Q W_Kᵀ;
* ``nadaraya_watson``: Nadaraya (1964), Watson (1964): predict at a query by a weighted average of
  observed values, weights from a Gaussian kernel of the query-key distance: attention before attention.
"""

from __future__ import annotations

import torch

from attnlib._checks import batch_shape, require_float, require_like, require_positive, require_rank, require_tensor
from attnlib.attention import weighted_sum
from attnlib.softmax import softmax


def _tensors(**named) -> None:
    first = next(iter(named.items()))
    for name, t in named.items():
        require_tensor(name, t)
        require_float(name, t)
        require_like(name, t, *first)


def _width(name: str, x, expected: int, ref: str) -> None:
    if x.shape[0] != expected:
        raise ValueError(f"expected {name} with {expected} rows to match {ref}, got {tuple(x.shape)}")


def additive_scores(query: torch.Tensor, key: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor,
                    v: torch.Tensor) -> torch.Tensor:
    """``vᵀ tanh(q W_q + k W_k)`` for every pair: (..., Lq, Dq), (..., Lk, Dk) -> (..., Lq, Lk).

    w_q (Dq, Dh), w_k (Dk, Dh), v (Dh,): Dq and Dk may differ, Dh is the hidden width.
    """
    _tensors(query=query, key=key, w_q=w_q, w_k=w_k, v=v)
    require_rank("query", query, 2, "(..., Lq, Dq)")
    require_rank("key", key, 2, "(..., Lk, Dk)")
    require_rank("w_q", w_q, 2, "(Dq, Dh)", max_rank=2)
    require_rank("w_k", w_k, 2, "(Dk, Dh)", max_rank=2)
    require_rank("v", v, 1, "(Dh,)", max_rank=1)
    _width("w_q", w_q, query.shape[-1], f"query {tuple(query.shape)}")
    _width("w_k", w_k, key.shape[-1], f"key {tuple(key.shape)}")
    if not w_q.shape[1] == w_k.shape[1] == v.shape[0]:
        raise ValueError(f"expected w_q (Dq, Dh), w_k (Dk, Dh) and v (Dh,) to share Dh, got "
                         f"{tuple(w_q.shape)}, {tuple(w_k.shape)}, {tuple(v.shape)}")
    batch_shape(query.shape[:-2], key.shape[:-2])
    hidden = (query @ w_q)[..., :, None, :] + (key @ w_k)[..., None, :, :]  # (..., Lq, 1, Dh) + (..., 1, Lk, Dh)
    return torch.tanh(hidden) @ v  # (..., Lq, Lk, Dh) @ (Dh,) -> (..., Lq, Lk)


def bilinear_scores(query: torch.Tensor, key: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``q M kᵀ`` for every pair: (..., Lq, Dq), (..., Lk, Dk), M (Dq, Dk) -> (..., Lq, Lk)."""
    _tensors(query=query, key=key, weight=weight)
    require_rank("query", query, 2, "(..., Lq, Dq)")
    require_rank("key", key, 2, "(..., Lk, Dk)")
    require_rank("weight", weight, 2, "(Dq, Dk)", max_rank=2)
    if tuple(weight.shape) != (query.shape[-1], key.shape[-1]):
        raise ValueError(f"expected weight of shape (Dq, Dk) = ({query.shape[-1]}, {key.shape[-1]}), "
                         f"got {tuple(weight.shape)}")
    batch_shape(query.shape[:-2], key.shape[:-2])
    return (query @ weight) @ key.transpose(-2, -1)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


def nadaraya_watson(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    bandwidth: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian-kernel regression: weights softmax(−‖q − k‖² / 2σ²), output weights @ value.

    query (..., Lq, Dx), key (..., Lk, Dx) (the observed inputs), value (..., Lk, Dv) (their outputs);
    returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``. σ is ``bandwidth``.
    """
    _tensors(query=query, key=key, value=value)
    require_positive("bandwidth", bandwidth)
    require_rank("query", query, 2, "(..., Lq, Dx)")
    require_rank("key", key, 2, "(..., Lk, Dx)")
    require_rank("value", value, 2, "(..., Lk, Dv)")
    if key.shape[-1] != query.shape[-1] or value.shape[-2] != key.shape[-2]:
        raise ValueError(f"expected query (..., Lq, Dx), key (..., Lk, Dx), value (..., Lk, Dv), got "
                         f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    batch_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    diff = query[..., :, None, :] - key[..., None, :, :]  # (..., Lq, 1, Dx) - (..., 1, Lk, Dx)
    distance2 = (diff**2).sum(dim=-1)  # (..., Lq, Lk)
    weights = softmax(-distance2 / (2 * bandwidth**2), dim=-1)
    return weighted_sum(weights, value), weights
