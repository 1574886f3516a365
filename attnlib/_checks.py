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


def check_qkv(query, key, value) -> None:
    """Check the shapes (..., Lq, Dk), (..., Lk, Dk), (..., Lk, Dv) and matching dtypes/devices."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        require_float(name, x)
    require_rank("query", query, 2, "(..., Lq, Dk)")
    require_rank("key", key, 2, "(..., Lk, Dk)")
    require_rank("value", value, 2, "(..., Lk, Dv)")
    if key.shape[-2] == 0 or key.shape[-1] == 0:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Lk >= 1 and Dk >= 1, got {tuple(key.shape)}")
    if key.shape[-1] != query.shape[-1]:
        raise ValueError(f"expected key of shape (..., Lk, Dk) with Dk={query.shape[-1]} to match "
                         f"query {tuple(query.shape)}, got {tuple(key.shape)}")
    if value.shape[-2] != key.shape[-2]:
        raise ValueError(f"expected value of shape (..., Lk, Dv) with Lk={key.shape[-2]} to match "
                         f"key {tuple(key.shape)}, got {tuple(value.shape)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"expected query, key and value to share one dtype, got "
                        f"{query.dtype}, {key.dtype}, {value.dtype}")
    if isinstance(query, torch.Tensor) and not (query.device == key.device == value.device):
        raise ValueError(f"expected query, key and value on one device, got "
                         f"{query.device}, {key.device}, {value.device}")
    batch_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2])


def check_attention_args(query, key, value, attn_mask, is_causal, scale) -> None:
    """Check the arguments of scaled dot-product attention, shared by every attention path.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv) tensors; ``attn_mask`` None or a bool/float
    tensor broadcastable to (..., Lq, Lk) on the query's device; ``is_causal`` a bool, not combined
    with a mask; ``scale`` None or positive.
    """
    for name, t in (("query", query), ("key", key), ("value", value)):
        require_tensor(name, t)
    check_qkv(query, key, value)
    require_positive("scale", scale, allow_none=True)
    require_bool("is_causal", is_causal)
    if attn_mask is None:
        return
    require_tensor("attn_mask", attn_mask)
    check_mask(attn_mask, query.shape[-2], key.shape[-2])
    if attn_mask.device != query.device:
        raise ValueError(f"expected attn_mask on {query.device} like the query, got {attn_mask.device}")
    batch_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2], attn_mask.shape[:-2])
    if is_causal:
        raise ValueError("expected either attn_mask or is_causal=True, got both")


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
