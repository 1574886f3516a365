"""The NumPy mirror of attnlib's steps: same names, same signatures, same mask rules.

The early chapters compute attention by hand in NumPy; these functions are what they check against,
and ``tests/test_numpy_ops.py`` checks them against the torch versions.
"""

from __future__ import annotations

import math

import numpy as np

from attnlib._checks import (
    batch_shape,
    check_dim,
    check_mask,
    check_qkv,
    require_array,
    require_bool,
    require_float,
    require_like,
    require_positive,
    require_positive_int,
    require_rank,
)
from attnlib.attention import check_dropout_p


def _arrays(**named) -> None:
    for name, x in named.items():
        require_array(name, x)
        require_float(name, x)


def project(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """``x @ weight + bias``: (..., L, D) @ (D, Dk) -> (..., L, Dk)."""
    _arrays(x=x, weight=weight)
    require_rank("x", x, 1, "(..., L, D)")
    require_rank("weight", weight, 2, "(D, Dk)", max_rank=2)
    require_like("weight", weight, "x", x)
    if x.shape[-1] != weight.shape[0]:
        raise ValueError(f"expected weight of shape (D, Dk) with D={x.shape[-1]} to match x "
                         f"{x.shape}, got {weight.shape}")
    if bias is None:
        return x @ weight  # (..., L, D) @ (D, Dk) -> (..., L, Dk)
    _arrays(bias=bias)
    require_like("bias", bias, "x", x)
    if bias.shape != (weight.shape[1],):
        raise ValueError(f"expected bias of shape (Dk,) = ({weight.shape[1]},), got {bias.shape}")
    return x @ weight + bias


def dot_product_scores(query: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``Q Kᵀ``: (..., Lq, Dk), (..., Lk, Dk) -> (..., Lq, Lk)."""
    _arrays(query=query, key=key)
    require_rank("query", query, 2, "(..., Lq, Dk)")
    require_rank("key", key, 2, "(..., Lk, Dk)")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Dk={query.shape[-1]} to match "
                         f"query {query.shape}, got {key.shape}")
    require_like("key", key, "query", query)
    batch_shape(query.shape[:-2], key.shape[:-2])
    return query @ np.swapaxes(key, -1, -2)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)


def scale_scores(scores: np.ndarray, d_k: int) -> np.ndarray:
    """Scores (..., Lq, Lk) divided by √Dk."""
    _arrays(scores=scores)
    require_positive_int("d_k", d_k)
    return scores / math.sqrt(d_k)


def softmax(x: np.ndarray, dim: int = -1, temperature: float = 1.0) -> np.ndarray:
    """Stable softmax of ``x / temperature`` along ``dim``; an all ``-inf`` row becomes zeros.

    Typically scores (..., Lq, Lk) -> weights (..., Lq, Lk). Shape and dtype kept; float16 inputs
    are computed in float32, as in the torch version.
    """
    _arrays(x=x)
    require_positive("temperature", temperature)
    dim = check_dim("x", x, dim)
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
    require_positive_int("Lq", lq)
    require_positive_int("Lk", lk)
    if align not in ("upper_left", "lower_right"):
        raise ValueError(f"expected align 'upper_left' or 'lower_right', got {align!r}")
    offset = lk - lq if align == "lower_right" else 0
    return np.tril(np.ones((lq, lk), dtype=bool), k=offset)


def padding_mask(lengths, length: int) -> np.ndarray:
    """Boolean (B, 1, 1, L) mask, True for the first ``lengths[b]`` keys of sequence b."""
    require_positive_int("L", length)
    try:
        lengths = np.asarray(lengths)
    except ValueError:
        raise TypeError(f"expected lengths as a 1-D sequence of ints (B,), got {type(lengths).__name__}") from None
    if lengths.ndim != 1 or not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(f"expected lengths as a 1-D sequence of ints (B,), got shape {lengths.shape} "
                        f"dtype {lengths.dtype}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > length):
        raise ValueError(f"expected every length in [0, {length}], got {lengths.tolist()}")
    return (np.arange(length)[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, L)


def apply_mask(scores: np.ndarray, attn_mask: np.ndarray | None = None, is_causal: bool = False) -> np.ndarray:
    """Scores (..., Lq, Lk) with ``-inf`` where a bool mask is False; float masks are added."""
    _arrays(scores=scores)
    require_rank("scores", scores, 2, "(..., Lq, Lk)")
    require_bool("is_causal", is_causal)
    lq, lk = scores.shape[-2:]
    if is_causal and attn_mask is not None:
        raise ValueError("expected either attn_mask or is_causal=True, got both")
    if is_causal:
        attn_mask = causal_mask(lq, lk)
    if attn_mask is None:
        return scores
    require_array("attn_mask", attn_mask)
    check_mask(attn_mask, lq, lk)
    batch_shape(scores.shape, attn_mask.shape)
    if attn_mask.dtype == np.bool_:
        return np.where(attn_mask, scores, -np.inf).astype(scores.dtype)
    return scores + attn_mask.astype(scores.dtype)


def weighted_sum(weights: np.ndarray, value: np.ndarray) -> np.ndarray:
    """``A V``: (..., Lq, Lk), (..., Lk, Dv) -> (..., Lq, Dv)."""
    _arrays(weights=weights, value=value)
    require_rank("weights", weights, 2, "(..., Lq, Lk)")
    require_rank("value", value, 2, "(..., Lk, Dv)")
    if weights.shape[-1] != value.shape[-2]:
        raise ValueError(f"expected value of shape (..., Lk, Dv) with Lk={weights.shape[-1]} to match "
                         f"weights {weights.shape}, got {value.shape}")
    require_like("value", value, "weights", weights)
    batch_shape(weights.shape[:-2], value.shape[:-2])
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
                                 attn_mask: np.ndarray | None = None, is_causal: bool = False,
                                 scale: float | None = None, dropout_p: float = 0.0, enable_gqa: bool = False,
                                 need_weights: bool = True):
    """``softmax(Q Kᵀ · scale + mask) V``; returns ``(output (..., Lq, Dv), weights (..., Lq, Lk))``.

    Same rules as the torch version; float16 is computed in float32. ``dropout_p`` drops weights
    (NumPy's global random state) and returns the ones used. ``enable_gqa=True``: key and value may have
    fewer heads (..., Hkv, Lk, D), each shared by Hq/Hkv query heads. ``need_weights=False`` returns ``(output, None)``.
    """
    _arrays(query=query, key=key, value=value)
    require_bool("enable_gqa", enable_gqa)
    if enable_gqa:
        key, value = _repeat_kv(query, key, value)
    check_qkv(query, key, value)
    check_dropout_p(dropout_p)
    require_positive("scale", scale, allow_none=True)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    if dtype == np.float16:  # as in torch: accumulate half-precision scores in float32
        query, key, value = (t.astype(np.float32) for t in (query, key, value))
    scores = dot_product_scores(query, key) * scale  # (..., Lq, Lk)
    weights = _dropout(softmax(apply_mask(scores, attn_mask, is_causal), dim=-1), dropout_p)
    output = weighted_sum(weights, value).astype(dtype)  # (..., Lq, Dv)
    return output, (weights.astype(dtype) if need_weights else None)


def _repeat_kv(query, key, value):
    """Key/value head g serves query heads g*G..(g+1)*G - 1: (..., Hkv, Lk, D) -> (..., Hkv * G, Lk, D)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_rank(name, t, 3, "(..., H, L, D)")
    hq, hkv = query.shape[-3], key.shape[-3]
    if value.shape[-3] != hkv or hkv == 0 or hq % hkv:
        raise ValueError(f"expected the query's heads Hq={hq} to be a multiple of the key/value heads Hkv, got "
                         f"query {query.shape}, key {key.shape}, value {value.shape}")
    return np.repeat(key, hq // hkv, axis=-3), np.repeat(value, hq // hkv, axis=-3)


def split_heads(x: np.ndarray, num_heads: int) -> np.ndarray:
    """(B, L, D) -> (B, H, L, D/H)."""
    _arrays(x=x)
    require_rank("x", x, 3, "(B, L, D)", max_rank=3)
    require_positive_int("num_heads", num_heads)
    b, length, d = x.shape
    if d % num_heads:
        raise ValueError(f"expected D divisible by num_heads={num_heads}, got x of shape {x.shape}")
    return x.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(x: np.ndarray) -> np.ndarray:
    """(B, H, L, Dk) -> (B, L, H*Dk)."""
    _arrays(x=x)
    require_rank("x", x, 4, "(B, H, L, Dk)", max_rank=4)
    b, h, length, dk = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, length, h * dk)
