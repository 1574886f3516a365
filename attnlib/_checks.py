"""Input checks shared by the torch and NumPy code paths, and ``checked``, which attaches one to a step.

Every check raises ``TypeError`` (wrong kind of object or dtype) or ``ValueError`` (wrong shape or
value) with a message that names what was expected and what came.

Validate once: a public call makes exactly one call into this module. A step is written once, as the
computation it is, under ``@checked(its_check)``; the public function validates its arguments with the check
and then runs the step, and ``step.unchecked`` is the step alone, which attnlib code calls (with keyword
arguments) on inputs it has checked or made itself. Other public functions and methods call one check
function at their top. ``tests/lib/test_validate_once.py`` counts the calls.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from numbers import Real

import numpy as np
import torch


def checked(check: Callable, *, require: Callable | None = None, **options) -> Callable:
    """Decorator: the step below it, validated by ``check`` first; ``step.unchecked`` is the step alone.

    The public function binds a call's arguments to the step's signature (defaults included) and passes each
    parameter of ``check`` the step's argument of the same name (a method's check gets the instance as its first
    parameter) or the option of that name. ``require`` is the kind of array the step takes, for a check with a
    ``require`` parameter: torch tensors unless ``require=require_array`` (the NumPy twins). A parameter of
    ``check`` that none of these feeds is refused when the step is defined, never left at its default. The public
    function keeps the step's name, docstring and signature, so ``inspect.getsource`` shows the step with this
    decorator above it.
    """
    def attach(step: Callable) -> Callable:
        signature = inspect.signature(step)
        settings = _settings(check, step, require, options)
        feeds = _feeds(check, step, settings)

        @functools.wraps(step)
        def public(*args, **kwargs):
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            check(**{name: arguments.arguments[source] for name, source in feeds.items()}, **settings)
            return step(*args, **kwargs)

        public.unchecked = step
        return public

    return attach


def _settings(check: Callable, step: Callable, require: Callable | None, options: dict) -> dict:
    """The options ``check`` gets from ``checked``, ``require`` among them when ``check`` takes it."""
    params = inspect.signature(check).parameters
    if "require" in params:
        return {**options, "require": require_tensor if require is None else require}
    if require is not None:
        raise TypeError(f"expected a check with a require parameter for {step.__qualname__}'s require=, "
                        f"got {check.__name__}{inspect.signature(check)}")
    return options


def _feeds(check: Callable, step: Callable, settings: dict) -> dict[str, str]:
    """{check's parameter: the step's parameter that feeds it}; every other parameter of the check is a setting."""
    params = inspect.signature(check).parameters
    names = list(inspect.signature(step).parameters)
    feeds = {name: name for name in params if name in names}
    first = next(iter(params), None)
    if names[:1] == ["self"] and first is not None and first not in feeds:  # a method: the check gets the instance
        feeds[first] = "self"
    named = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if named:  # a check of named values (**named) gets every argument
        feeds |= {name: name for name in names if name != "self"}
    unfed = [name for name, p in params.items() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
             and name not in feeds and name not in settings]
    twice = [name for name in settings if name in feeds or not (named or name in params)]
    if unfed or twice:
        raise TypeError(f"expected each parameter of {check.__name__} fed once, by a parameter of "
                        f"{step.__qualname__}{inspect.signature(step)} or by an option of checked, got "
                        + "; ".join([f"{unfed} fed by neither"] * bool(unfed)
                                    + [f"options {twice} that are a parameter of the step or none of the check"]
                                    * bool(twice)))
    return feeds


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


# --- one check per step: what each public function of the attention path validates --------------------------

def require_positive_ints(**named) -> None:
    """Each named value an int > 0 (the sizes of a module or a cache)."""
    for name, value in named.items():
        require_positive_int(name, value)


def require_feature_map(feature_map) -> None:
    """Raise TypeError unless ``feature_map`` can be called (a function of a tensor, as linear attention uses it)."""
    if not callable(feature_map):
        raise TypeError(f"expected feature_map to be a function of a tensor, got {type(feature_map).__name__}")


def check_softmax_args(x, dim=-1, temperature=1.0, require=require_tensor) -> None:
    """softmax's inputs: float x (``require=require_array``: an array), a dim of x, a temperature > 0."""
    require_float_tensor("x", x, 0, "", require=require)
    require_positive("temperature", temperature)
    check_dim("x", x, dim)


def check_entropy_args(weights, dim=-1) -> None:
    """attention_entropy's inputs: float weights (..., Lq, Lk) and a dim of them."""
    require_float_tensor("weights", weights, 0, "")
    check_dim("weights", weights, dim)


def check_scale_args(scores, d_k, require=require_tensor) -> None:
    """scale_scores' inputs: float scores (..., Lq, Lk) and a positive int Dk."""
    require_float_tensor("scores", scores, 0, "", require=require)
    require_positive_int("d_k", d_k)


def check_causal_mask_args(lq, lk=None, device=None, align="upper_left") -> None:
    """A causal mask's arguments: lengths Lq > 0 and Lk > 0 (None: Lq), an alignment, a device or None."""
    check_mask_shape_args(lq, lq if lk is None else lk, align)
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"expected device to be None, a str or a torch.device, got {type(device).__name__}")


