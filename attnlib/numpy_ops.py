"""The NumPy mirror of attnlib's steps: same names, same signatures, same mask rules.

The early chapters compute attention by hand in NumPy; these functions are what they check against,
and ``tests/lib/test_numpy_ops.py`` checks them against the torch versions.
"""

from __future__ import annotations

import math

import numpy as np

from attnlib._checks import (
    check_attention_args,
    check_dim,
    check_lengths,
    check_mask_args,
    check_mask_shape_args,
    check_projection_args,
    check_scores_args,
    check_split_heads,
    check_weighted_sum_args,
    lengths_type_error,
    require_array,
    require_float_tensor,
    require_positive,
    require_positive_int,
    require_rank,
)


def _array(name: str, x, min_rank: int = 0, layout: str = "") -> None:
    require_float_tensor(name, x, min_rank, layout, require=require_array)


def project(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``x @ weight + bias``: (..., L, D) @ (D, Dk) -> (..., L, Dk)."""
    check_projection_args(x, weight, bias, require=require_array)
    out = x @ weight  # (..., L, D) @ (D, Dk) -> (..., L, Dk)
    return out if bias is None else out + bias


def dot_product_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``Q Kᵀ``: (..., Lq, Dk), (..., Lk, Dk) -> (..., Lq, Lk)."""
    check_scores_args(query, key, require=require_array)
    return _dot_product_scores(query, key)


def _dot_product_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    return query @ np.swapaxes(key, -1, -2)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


def scale_scores(scores: np.ndarray, d_k: int) -> np.ndarray:
    """Scores (..., Lq, Lk) divided by √Dk."""
    _array("scores", scores)
    require_positive_int("d_k", d_k)
    return scores / math.sqrt(d_k)


def softmax(x: np.ndarray, dim: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Stable softmax of ``x / temperature`` along ``dim``; an all ``-inf`` row becomes zeros.

    Typically scores (..., Lq, Lk) -> weights (..., Lq, Lk). Shape and dtype kept; float16 inputs
    are computed in float32, as in the torch version.
    """
    _array("x", x)
    require_positive("temperature", temperature)
    dim = check_dim("x", x, dim)
    return _softmax(x, dim, temperature)


def _softmax(x: np.ndarray, dim: int = -1, temperature: float = 1.0) -> np.ndarray:
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    work = work / temperature
    row_max = work.max(axis=dim, keepdims=True)
    row_max = np.where(np.isfinite(row_max), row_max, 0.0)
    exps = np.exp(work - row_max)
    total = exps.sum(axis=dim, keepdims=True)
    return (exps / np.where(total > 0, total, 1.0)).astype(x.dtype)


def causal_mask(lq: int, lk: int | None = None, align: str = "upper_left") -> np.ndarray:
    """Boolean (Lq, Lk) mask, True on and below the diagonal; ``align="lower_right"`` ends it at the last key."""
    lk = lq if lk is None else lk
    check_mask_shape_args(lq, lk, align)
    offset = lk - lq if align == "lower_right" else 0
    return np.tril(np.ones((lq, lk), dtype=bool), k=offset)


def padding_mask(lengths, length: int) -> np.ndarray:
    """Boolean (B, 1, 1, L) mask, True for the first ``lengths[b]`` keys of sequence b."""
    require_positive_int("L", length)
    try:
        lengths = np.asarray(lengths)
    except ValueError:
        raise lengths_type_error(type(lengths).__name__) from None
    check_lengths(lengths, length)
    return (np.arange(length)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, L)


def apply_mask(scores: np.ndarray, attn_mask: np.ndarray | None = None, *, is_causal: bool = False) -> np.ndarray:
    """Scores (..., Lq, Lk) with ``-inf`` where a bool mask is False; float masks are added."""
    _array("scores", scores, 2, "(..., Lq, Lk)")
    lq, lk = scores.shape[-2:]
    check_mask_args(attn_mask, is_causal, lq, lk, (scores.shape[:-2],), require=require_array)
    return _apply_mask(scores, attn_mask, is_causal)


def _apply_mask(scores: np.ndarray, attn_mask: np.ndarray | None, is_causal: bool) -> np.ndarray:
    if is_causal:
        attn_mask = causal_mask(*scores.shape[-2:])
    if attn_mask is None:
        return scores
    if attn_mask.dtype == np.bool_:
        return np.where(attn_mask, scores, -np.inf).astype(scores.dtype)
    return scores + attn_mask.astype(scores.dtype)


def weighted_sum(weights: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    check_weighted_sum_args(weights, value, require=require_array)
    return weights @ value  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)


def _dropout(weights: np.ndarray, p: float) -> np.ndarray:
    """Weights (..., Lq, Lk) with each zeroed with probability p (NumPy's global random state), the rest / (1 − p)."""
    if p == 0:
        return weights
    if p == 1:
        return np.zeros_like(weights)
    keep = np.random.random_sample(weights.shape) >= p  # (..., Lq, Lk)
    return np.where(keep, weights, 0.0) / (1.0 - p)


def scaled_dot_product_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                                 attn_mask: np.ndarray | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale: float | None = None, enable_gqa: bool = False,
                                 need_weights: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    Same arguments and rules as the torch version; float16 is computed in float32. ``dropout_p`` drops weights
    (NumPy's global random state) and returns the ones used. ``enable_gqa=True``: key and value may have
    fewer heads (..., Hkv, Lk, D), each shared by Hq/Hkv query heads. ``need_weights=False`` returns ``(output, None)``.
    """
    groups = check_attention_args(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                  require=require_array)
    if groups > 1:  # key/value head g serves query heads g*G..(g+1)*G - 1: (..., Hkv, Lk, D) -> (..., Hq, Lk, D)
        key, value = np.repeat(key, groups, axis=-3), np.repeat(value, groups, axis=-3)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    if dtype == np.float16:  # as in torch: accumulate half-precision scores in float32
        query, key, value = (t.astype(np.float32) for t in (query, key, value))
    scores = _dot_product_scores(query, key) * scale  # (..., Lq, Lk)
    weights = _dropout(_softmax(_apply_mask(scores, attn_mask, is_causal), dim=-1), dropout_p)
    output = (weights @ value).astype(dtype)  # (..., Lq, Lk) @ (..., Lk, Dv) -> (..., Lq, Dv)
    return output, (weights.astype(dtype) if need_weights else None)


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, L, D) -> (B, H, L, D/H)."""
    check_split_heads(x, num_heads, require=require_array)
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, L, Dk) -> (B, L, H*Dk)."""
    require_array("x", x)
    require_rank("x", x, 4, "(B, H, L, Dk)", max_rank=4)
    b, h, length, dk = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, length, h * dk)
