"""From embeddings to scores: the projections Q = X W_Q, K = X W_K, V = X W_V and Q Kᵀ.

Weights here are written the way the book's math is, ``(D, Dk)`` so that ``X @ W`` maps a row of
``X`` to a row of ``Q``; ``torch.nn.Linear`` stores the transpose ``(Dk, D)``.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib._checks import (
    batch_shape,
    checked,
    require_float_tensor,
    require_key_width,
    require_like,
    require_positive_ints,
    require_tensor,
)


def check_projection_args(x, weight, bias, require=require_tensor) -> None:
    """project's inputs: x (..., L, D), weight (D, Dk) of x's dtype and device, bias None or (Dk,)."""
    require_projection(x, weight, bias, require)


def require_projection(x, weight, bias, require=require_tensor, weight_name: str = "weight") -> None:
    """The inputs of ``x @ weight + bias``: x (..., L, D), weight (D, Dk), bias None or (Dk,), one dtype.

    ``weight_name`` names the weight in messages; a module's name says x must suit its weights, not the reverse.
    """
    require_float_tensor("x", x, 1, "(..., L, D)", require=require)
    require_float_tensor(weight_name, weight, 2, "(D, Dk)", max_rank=2, require=require)
    if weight_name == "weight":  # a plain call: the weight must suit x
        require_like("weight", weight, "x", x)
    else:  # a module's call: x must suit the module's weights
        require_like("x", x, weight_name, weight)
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"expected {weight_name} of shape (D, Dk) with D={x.shape[-1]} to match x "
                         f"{tuple(x.shape)}, got {tuple(weight.shape)}")
    if bias is None:
        return
    require_float_tensor("bias", bias, 1, "(Dk,)", max_rank=1, require=require)
    require_like("bias", bias, "x", x)
    if tuple(bias.shape) != (weight.shape[1],):
        raise ValueError(f"expected bias of shape (Dk,) = ({weight.shape[1]},), got {tuple(bias.shape)}")


@checked(check_projection_args)
def project(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``x @ weight + bias``: (..., L, D) @ (D, Dk) -> (..., L, Dk); bias is (Dk,)."""
    out = x @ weight  # (..., L, D) @ (D, Dk) -> (..., L, Dk)
    return out if bias is None else out + bias


def check_scores_args(query, key, require=require_tensor) -> None:
    """The inputs of ``Q Kᵀ``: float query (..., Lq, Dk) and key (..., Lk, Dk) of one width, dtype and device."""
    require_float_tensor("query", query, 2, "(..., Lq, Dk)", require=require)
    require_float_tensor("key", key, 2, "(..., Lk, Dk)", require=require)
    require_key_width(query, key)
    require_like("key", key, "query", query)
    batch_shape(query.shape[:-2], key.shape[:-2])


@checked(check_scores_args)
def dot_product_scores(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """All query-key dot products at once, ``Q Kᵀ``: (..., Lq, Dk), (..., Lk, Dk) -> (..., Lq, Lk)."""
    return query @ key.transpose(-2, -1)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


class QKVProjection(nn.Module):
    """Three learned maps from embeddings (..., L, D) to Q (..., L, Dk), K (..., L, Dk), V (..., L, Dv)."""

    def __init__(self, d_model: int, d_k: int, d_v: int | None = None, bias: bool = False) -> None:
        super().__init__()
        d_v = d_k if d_v is None else d_v
        require_positive_ints(d_model=d_model, d_k=d_k, d_v=d_v)
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
        # W_K and W_V share W_Q's D, dtype and device: checking x against W_Q checks it against all three
        require_projection(x, self.w_q, self.b_q, weight_name="the module's weights")
        return (project.unchecked(x, self.w_q, bias=self.b_q), project.unchecked(x, self.w_k, bias=self.b_k),
                project.unchecked(x, self.w_v, bias=self.b_v))
