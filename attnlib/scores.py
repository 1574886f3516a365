"""From embeddings to scores: the projections Q = X W_Q, K = X W_K, V = X W_V and Q Kᵀ.

Weights here are written the way the book's math is, ``(D, Dk)`` so that ``X @ W`` maps a row of
``X`` to a row of ``Q``; ``torch.nn.Linear`` stores the transpose ``(Dk, D)``.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib._checks import batch_shape, require_float, require_like, require_positive_int, require_rank, require_tensor


def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight + bias``: (..., L, D) @ (D, Dk) -> (..., L, Dk); bias is (Dk,)."""
    for name, t in (("x", x), ("weight", weight)):
        require_tensor(name, t)
        require_float(name, t)
    require_rank("x", x, 1, "(..., L, D)")
    require_rank("weight", weight, 2, "(D, Dk)", max_rank=2)
    require_like("weight", weight, "x", x)
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"expected weight of shape (D, Dk) with D={x.shape[-1]} to match x "
                         f"{tuple(x.shape)}, got {tuple(weight.shape)}")
    out = x @ weight  # (..., L, D) @ (D, Dk) -> (..., L, Dk)
    if bias is not None:
        require_tensor("bias", bias)
        require_like("bias", bias, "x", x)
        if tuple(bias.shape) != (weight.shape[1],):
            raise ValueError(f"expected bias of shape (Dk,) = ({weight.shape[1]},), got {tuple(bias.shape)}")
        out = out + bias
    return out


def dot_product_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """All query-key dot products at once, ``Q Kᵀ``: (..., Lq, Dk), (..., Lk, Dk) -> (..., Lq, Lk)."""
    for name, t in (("query", query), ("key", key)):
        require_tensor(name, t)
        require_float(name, t)
    require_rank("query", query, 2, "(..., Lq, Dk)")
    require_rank("key", key, 2, "(..., Lk, Dk)")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Dk={query.shape[-1]} to match "
                         f"query {tuple(query.shape)}, got {tuple(key.shape)}")
    require_like("key", key, "query", query)
    batch_shape(query.shape[:-2], key.shape[:-2])
    return query @ key.transpose(-2, -1)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


class QKVProjection(nn.Module):
    """Three learned maps from embeddings (..., L, D) to Q (..., L, Dk), K (..., L, Dk), V (..., L, Dv)."""

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False):
        super().__init__()
        d_v = d_k if d_v is None else d_v
        for name, value in (("d_model", d_model), ("d_k", d_k), ("d_v", d_v)):
            require_positive_int(name, value)
        self.w_q = nn.Parameter(torch.empty(d_model, d_k))
        self.w_k = nn.Parameter(torch.empty(d_model, d_k))
        self.w_v = nn.Parameter(torch.empty(d_model, d_v))
        self.b_q, self.b_k, self.b_v = (
            (nn.Parameter(torch.zeros(n)) for n in (d_k, d_k, d_v)) if bias else (None, None, None)
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Initialise each weight uniformly in ±1/√D (as ``nn.Linear`` does)."""
        bound = self.w_q.shape[0] ** -0.5
        for w in (self.w_q, self.w_k, self.w_v):
            nn.init.uniform_(w, -bound, bound)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(..., L, D) -> Q (..., L, Dk), K (..., L, Dk), V (..., L, Dv)."""
        require_tensor("x", x)
        require_like("x", x, "the module's weights", self.w_q)
        return (project(x, self.w_q, self.b_q), project(x, self.w_k, self.b_k),
                project(x, self.w_v, self.b_v))