def check_sliding_window_args(lq, lk, window, device=None) -> None:
    """A sliding-window mask's arguments: those of an end-aligned causal mask and a window > 0."""
    require_positive_int("window", window)
    check_causal_mask_args(lq, lk, device, "lower_right")


def check_padding_mask_args(lengths, length, convert) -> None:
    """A padding mask's arguments: L > 0 and B lengths in [0, L] that ``convert`` makes a 1-D integer array."""
    require_positive_int("L", length)
    try:
        lengths = convert(lengths)
    except (RuntimeError, TypeError, ValueError):
        raise lengths_type_error(type(lengths).__name__) from None
    check_lengths(lengths, length)


def check_apply_mask_args(scores, attn_mask=None, is_causal=False, require=require_tensor) -> None:
    """apply_mask's inputs: float scores (..., Lq, Lk) and a mask for them (or ``is_causal``), on their device."""
    require_float_tensor("scores", scores, 2, "(..., Lq, Lk)", require=require)
    device = scores.device if isinstance(scores, torch.Tensor) else None
    check_mask_args(attn_mask, is_causal, *scores.shape[-2:], (scores.shape[:-2],), device, require)


def check_merge_heads(x, require=require_tensor) -> None:
    """merge_heads' input: x (B, H, L, Dk)."""
    require("x", x)
    require_rank("x", x, 4, "(B, H, L, Dk)", max_rank=4)


def check_multihead_config(embed_dim, num_heads, kdim=None, vdim=None, num_kv_heads=None) -> None:
    """MultiHeadAttention's sizes: D divisible by H, H by Hkv; kdim and vdim None or positive."""
    require_positive_ints(embed_dim=embed_dim, num_heads=num_heads)
    if embed_dim % num_heads:
        raise ValueError(f"expected embed_dim divisible by num_heads, got embed_dim={embed_dim}, "
                         f"num_heads={num_heads}")
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    require_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"expected num_heads divisible by num_kv_heads, got num_heads={num_heads}, "
                         f"num_kv_heads={num_kv_heads}")
    require_positive_ints(**{name: width for name, width in (("kdim", kdim), ("vdim", vdim)) if width is not None})


