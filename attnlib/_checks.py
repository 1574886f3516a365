"""What every step's contract shares: ``checked``, which attaches a contract to its step, and the helpers.

A public step's contract is written beside the step, in the step's module, right above it: a function named
``check_...`` (e.g. ``attnlib.softmax.check_softmax_args`` above ``softmax``) that validates the step's inputs.
This module keeps only what several contracts use: the checks of one input (``require_tensor``,
``require_rank``, ``require_positive_int``, ...), of masks and of batch dims, and ``checked``.

One message per error: every contract raises ``TypeError`` (wrong kind of object or dtype) or ``ValueError``
(wrong shape or value) with one message that names what was expected and what came, e.g. ``expected key of
shape (..., Lk, Dk) with Dk=8 to match query (2, 4, 8), got (2, 6, 5)``; the first mistake found is the one told.

Validate once: a public call enters validation exactly once. A step is written once, as the computation it is,
under ``@checked(its_contract)``; the public function validates its arguments with the contract and then runs
the step, and ``step.unchecked`` is the step alone, which attnlib code calls (with keyword arguments) on inputs
it has checked or made itself. Other public functions and methods call their contract at their top.
Every parameter of a contract is fed by the step's parameter of the same name or by an option of ``checked``:
one that neither feeds is refused when the step is defined. ``tests/lib/test_validate_once.py`` counts the
entries into validation.
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


def is_integer(x) -> bool:
    """True for integer tensors and arrays (bool is not an integer here)."""
    if isinstance(x, torch.Tensor):
        return not (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool)
    return np.issubdtype(x.dtype, np.integer)


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


def check_mask_args(attn_mask, is_causal, lq: int, lk: int, batch: tuple = (), device: torch.device | None = None,
                    require=require_tensor, like: str = "the query") -> tuple:
    """``is_causal`` a bool; ``attn_mask`` None or a bool/float mask broadcastable to (..., Lq, Lk), not both.

    The mask is a tensor on ``device``, the device of ``like`` (``require=require_array``: an array); its leading
    dims broadcast with those in ``batch``. Returns the leading dims that all of them broadcast to.
    """
    require_bool("is_causal", is_causal)
    if attn_mask is None:
        return batch_shape(*batch)
    require("attn_mask", attn_mask)
    check_mask(attn_mask, lq, lk)
    if device is not None and attn_mask.device != device:
        raise ValueError(f"expected attn_mask on {device} like {like}, got {attn_mask.device}")
    leading = batch_shape(*batch, attn_mask.shape[:-2])
    if is_causal:
        raise ValueError("expected either attn_mask or is_causal=True, got both")
    return leading


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


def require_positive_ints(**named) -> None:
    """Each named value an int > 0 (the sizes of a module or a cache)."""
    for name, value in named.items():
        require_positive_int(name, value)


