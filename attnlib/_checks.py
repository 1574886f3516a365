"""Input checks shared by the torch and NumPy code paths.

Every check raises ``TypeError`` (wrong kind of object or dtype) or ``ValueError`` (wrong shape or
value) with a message that names what was expected and what came.
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np
import torch


def _kind(x) -> str:
    return f"{type(x).__module__}.{type(x).__qualname__}"


def require_tensor(name: str, x) -> None:
    """Raise TypeError unless ``x`` is a ``torch.Tensor`` (NumPy arrays get a pointer to numpy_ops)."""
    if isinstance(x, torch.Tensor):
        return
    hint = " (for NumPy arrays use attnlib.numpy_ops)" if isinstance(x, np.ndarray) else ""
    raise TypeError(f"expected {name} to be a torch.Tensor, got {_kind(x)}{hint}")


def require_array(name: str, x) -> None:
    """Raise TypeError unless ``x`` is a ``numpy.ndarray`` (tensors get a pointer to the torch API)."""
    if isinstance(x, np.ndarray):
        return
    hint = " (for tensors use the torch functions in attnlib)" if isinstance(x, torch.Tensor) else ""
    raise TypeError(f"expected {name} to be a numpy.ndarray, got {_kind(x)}{hint}")


def is_floating(x) -> bool:
    """True for floating-point tensors and arrays."""
    if isinstance(x, torch.Tensor):
        return x.is_floating_point()
    return np.issubdtype(x.dtype, np.floating)


def require_float(name: str, x) -> None:
    """Raise TypeError unless ``x`` has a floating-point dtype."""
    if not is_floating(x):
        raise TypeError(f"expected {name} to have a floating-point dtype, got {x.dtype}")


def require_rank(name: str, x, min_rank: int, layout: str, max_rank: int | None = None) -> None:
    """Raise ValueError unless ``min_rank <= x.ndim <= max_rank``; ``layout`` reads like ``(..., Lq, Dk)``."""
    too_many = max_rank is not None and x.ndim > max_rank
    if x.ndim < min_rank or too_many:
        count = f"{min_rank}" if max_rank == min_rank else f"at least {min_rank}"
        raise ValueError(
            f"expected {name} of shape {layout} ({count} dims), got {tuple(x.shape)} ({x.ndim} dims)"
        )


def require_positive(name: str, value, allow_none: bool = False) -> None:
    """Raise TypeError/ValueError unless ``value`` is a finite real number > 0."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"expected {name} to be a positive number, got {_kind(value)}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"expected {name} to be a finite number > 0, got {value}")


def require_positive_int(name: str, value) -> None:
    """Raise TypeError/ValueError unless ``value`` is an int > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"expected {name} to be a positive int, got {_kind(value)}")
    if value <= 0:
        raise ValueError(f"expected {name} to be a positive int, got {value}")


def check_dim(name: str, x, dim: int) -> int:
    """Return ``dim`` as a non-negative index into a non-empty dim of ``x``, or raise TypeError/ValueError."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"expected dim to be an int, got {_kind(dim)}")
    if not -x.ndim <= dim < x.ndim:
        raise ValueError(f"expected dim in [{-x.ndim}, {x.ndim - 1}] for {name} of shape "
                         f"{tuple(x.shape)}, got dim={dim}")
    if x.shape[dim] == 0:
        raise ValueError(f"expected {name} with at least one entry along dim={dim}, got shape {tuple(x.shape)}")
    return dim % x.ndim


def require_bool(name: str, value) -> None:
    """Raise TypeError unless ``value`` is a Python or NumPy bool (e.g. ``is_causal``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"expected {name} to be a bool, got {_kind(value)}")


def require_like(name: str, x, ref_name: str, ref) -> None:
    """Raise TypeError/ValueError unless tensor ``x`` has the dtype and device of ``ref``."""
    if x.dtype != ref.dtype:
        raise TypeError(f"expected {name} of dtype {ref.dtype} like {ref_name}, got {x.dtype}")
    if isinstance(x, torch.Tensor) and x.device != ref.device:
        raise ValueError(f"expected {name} on {ref.device} like {ref_name}, got {x.device}")


def require_float_tensor(name: str, x, min_rank: int, layout: str, max_rank: int | None = None,
                         require=require_tensor) -> None:
    """One input's whole check: a tensor (``require=require_array``: an array) of a float dtype and a rank in range."""
    require(name, x)
    require_float(name, x)
    require_rank(name, x, min_rank, layout, max_rank)


def require_features(name: str, x, width: int, like_name: str, like) -> None:
    """A module's input: a float tensor (B, L, width) with the dtype and device of ``like`` (its weights)."""
    require_float_tensor(name, x, 3, f"(B, L, {width})", max_rank=3)
    require_like(name, x, like_name, like)
    if x.shape[-1] != width:
        raise ValueError(f"expected {name} of shape (B, L, {width}), got {tuple(x.shape)}")


def check_dropout_p(dropout_p) -> None:
    """Raise TypeError/ValueError unless ``dropout_p`` is a real number in [0, 1]."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, Real):
        raise TypeError(f"expected dropout_p to be a number in [0, 1], got {type(dropout_p).__name__}")
    if not 0.0 <= dropout_p <= 1.0:  # also refuses NaN
        raise ValueError(f"expected dropout_p in [0, 1], got {dropout_p}")


def require_key_width(query, key) -> None:
    """Raise ValueError unless key (..., Lk, Dk) has the query's width Dk."""
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Dk={query.shape[-1]} to match "
                         f"query {tuple(query.shape)}, got {tuple(key.shape)}")