def check_multihead_inputs(module, query, key, value, attn_mask, is_causal) -> None:
    """MultiHeadAttention.forward's inputs: query (B, Lq, D), key (B, Lk, kdim), value (B, Lk, vdim) like the
    module's weights, and a mask broadcastable to (B, H, Lq, Lk) or ``is_causal``."""
    widths = (("query", query, module.embed_dim), ("key", key, module.kdim), ("value", value, module.vdim))
    for name, t, width in widths:
        require_features(name, t, width, "the module's weights", module.out_proj.weight)
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ValueError(f"expected query (B, Lq, ...), key and value (B, Lk, ...) with matching B "
                         f"and Lk, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    batch = (query.shape[0], module.num_heads)  # the weights' leading dims (B, H)
    check_mask_args(attn_mask, is_causal, query.shape[1], key.shape[1], (batch,), query.device)


def check_flash_args(query, key, value, attn_mask=None, is_causal=False, scale=None, block_size=128) -> None:
    """flash_attention's inputs: scaled dot-product attention's, and a positive int ``block_size``."""
    check_attention_args(query, key, value, attn_mask, is_causal=is_causal, scale=scale)
    require_positive_int("block_size", block_size)


def check_lse_args(query, key, lse, attn_mask=None, is_causal=False, scale=None) -> None:
    """weights_from_lse's inputs: query (..., Lq, Dk), key (..., Lk, Dk), their mask and scale, lse (..., Lq)."""
    check_scores_args(query, key)
    batch = batch_shape(query.shape[:-2], key.shape[:-2])
    check_mask_args(attn_mask, is_causal, query.shape[-2], key.shape[-2], (batch,), query.device)
    require_positive("scale", scale, allow_none=True)
    require_float_tensor("lse", lse, 1, "(..., Lq)")
    if lse.shape[-1] != query.shape[-2] or lse.device != query.device:
        raise ValueError(f"expected lse of shape (..., Lq) with Lq={query.shape[-2]} on {query.device}, "
                         f"got {tuple(lse.shape)} on {lse.device}")


def check_linear_options(is_causal, eps, feature_map, lq: int, lk: int) -> None:
    """Linear attention's options: a callable feature map, a bool ``is_causal`` (then Lq == Lk), eps > 0."""
    require_feature_map(feature_map)
    require_bool("is_causal", is_causal)
    require_positive("eps", eps)
    if is_causal and lq != lk:
        raise ValueError(f"expected causal linear attention with Lq == Lk, got Lq={lq} and Lk={lk}")


def check_linear_attention_args(query, key, value, is_causal=False, feature_map=None, eps=1e-6) -> None:
    """Linear attention's inputs: those of attention without mask, and its options."""
    check_attention_args(query, key, value)
    check_linear_options(is_causal, eps, feature_map, query.shape[-2], key.shape[-2])


def check_linear_weights_args(query, key, is_causal=False, feature_map=None, eps=1e-6) -> None:
    """linear_attention_weights' inputs: query (..., Lq, Dk), key (..., Lk, Dk) and the options."""
    check_scores_args(query, key)
    check_linear_options(is_causal, eps, feature_map, query.shape[-2], key.shape[-2])


def check_weight_bound_args(key, feature_map=None) -> None:
    """max_weight_bound's inputs: float key (..., Lk, Dk) and a callable feature map."""
    require_float_tensor("key", key, 2, "(..., Lk, Dk)")
    require_feature_map(feature_map)


def check_new_positions(name: str, t, store, shape: tuple, layout: str) -> None:
    """A cache's new keys or values: a float tensor like ``store`` whose dims equal ``shape`` (None: any)."""
    require_float_tensor(name, t, len(shape), layout, max_rank=len(shape))
    require_like(name, t, "the cache", store)
    if any(n is not None and n != m for n, m in zip(shape, t.shape, strict=True)):
        wanted = ", ".join("Lnew" if n is None else str(n) for n in shape)
        raise ValueError(f"expected {name} of shape {layout} = ({wanted}) like the cache, got {tuple(t.shape)}")


def check_cache_append(cache, layer, key, value) -> None:
    """KVCache.append's inputs: a layer of the cache, key (B, Hkv, Lnew, Dk) and value (B, Hkv, Lnew, Dv) shaped
    like its storage, and room for them."""
    layers = len(cache.keys)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < layers:
        raise ValueError(f"expected layer in [0, {layers - 1}], got {layer!r}")
    for name, t, store in (("key", key, cache.keys[layer]), ("value", value, cache.values[layer])):
        b, h, _, d = store.shape
        check_new_positions(name, t, store, (b, h, None, d), "(B, Hkv, Lnew, D)")
    same_length(key, value, dim=2)
    end = cache.lengths[layer] + key.shape[2]
    if end > cache.max_length:
        raise ValueError(f"expected at most max_length={cache.max_length} positions in the cache, got "
                         f"{cache.lengths[layer]} stored + {key.shape[2]} new = {end}")


def check_paged_append(cache, key, value) -> None:
    """PagedKVCache.append's inputs: key (Hkv, Lnew, Dk) and value (Hkv, Lnew, Dv) shaped like the pool."""
    for name, t, store in (("key", key, cache.keys), ("value", value, cache.values)):
        check_new_positions(name, t, store, (store.shape[1], None, store.shape[3]), "(Hkv, Lnew, D)")
    same_length(key, value, dim=1)


def same_length(key, value, dim: int) -> None:
    """Raise ValueError unless key and value bring the same number of new positions (along ``dim``)."""
    if key.shape[dim] != value.shape[dim]:
        raise ValueError(f"expected key and value with the same number of new positions, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")


def check_cached_attention(cache, layer, query, key, value, window=None) -> None:
    """cached_attention's inputs: the cache's (``check_cache_append``), a query that can attend to its keys
    (..., Hq, Lnew, Dk) with Hq a multiple of Hkv, and a window that is None or > 0. Nothing is stored
    before all of them have passed."""
    check_cache_append(cache, layer, key, value)
    _check_query_for(query, cache.keys[layer], cache.values[layer])
    if window is not None:
        require_positive_int("window", window)


def check_kv_layout_args(layout, num_layers, num_heads, head_dim, num_kv_heads=None, latent_dim=None, rope_dim=None,
                         bytes_per_value=2, layouts=()) -> None:
    """kv_bytes_per_token's inputs: a layout of ``layouts``, positive sizes, and what the layout needs: Hkv
    dividing H for "gqa", the latent and rotary widths for "mla"."""
    if layout not in layouts:
        raise ValueError(f"expected layout in {layouts}, got {layout!r}")
    require_positive_ints(num_layers=num_layers, num_heads=num_heads, head_dim=head_dim,
                          bytes_per_value=bytes_per_value)
    if layout == "mla":
        require_positive_ints(latent_dim=latent_dim, rope_dim=rope_dim)
    if layout == "gqa":
        require_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(f"expected num_kv_heads dividing num_heads={num_heads}, got {num_kv_heads}")


def check_paged_attention(cache, seq, query, key, value) -> None:
    """paged_attention's inputs: the pool's (``check_paged_append``) and a query (Hq, Lnew, Dk) for its keys."""
    del seq  # any hashable id: a new one starts an empty sequence
    check_paged_append(cache, key, value)
    keys, values = (t[0] for t in (cache.keys, cache.values))  # (Hkv, block_size, D): one block, as a sequence's
    _check_query_for(query, keys, values)


def _check_query_for(query, keys, values) -> None:
    """A query (..., Hq, Lq, Dk) that attends to a cache's keys (..., Hkv, L, Dk) and values, Hq a multiple of Hkv."""
    require_tensor("query", query)
    gqa = query.ndim >= 3 and query.shape[-3] != keys.shape[-3]
    check_attention_args(query, keys, values, enable_gqa=gqa)
