"""Softmax over the scores, with temperature, and the masks that hide keys from queries.

Masks follow ``torch.nn.functional.scaled_dot_product_attention``: a boolean mask is True where a
query may attend; a float mask is added to the scores (``-inf`` hides a key).
"""

from __future__ import annotations

import torch

from attnlib._checks import (
    check_dim,
    check_mask_args,
    checked,
    is_integer,
    require_float_tensor,
    require_positive,
    require_positive_int,
    require_tensor,
)


def check_softmax_args(x, dim=-1, temperature=1.0, require=require_tensor) -> None:
    """softmax's inputs: float x (``require=require_array``: an array), a dim of x, a temperature > 0."""
    require_float_tensor("x", x, 0, "", require=require)
    require_positive("temperature", temperature)
    check_dim("x", x, dim)


@checked(check_softmax_args)
def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """Numerically stable softmax of ``x / temperature`` along ``dim``; shape and dtype kept.

    Typically scores (..., Lq, Lk) -> weights (..., Lq, Lk). Subtracts each row's maximum before
    ``exp``. A row that is entirely ``-inf`` (every key masked) becomes all zeros instead of NaN.
    Half-precision inputs are computed in float32.
    """
    work = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    if temperature != 1.0:
        work = work / temperature
    row_max = work.amax(dim=dim, keepdim=True)
    if bool(torch.isfinite(row_max).all()):  # no fully masked row: torch.softmax does the same steps in one call
        return torch.softmax(work, dim=dim).to(x.dtype)
    return _explicit_softmax(work, dim, row_max).to(x.dtype)


def _explicit_softmax(work: torch.Tensor, dim: int, row_max: torch.Tensor) -> torch.Tensor:
    """The steps spelled out, (..., Lk) -> (..., Lk): subtract the row max, exp, divide by the sum.

    Used for rows that are entirely ``-inf``, which ``torch.softmax`` would turn into NaN.
    """
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    exps = torch.exp(work - row_max)
    total = exps.sum(dim=dim, keepdim=True)
    # A fully masked row sums to 0: divide by 1 instead so it stays all zeros.
    return exps / torch.where(total > 0, total, torch.ones_like(total))


def check_entropy_args(weights, dim=-1) -> None:
    """attention_entropy's inputs: float weights (..., Lq, Lk) and a dim of them."""
    require_float_tensor("weights", weights, 0, "")
    check_dim("weights", weights, dim)


@checked(check_entropy_args)
def attention_entropy(weights: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Shannon entropy in nats of each row of weights (..., Lq, Lk) -> (..., Lq): −Σ_j p_j log p_j.

    0 for a one-hot row (the softmax collapsed onto one key), log Lk for uniform weights; 0 · log 0 = 0.
    A fully masked (all-zero) row has entropy 0.
    """
    logs = torch.log(torch.where(weights > 0, weights, torch.ones_like(weights)))  # log 1 = 0 where p = 0
    return -(weights * logs).sum(dim=dim)


def check_causal_mask_args(lq, lk=None, device=None, align="upper_left") -> None:
    """A causal mask's arguments: lengths Lq > 0 and Lk > 0 (None: Lq), an alignment, a device or None."""
    check_mask_shape_args(lq, lq if lk is None else lk, align)
    if device is not None and not isinstance(device, (str, torch.device)):
        raise TypeError(f"expected device to be None, a str or a torch.device, got {type(device).__name__}")


def check_mask_shape_args(lq: int, lk: int, align: str) -> None:
    """The arguments of a causal mask: positive lengths Lq, Lk and an alignment."""
    require_positive_int("Lq", lq)
    require_positive_int("Lk", lk)
    if align not in ("upper_left", "lower_right"):
        raise ValueError(f"expected align 'upper_left' or 'lower_right', got {align!r}")


@checked(check_causal_mask_args)
def causal_mask(lq: int, lk: int | None = None, device=None, align: str = "upper_left") -> torch.Tensor:
    """Boolean (Lq, Lk) mask, True on and below the diagonal: query i may attend keys 0..i.

    ``align="upper_left"`` (default) is ``torch.nn.functional.scaled_dot_product_attention(is_causal=True)``.
    ``align="lower_right"`` puts query i at position Lk - Lq + i, the last Lq of Lk positions (as when
    decoding with a KV cache): it may attend keys 0..Lk - Lq + i. The two agree when Lq == Lk.
    """
    lk = lq if lk is None else lk
    offset = lk - lq if align == "lower_right" else 0
    return torch.ones(lq, lk, dtype=torch.bool, device=device).tril(diagonal=offset)


def check_padding_mask_args(lengths, length, convert) -> None:
    """A padding mask's arguments: L > 0 and B lengths in [0, L] that ``convert`` makes a 1-D integer array."""
    require_positive_int("L", length)
    try:
        lengths = convert(lengths)
    except (RuntimeError, TypeError, ValueError):
        raise lengths_type_error(type(lengths).__name__) from None
    check_lengths(lengths, length)


def check_lengths(lengths, length: int) -> None:
    """``lengths`` (B,) as a 1-D integer tensor or array of values in [0, L] (already converted)."""
    if lengths.ndim != 1 or not is_integer(lengths):
        raise lengths_type_error(f"shape {tuple(lengths.shape)} dtype {lengths.dtype}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > length):
        raise ValueError(f"expected every length in [0, {length}], got {lengths.tolist()}")


def lengths_type_error(got: str) -> TypeError:
    """The error for ``lengths`` that are not a 1-D sequence of ints; ``got`` says what came."""
    return TypeError(f"expected lengths as a 1-D sequence of ints (B,), got {got}")


@checked(check_padding_mask_args, convert=torch.as_tensor)
def padding_mask(lengths, length: int) -> torch.Tensor:
    """Boolean (B, 1, 1, L) mask, True for the first ``lengths[b]`` keys of sequence b.

    ``lengths`` is a sequence or 1-D integer tensor of B true lengths, each in [0, L].
    """
    lengths = torch.as_tensor(lengths)
    positions = torch.arange(length, device=lengths.device)
    return (positions[None, :] < lengths[:, None])[:, None, None, :]  # (B, 1, 1, L)


def check_apply_mask_args(scores, attn_mask=None, is_causal=False, require=require_tensor) -> None:
    """apply_mask's inputs: float scores (..., Lq, Lk) and a mask for them (or ``is_causal``), on their device."""
    require_float_tensor("scores", scores, 2, "(..., Lq, Lk)", require=require)
    device = scores.device if isinstance(scores, torch.Tensor) else None
    check_mask_args(attn_mask, is_causal, *scores.shape[-2:], (scores.shape[:-2],), device, require, like="the scores")


@checked(check_apply_mask_args)
def apply_mask(scores: torch.Tensor, attn_mask: torch.Tensor | None = None, *,
               is_causal: bool = False) -> torch.Tensor:
    """Scores (..., Lq, Lk) with a mask applied: ``-inf`` where a bool mask is False, float masks added.

    ``is_causal=True`` applies ``causal_mask(Lq, Lk)``; it cannot be combined with ``attn_mask``.
    """
    if is_causal:
        attn_mask = causal_mask.unchecked(*scores.shape[-2:], device=scores.device)
    if attn_mask is None:
        return scores
    if attn_mask.dtype == torch.bool:
        return scores.masked_fill(~attn_mask, float("-inf"))
    return scores + attn_mask.to(scores.dtype)