def require_value_length(value, lk: int, ref_name: str, ref) -> None:
    """Raise ValueError unless value (..., Lk, Dv) has the Lk rows that ``ref`` implies."""
    if value.shape[-2] != lk:
        raise ValueError(f"expected value of shape (..., Lk, Dv) with Lk={lk} to match "
                         f"{ref_name} {tuple(ref.shape)}, got {tuple(value.shape)}")


def check_scores_args(query, key, require=require_tensor) -> None:
    """The inputs of ``Q Kᵀ``: float query (..., Lq, Dk) and key (..., Lk, Dk) of one width, dtype and device."""
    require_float_tensor("query", query, 2, "(..., Lq, Dk)", require=require)
    require_float_tensor("key", key, 2, "(..., Lk, Dk)", require=require)
    require_key_width(query, key)
    require_like("key", key, "query", query)
    batch_shape(query.shape[:-2], key.shape[:-2])


def check_weighted_sum_args(weights, value, require=require_tensor) -> None:
    """The inputs of ``A V``: float weights (..., Lq, Lk) and value (..., Lk, Dv) of one dtype and device."""
    require_float_tensor("weights", weights, 2, "(..., Lq, Lk)", require=require)
    require_float_tensor("value", value, 2, "(..., Lk, Dv)", require=require)
    require_value_length(value, weights.shape[-1], "weights", weights)
    require_like("value", value, "weights", weights)
    batch_shape(weights.shape[:-2], value.shape[:-2])


def check_projection_args(x, weight, bias, require=require_tensor, weight_name: str = "weight") -> None:
    """The inputs of ``x @ weight + bias``: x (..., L, D), weight (D, Dk), bias None or (Dk,), one dtype."""
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


def check_split_heads(x, num_heads: int, require=require_tensor) -> None:
    """x (B, L, D) with D divisible by ``num_heads``."""
    require("x", x)
    require_rank("x", x, 3, "(B, L, D)", max_rank=3)
    require_positive_int("num_heads", num_heads)
    if x.shape[-1] % num_heads:
        raise ValueError(f"expected D divisible by num_heads={num_heads}, got x of shape {tuple(x.shape)}")


def check_mask_shape_args(lq: int, lk: int, align: str) -> None:
    """The arguments of a causal mask: positive lengths Lq, Lk and an alignment."""
    require_positive_int("Lq", lq)
    require_positive_int("Lk", lk)
    if align not in ("upper_left", "lower_right"):
        raise ValueError(f"expected align 'upper_left' or 'lower_right', got {align!r}")


def check_lengths(lengths, length: int) -> None:
    """``lengths`` (B,) as a 1-D integer tensor or array of values in [0, L] (already converted)."""
    if lengths.ndim != 1 or not _is_integer(lengths):
        raise lengths_type_error(f"shape {tuple(lengths.shape)} dtype {lengths.dtype}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > length):
        raise ValueError(f"expected every length in [0, {length}], got {lengths.tolist()}")


def lengths_type_error(got: str) -> TypeError:
    """The error for ``lengths`` that are not a 1-D sequence of ints; ``got`` says what came."""
    return TypeError(f"expected lengths as a 1-D sequence of ints (B,), got {got}")


def _is_integer(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
    return np.issubdtype(x.dtype, np.integer)


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


def check_mask_args(attn_mask, is_causal, lq: int, lk: int, batch: tuple = (), device: torch.device | None = None,
                    require=require_tensor) -> None:
    """``is_causal`` a bool; ``attn_mask`` None or a bool/float mask broadcastable to (..., Lq, Lk), not both.

    The mask is a tensor on ``device`` (``require=require_array``: an array); its leading dims broadcast with
    those in ``batch``.
    """
    require_bool("is_causal", is_causal)
    if attn_mask is None:
        return
    require("attn_mask", attn_mask)
    check_mask(attn_mask, lq, lk)
    if device is not None and attn_mask.device != device:
        raise ValueError(f"expected attn_mask on {device} like the inputs, got {attn_mask.device}")
    batch_shape(*batch, attn_mask.shape[:-2])
    if is_causal:
        raise ValueError("expected either attn_mask or is_causal=True, got both")


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
    check_mask_args(attn_mask, is_causal, query.shape[-2], key.shape[-2], (batch,), device, require)
    return query.shape[-3] // key.shape[-3] if enable_gqa else 1


def batch_shape(*shapes) -> tuple:
    """Broadcast leading (batch) shapes, or raise ValueError naming them."""
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise ValueError(f"expected batch dimensions that broadcast together, got "
                         f"{', '.join(str(tuple(s)) for s in shapes)}") from None


def check_mask(attn_mask, lq: int, lk: int) -> None:
    """Check that a mask is boolean or float and broadcasts to (..., Lq, Lk)."""
    is_bool = attn_mask.dtype in (torch.bool, np.bool_)
    if not (is_bool or is_floating(attn_mask)):
        raise TypeError(f"expected attn_mask of dtype bool (True = may attend) or a float dtype "
                        f"(added to the scores), got {attn_mask.dtype}")
    shape = tuple(attn_mask.shape)
    tail = shape[-2:] if len(shape) >= 2 else (1,) * (2 - len(shape)) + shape
    if not all(m in (1, n) for m, n in zip(tail, (lq, lk), strict=True)):
        raise ValueError(f"expected attn_mask broadcastable to (..., Lq, Lk) = (..., {lq}, {lk}), "
                         f"got {shape}")
