"""The NumPy mirror of attnlib's steps: same names, same signatures, same mask rules.

The early chapters compute attention by hand in NumPy; these functions are what they check against,
and ``tests/lib/test_numpy_ops.py`` checks them against the torch versions.
"""

from __future__ import annotations

import math

import numpy as np

from attnlib._checks import checked, require_array
from attnlib.attention import check_attention_args, check_weighted_sum_args
from attnlib.multihead import check_merge_heads, check_split_heads
from attnlib.scaling import check_scale_args
from attnlib.scores import check_projection_args, check_scores_args
from attnlib.softmax import check_apply_mask_args, check_causal_mask_args, check_padding_mask_args, check_softmax_args


@checked(check_projection_args, require=require_array)
def project(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``x @ weight + bias``: (..., L, D) @ (D, Dk) -> (..., L, Dk)."""
    out = x @ weight  # (..., L, D) @ (D, Dk) -> (..., L, Dk)
    return out if bias is None else out + bias


@checked(check_scores_args, require=require_array)
def dot_product_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``Q Kᵀ``: (..., Lq, Dk), (..., Lk, Dk) -> (..., Lq, Lk)."""
    return query @ np.swapaxes(key, -1, -2)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


@checked(check_scale_args, require=require_array)
def scale_scores(scores: np.ndarray, d_k: int) -> np.ndarray:
    """Scores (..., Lq, Lk) divided by √Dk."""
    return scores / math.sqrt(d_k)


@checked(check_softmax_args, require=require_array)
def softmax(x: np.ndarray, dim: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Stable softmax of ``x / temperature`` along ``dim``; an all ``-inf`` row becomes zeros.

    Typically scores (..., Lq, Lk) -> weights (..., Lq, Lk). Shape and dtype kept; float16 inputs
    are computed in float32, as in the torch version.
    """
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    work = work / temperature
    row_max = work.max(axis=dim, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.exp(work - row_max)
    total = exps.sum(axis=dim, keepdims=True)
    return (exps / np.where(total > 0, total, 1.0)).astype(x.dtype)


@checked(check_causal_mask_args, device=None)
def causal_mask(lq: int, lk: int | None = None, align: str = "upper_left") -> np.ndarray:
    """Boolean (Lq, Lk) mask, True on and below the diagonal; ``align="lower_right"`` ends it at the last key."""
    lk = lq if lk is None else lk
    offset = lk - lq if align == "lower_right" else 0
    return np.tril(np.ones((lq, lk), dtype=bool), k=offset)


@checked(check_padding_mask_args, convert=np.asarray)
def padding_mask(lengths, length: int) -> np.ndarray:
    """Boolean (B, 1, 1, L) mask, True for the first ``lengths[b]`` keys of sequence b."""
    lengths = np.asarray(lengths)
    return (np.arange(length)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, L)


@checked(check_apply_mask_args, require=require_array)
def apply_mask(scores: np.ndarray, attn_mask: np.ndarray | None = None, *, is_causal: bool = False) -> np.ndarray:
    """Scores (..., Lq, Lk) with ``-inf`` where a bool mask is False; float masks are added."""
    if is_causal:
        attn_mask = causal_mask.unchecked(*scores.shape[-2:])
    if attn_mask is None:
        return scores
    if attn_mask.dtype == np.bool_:
        return np.where(attn_mask, scores, -np.inf).astype(scores.dtype)
    return scores + attn_mask.astype(scores.dtype)


@checked(check_weighted_sum_args, require=require_array)
def weighted_sum(weights: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def _dropout(weights: np.ndarray, p: float) -> np.ndarray:
    """Weights (..., Lq, Lk) with each zeroed with probability p (NumPy's global random state), the rest / (1 − p)."""
    if p == 0:
        return weights
    if p == 1:
        return np.zeros_like(weights)
    keep = np.random.random_sample(weights.shape) >= p  # (..., Lq, Lk)
    return np.where(keep, weights, 0.0) / (1.0 - p)


@checked(check_attention_args, require=require_array)
def scaled_dot_product_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                                 attn_mask: np.ndarray | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: float | None = None, enable_gqa: bool = False,
                                 need_weights: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    Same arguments and rules as the torch version; float16 is computed in float32. ``dropout_p`` drops weights
    (NumPy's global random state) and returns the ones used. ``enable_gqa=True``: key and value may have
    fewer heads (..., Hkv, Lk, D), each shared by Hq/Hkv query heads. ``need_weights=False`` returns ``(output, None)``.
    """
    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1  # query heads per key/value head
    if groups > 1:  # key/value head g serves query heads g*G..(g+1)*G - 1: (..., Hkv, Lk, D) -> (..., Hq, Lk, D)
        key, value = np.repeat(key, groups, axis=-3), np.repeat(value, groups, axis=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    if dtype == np.float16:  # as in torch: accumulate half-precision scores in float32
        query, key, value = (t.astype(np.float32) for t in (query, key, value))
    scores = dot_product_scores.unchecked(query, key) * scale  # (..., Lq, Lk)
    scores = apply_mask.unchecked(scores, attn_mask, is_causal=is_causal)
    weights = _dropout(softmax.unchecked(scores, dim=-1), p=dropout_p)  # (..., Lq, Lk)
    output = weighted_sum.unchecked(weights, value).astype(dtype)  # (..., Lq, Dv)
    return output, (weights.astype(dtype) if need_weights else None)


@checked(check_split_heads, require=require_array)
def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, L, D) -> (B, H, L, D/H)."""
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 1, 3)


@checked(check_merge_heads, require=require_array)
def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, L, Dk) -> (B, L, H*Dk)."""
    b, h, length, dk = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, length, h * dk)
