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
    check_mask_args,
    checked,
    require_bool,
    require_float,
    require_float_tensor,
    require_key_width,
    require_like,
    require_positive,
    require_rank,
    require_tensor,
    require_value_length,
)
from attnlib.scores import dot_product_scores
from attnlib.softmax import apply_mask, softmax

_HALF = (torch.float16, torch.bfloat16)


def check_weighted_sum_args(weights, value, require=require_tensor) -> None:
    """The inputs of ``A V``: float weights (..., Lq, Lk) and value (..., Lk, Dv) of one dtype and device."""
    require_float_tensor("weights", weights, 2, "(..., Lq, Lk)", require=require)
    require_float_tensor("value", value, 2, "(..., Lk, Dv)", require=require)
    require_value_length(value, weights.shape[-1], "weights", weights)
    require_like("value", value, "weights", weights)
    batch_shape(weights.shape[:-2], value.shape[:-2])


@checked(check_weighted_sum_args)
def weighted_sum(weights: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Each output row is a weighted sum of value rows, ``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def check_dropout_p(dropout_p) -> None:
    """Raise TypeError/ValueError unless ``dropout_p`` is a real number in [0, 1]."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, Real):
        raise TypeError(f"expected dropout_p to be a number in [0, 1], got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p <= 1.0:  # also refuses NaN
        raise ValueError(f"expected dropout_p in [0, 1], got {dropout_p}")


@checked(check_dropout_p)
def attention_dropout(weights: torch.Tensor, dropout_p: float) -> torch.Tensor:
    """Weights (..., Lq, Lk): zero each with probability p, scale the kept ones by 1/(1 − p); p = 0 returns them.

    The coin flips are drawn on the CPU from torch's generator (``torch.manual_seed``) and moved to the weights'
    device, so a seed drops the same weights on every device; on the CPU they are ``F.dropout``'s own.
    """
    if dropout_p == 0:
        return weights
    if dropout_p == 1:
        return weights * 0  # every weight dropped (a zero that keeps the graph)
    noise = torch.empty_like(weights, device="cpu").bernoulli_(1 - dropout_p)  # 1 = kept, as F.dropout draws it
    return weights * noise.div_(1 - dropout_p).to(weights.device)  # (..., Lq, Lk), same shape


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


def check_attention_args(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                         enable_gqa=False, require=require_tensor) -> int:
    """Check the arguments of scaled dot-product attention, shared by every attention path; returns Hq / Hkv.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv) tensors (``require=require_array``: arrays);
    ``attn_mask`` None or a bool/float mask broadcastable to (..., Lq, Lk) on the query's device;
    ``is_causal`` a bool, not combined with a mask; ``scale`` None or positive; ``dropout_p`` in [0, 1];
    ``enable_gqa`` a bool (then key and value may have fewer heads than the query).
    """
    require_bool("enable_gqa", enable_gqa)
    for name, t in (("query", query), ("key", key), ("value", value)):
        require(name, t)
    batch = check_qkv(query, key, value, enable_gqa)
    require_positive("scale", scale, allow_none=True)
    check_dropout_p(dropout_p)
    device = query.device if isinstance(query, torch.Tensor) else None
    leading = check_mask_args(attn_mask, is_causal, query.shape[-2], key.shape[-2], (batch,), device, require)
    if 0 in leading:  # an empty batch: torch's CPU kernel divides by zero on some (torch 2.11: a crash)
        raise ValueError(f"expected query, key, value (and attn_mask) whose leading dims broadcast to sizes >= 1, "
                         f"got {leading}")
    return query.shape[-3] // key.shape[-3] if enable_gqa else 1


def check_qkv(query, key, value, enable_gqa: bool = False) -> tuple:
    """Check float query (..., Hq, Lq, Dk), key (..., Hkv, Lk, Dk), value (..., Hkv, Lk, Dv) of one dtype/device.

    Without ``enable_gqa`` the heads are ordinary batch dims (Hq = Hkv after broadcasting); with it Hq must
    be a multiple of Hkv. Returns the leading dims the three broadcast to, as the query sees them.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        require_float(name, x)
    rank = 3 if enable_gqa else 2
    require_rank("query", query, rank, "(..., Hq, Lq, Dk)" if enable_gqa else "(..., Lq, Dk)")
    require_rank("key", key, rank, "(..., Hkv, Lk, Dk)" if enable_gqa else "(..., Lk, Dk)")
    require_rank("value", value, rank, "(..., Hkv, Lk, Dv)" if enable_gqa else "(..., Lk, Dv)")
    if key.shape[-2] == 0 or key.shape[-1] == 0:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Lk >= 1 and Dk >= 1, got {tuple(key.shape)}")
    require_key_width(query, key)
    require_value_length(value, key.shape[-2], "key", key)
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"expected query, key and value to share one dtype, got "
                        f"{query.dtype}, {key.dtype}, {value.dtype}")
    if isinstance(query, torch.Tensor) and not (query.device == key.device == value.device):
        raise ValueError(f"expected query, key and value on one device, got "
                         f"{query.device}, {key.device}, {value.device}")
    if not enable_gqa:
        return batch_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    groups = gqa_groups(query, key, value)
    return batch_shape(query.shape[:-2], *(_grouped(t.shape[:-2], groups) for t in (key, value)))


def gqa_groups(query, key, value) -> int:
    """Query heads per key/value head for grouped-query attention: Hq / Hkv, checked."""
    hq, hkv = query.shape[-3], key.shape[-3]
    if value.shape[-3] != hkv:
        raise ValueError(f"expected key and value with the same number of heads Hkv, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"expected the query's heads Hq={hq} to be a multiple of the key/value heads Hkv, got "
                         f"query {tuple(query.shape)}, key {tuple(key.shape)}")
    return hq // hkv


def _grouped(batch: tuple, groups: int) -> tuple:
    """Leading dims (..., Hkv) as the query sees them, (..., Hkv * G): each key/value head serves G query heads."""
    return batch if groups == 1 else (*batch[:-1], batch[-1] * groups)


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
    ``(output, None)`` from torch's fused kernel (whose dropout draws on the device); otherwise attnlib's readable
    path computes both, its dropout drawn on the CPU (``attention_dropout``).
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1  # query heads per key/value head
    if not need_weights:
        return _fast(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                     groups=groups), None
    if groups > 1:
        key, value = _repeat_kv(key, value, groups)
    return _reference(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale)
