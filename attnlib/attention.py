"""Weighted sums of values, and scaled dot-product attention assembled from the steps.

``scaled_dot_product_attention`` has the signature and mask rules of
``torch.nn.functional.scaled_dot_product_attention`` but also returns the weights. Its readable
path composes attnlib's own steps; ``need_weights=False`` takes the fast path, torch's fused kernel.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from attnlib._checks import check_attention_args, check_dropout_p, check_weighted_sum_args, checked
from attnlib.scores import dot_product_scores
from attnlib.softmax import apply_mask, softmax

_HALF = (torch.float16, torch.bfloat16)


@checked(check_weighted_sum_args)
def weighted_sum(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Each output row is a weighted sum of value rows, ``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


@checked(check_dropout_p)
def attention_dropout(weights: torch.Tensor, dropout_p: float) -> torch.Tensor:
    """Weights (..., Lq, Lk): zero each with probability p, scale the kept ones by 1/(1 − p); p = 0 returns them."""
    if dropout_p == 0:
        return weights
    return F.dropout(weights, p=dropout_p, training=True)  # (..., Lq, Lk), same shape


def _reference(query, key, value, *, attn_mask, dropout_p, is_causal, scale):
    """The readable path, attnlib's own steps on checked inputs: (output (..., Lq, Dv), weights (..., Lq, Lk))."""
    dtype = query.dtype
    if dtype in _HALF:  # scores of half-precision inputs overflow easily: accumulate in float32
        query, key, value = query.float(), key.float(), value.float()
    # Scale the (Lq, Dk) queries rather than the (Lq, Lk) scores: the same numbers, one L x L pass fewer.
    scores = dot_product_scores.unchecked(query * scale, key)  # (..., Lq, Lk)
    scores = apply_mask.unchecked(scores, attn_mask, is_causal=is_causal)
    weights = softmax.unchecked(scores, dim=-1)  # (..., Lq, Lk)
    weights = attention_dropout.unchecked(weights, dropout_p=dropout_p)  # the weights actually used (and returned)
    return weighted_sum.unchecked(weights, value).to(dtype), weights.to(dtype)


def _broadcast_batch(query, key, value, attn_mask):
    """Expand query, key and value to one batch shape (..., L, D), the mask's included."""
    shapes = [t.shape[:-2] for t in (query, key, value)]
    if attn_mask is not None:
        shapes.append(attn_mask.shape[:-2])
    batch = torch.broadcast_shapes(*shapes)  # checked to broadcast by the caller
    return tuple(t.expand(*batch, *t.shape[-2:]) for t in (query, key, value))


def _repeat_kv(key, value, groups: int):
    """Grouped-query attention as ordinary attention: key/value head g serves query heads g*G..(g+1)*G - 1."""
    # (..., Hkv, Lk, D) -> (..., Hkv * G, Lk, D), each key/value head repeated for its G query heads
    return key.repeat_interleave(groups, dim=-3), value.repeat_interleave(groups, dim=-3)


def _fast(query, key, value, *, attn_mask, dropout_p, is_causal, scale, groups):
    """torch's fused kernel on checked inputs; ``groups`` query heads per key/value head. Returns the output."""
    enable_gqa = groups > 1
    if enable_gqa:  # torch groups the heads itself; expand only the batch dims before them
        full_key, full_value = _repeat_kv(key, value, groups)
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


@checked(check_attention_args)
def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: float | None = None, enable_gqa: bool = False,
                                 need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    The arguments are torch's, in torch's order and kinds (``scale`` onwards keyword-only), plus ``need_weights``.
    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv); ``scale=None`` means 1/√Dk.
    ``attn_mask``: bool (True = may attend) or float (added), broadcastable to (..., Lq, Lk).
    ``is_causal=True`` masks keys after each query (top-left aligned). Fully masked queries get
    zero weights and a zero output. ``dropout_p > 0`` zeroes each weight with probability p and scales
    the kept ones by 1/(1 − p) (as torch; use it only in training); the returned weights are the ones
    used. ``enable_gqa=True``: key and value may have fewer heads Hkv than the query's Hq (Hq divisible
    by Hkv); each group of Hq/Hkv query heads shares one key/value head. ``need_weights=False`` returns
    ``(output, None)`` from torch's fused kernel; otherwise attnlib's readable path computes both.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1  # query heads per key/value head
    if not need_weights:
        return _fast(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     groups=groups), None
    if groups > 1:
        key, value = _repeat_kv(key, value, groups)
    return _reference(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
