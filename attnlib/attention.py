"""Weighted sums of values, and scaled dot-product attention assembled from the steps.

``scaled_dot_product_attention`` has the signature and mask rules of
``torch.nn.functional.scaled_dot_product_attention`` but also returns the weights. Its readable
path composes attnlib's own steps; ``need_weights=False`` takes the fast path, torch's fused kernel.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
import torch.nn.functional as F

from attnlib._checks import (
    batch_shape,
    check_attention_args,
    require_bool,
    require_like,
    require_rank,
    require_tensor,
)
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
    require_like("value", value, "weights", weights)
    batch_shape(weights.shape[:-2], value.shape[:-2])
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def check_dropout_p(dropout_p) -> None:
    """Raise TypeError/ValueError unless ``dropout_p`` is a real number in [0, 1]."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, Real):
        raise TypeError(f"expected dropout_p to be a number in [0, 1], got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p <= 1.0:  # also refuses NaN
        raise ValueError(f"expected dropout_p in [0, 1], got {dropout_p}")


def attention_dropout(weights: torch.Tensor, dropout_p: float) -> torch.Tensor:
    """Weights (..., Lq, Lk): zero each with probability p, scale the kept ones by 1/(1 − p); p = 0 returns them."""
    check_dropout_p(dropout_p)
    if dropout_p == 0:
        return weights
    return F.dropout(weights, p=dropout_p, training=True)  # (..., Lq, Lk), same shape


def _reference(query, key, value, attn_mask, is_causal, scale, dropout_p=0.0):
    dtype = query.dtype
    if dtype in _HALF:  # scores of half-precision inputs overflow easily: accumulate in float32
        query, key, value = query.float(), key.float(), value.float()
    # Scale the (Lq, Dk) queries rather than the (Lq, Lk) scores: the same numbers, one L x L pass fewer.
    scores = dot_product_scores(query * scale, key)  # (..., Lq, Lk)
    weights = softmax(apply_mask(scores, attn_mask, is_causal), dim=-1)  # (..., Lq, Lk)
    weights = attention_dropout(weights, dropout_p)  # the weights actually used (and returned)
    return weighted_sum(weights, value).to(dtype), weights.to(dtype)


def _broadcast_batch(query, key, value, attn_mask):
    """Expand query, key and value to one batch shape (..., L, D), the mask's included."""
    shapes = [t.shape[:-2] for t in (query, key, value)]
    if attn_mask is not None:
        shapes.append(attn_mask.shape[:-2])
    batch = batch_shape(*shapes)
    return tuple(t.expand(*batch, *t.shape[-2:]) for t in (query, key, value))


def _gqa_groups(query, key, value) -> int:
    """Query heads per key/value head for grouped-query attention: Hq / Hkv, checked."""
    for name, t, layout in (("query", query, "(..., Hq, Lq, Dk)"), ("key", key, "(..., Hkv, Lk, Dk)"),
                            ("value", value, "(..., Hkv, Lk, Dv)")):
        require_tensor(name, t)
        require_rank(name, t, 3, layout)
    hq, hkv = query.shape[-3], key.shape[-3]
    if value.shape[-3] != hkv:
        raise ValueError(f"expected key and value with the same number of heads Hkv, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"expected the query's heads Hq={hq} to be a multiple of the key/value heads Hkv, got "
                         f"query {tuple(query.shape)}, key {tuple(key.shape)}")
    return hq // hkv


def _repeat_kv(query, key, value):
    """Grouped-query attention as ordinary attention: key/value head g serves query heads g*G..(g+1)*G - 1."""
    groups = _gqa_groups(query, key, value)
    # (..., Hkv, Lk, D) -> (..., Hkv * G, Lk, D), each key/value head repeated for its G query heads
    return key.repeat_interleave(groups, dim=-3), value.repeat_interleave(groups, dim=-3)


def _fast(query, key, value, attn_mask, is_causal, scale, dropout_p=0.0, enable_gqa=False):
    if enable_gqa:  # torch groups the heads itself; expand only the batch dims before them
        full_key, full_value = _repeat_kv(query, key, value)
        query, full_key, _ = _broadcast_batch(query, full_key, full_value, attn_mask)
        batch = query.shape[:-3]
        key, value = (t.expand(*batch, *t.shape[-3:]) for t in (key, value))
    else:
        query, key, value = _broadcast_batch(query, key, value, attn_mask)
    if attn_mask is not None and attn_mask.ndim < 2:  # torch's kernel wants at least (Lq, Lk)
        attn_mask = attn_mask.reshape((1,) * (2 - attn_mask.ndim) + tuple(attn_mask.shape))
    if attn_mask is not None and attn_mask.dtype != torch.bool:
        attn_mask = attn_mask.to(query.dtype)  # torch's kernel wants a bool mask or the query's dtype
    output = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                            dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                            enable_gqa=enable_gqa)
    if attn_mask is None:
        return output
    # Keep attnlib's promise for queries whose keys are all masked: a zero output, never NaN.
    allowed = attn_mask if attn_mask.dtype == torch.bool else attn_mask > float("-inf")
    return output.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: torch.Tensor | None = None, is_causal: bool = False,
                                 scale: float | None = None, dropout_p: float = 0.0, enable_gqa: bool = False,
                                 need_weights: bool = True):
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv); ``scale=None`` means 1/√Dk.
    ``attn_mask``: bool (True = may attend) or float (added), broadcastable to (..., Lq, Lk).
    ``is_causal=True`` masks keys after each query (top-left aligned). Fully masked queries get
    zero weights and a zero output. ``dropout_p > 0`` zeroes each weight with probability p and scales
    the kept ones by 1/(1 − p) (as torch; use it only in training); the returned weights are the ones
    used. ``enable_gqa=True``: key and value may have fewer heads Hkv than the query's Hq (Hq divisible
    by Hkv); each group of Hq/Hkv query heads shares one key/value head. ``need_weights=False`` returns
    ``(output, None)`` from torch's fused kernel.
    """
    require_bool("enable_gqa", enable_gqa)
    full_key, full_value = _repeat_kv(query, key, value) if enable_gqa else (key, value)
    check_attention_args(query, full_key, full_value, attn_mask, is_causal, scale)
    check_dropout_p(dropout_p)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    if not need_weights:
        return _fast(query, key, value, attn_mask, is_causal, scale, dropout_p, enable_gqa), None
    return _reference(query, full_key, full_value, attn_mask, is_causal, scale, dropout_p)

