"""Weighted sums of values, and scaled dot-product attention assembled from the steps.

``scaled_dot_product_attention`` has the signature and mask rules of
``torch.nn.functional.scaled_dot_product_attention`` but also returns the weights. Its readable
path composes attnlib's own steps; ``need_weights=False`` takes the fast path, torch's fused kernel.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlib._checks import check_mask, check_qkv, require_positive, require_rank, require_tensor
from attnlib.scores import dot_product_scores
from attnlib.softmax import apply_mask, softmax

_HALF = (torch.float16, torch.bfloat16)


def weighted_sum(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Each output row is a weighted sum of value rows, ``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    require_tensor("weights", weights)
    require_tensor("value", value)
    require_rank("weights", weights, 2, "(..., Lq, Lk)")
    require_rank("value", value, 2, "(..., Lk, Dv)")
    if weights.shape[-1] != value.shape[-2]:
        raise ValueError(f"expected value of shape (..., Lk, Dv) with Lk={weights.shape[-1]} to match "
                         f"weights {tuple(weights.shape)}, got {tuple(value.shape)}")
    if weights.dtype != value.dtype:
        raise TypeError(f"expected weights and value to share one dtype, got {weights.dtype} and {value.dtype}")
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def _check_inputs(query, key, value, attn_mask, is_causal, scale) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_tensor(name, t)
    check_qkv(query, key, value)
    require_positive("scale", scale, allow_none=True)
    if attn_mask is not None:
        require_tensor("attn_mask", attn_mask)
        check_mask(attn_mask, query.shape[-2], key.shape[-2])
        if is_causal:
            raise ValueError("expected either attn_mask or is_causal=True, got both")


def _reference(query, key, value, attn_mask, is_causal, scale):
    dtype = query.dtype
    if dtype in _HALF:  # scores of half-precision inputs overflow easily: accumulate in float32
        query, key, value = query.float(), key.float(), value.float()
    scores = dot_product_scores(query, key) * scale  # (..., Lq, Lk)
    weights = softmax(apply_mask(scores, attn_mask, is_causal), dim=-1)
    return weighted_sum(weights, value).to(dtype), weights.to(dtype)


def _fast(query, key, value, attn_mask, is_causal, scale):
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                            is_causal=is_causal, scale=scale)
    if attn_mask is None:
        return output
    # Keep attnlib's promise for queries whose keys are all masked: a zero output, never NaN.
    allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
    return output.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                                 scale: float | None = None, need_weights: bool = True):
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv); ``scale=None`` means 1/√Dk.
    ``attn_mask``: bool (True = may attend) or float (added), broadcastable to (..., Lq, Lk).
    ``is_causal=True`` masks keys after each query (top-left aligned). Fully masked queries get
    zero weights and a zero output. ``need_weights=False`` returns ``(output, None)`` from torch's
    fused kernel.
    """
    _check_inputs(query, key, value, attn_mask, is_causal, scale)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if not need_weights:
        return _fast(query, key, value, attn_mask, is_causal, scale), None
    return _reference(query, key, value, attn_mask, is_causal, scale)

