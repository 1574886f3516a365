"""Memory-efficient exact attention: tile by tile with the online softmax (FlashAttention's algorithm).

``flash_attention`` computes ``softmax(Q Kᵀ · scale + mask) V`` one (query block, key block) tile at a
time. Each query row keeps a running maximum ``m``, a running sum ``l`` of ``exp(score - m)`` and a
running weighted sum of values; a new tile rescales them by ``exp(m_old - m_new)`` (Milakov &
Gimelshein 2018; Rabe & Staats 2021; Dao et al. 2022). The (Lq, Lk) matrix of scores never exists:
at most one (..., block, block) tile of it does. Besides the output it returns each query's
log-sum-exp ``lse = log Σ_j exp(s_j)``, from which ``weights_from_lse`` recomputes any row of weights
exactly (``exp(s_j - lse)``), e.g. to draw it.

This is pure torch and runs on the device of its inputs; it is written to be read, not to be fast.
It is not a fused GPU kernel (no Triton or CUDA code): the tiles are ordinary torch operations.
"""

from __future__ import annotations

import importlib.util
import math

import torch

from attnlib._checks import (
    batch_shape,
    check_mask_args,
    checked,
    require_float_tensor,
    require_positive,
    require_positive_int,
    require_positive_ints,
)
from attnlib.attention import check_attention_args
from attnlib.scores import check_scores_args

DEFAULT_BLOCK_SIZE = 128
SKIPPED, MASKED, FULL = 0, 1, 2  # what happens to a tile: skipped, computed with its mask, computed whole
_HALF = (torch.float16, torch.bfloat16)
#: The online softmax's running state: row maximum (..., rows), row sum (..., rows), weighted values (..., rows, Dv).
State = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _bounds(length: int, block_size: int) -> list[tuple[int, int]]:
    """The [start, stop) ranges of the blocks that cover ``range(length)``; the last may be shorter."""
    return [(start, min(start + block_size, length)) for start in range(0, length, block_size)]


def tile_kind(q0: int, q1: int, k0: int, k1: int, is_causal: bool) -> int:
    """SKIPPED, MASKED or FULL for the tile of queries [q0, q1) and keys [k0, k1).

    Causal (top-left aligned): query i sees keys 0..i, so a tile whose first key comes after its last
    query is skipped, and a tile whose last key is at or before its first query needs no mask.
    """
    if not is_causal or k1 - 1 <= q0:
        return FULL
    if k0 > q1 - 1:
        return SKIPPED
    return MASKED


def tile_grid(lq: int, lk: int, block_size: int = DEFAULT_BLOCK_SIZE, is_causal: bool = False) -> torch.Tensor:
    """Integer grid (⌈Lq/block⌉, ⌈Lk/block⌉) of ``tile_kind`` values: which tiles flash_attention computes."""
    require_positive_ints(Lq=lq, Lk=lk, block_size=block_size)
    kinds = [[tile_kind(q0, q1, k0, k1, is_causal) for k0, k1 in _bounds(lk, block_size)]
             for q0, q1 in _bounds(lq, block_size)]
    return torch.tensor(kinds, dtype=torch.int64)


def initial_state(batch: tuple, rows: int, dv: int, like: torch.Tensor) -> State:
    """The online softmax before any key: max ``-inf`` (..., rows), sum 0 (..., rows), values 0 (..., rows, Dv)."""
    row_max = torch.full((*batch, rows), float("-inf"), dtype=like.dtype, device=like.device)
    row_sum = torch.zeros((*batch, rows), dtype=like.dtype, device=like.device)
    acc = torch.zeros((*batch, rows, dv), dtype=like.dtype, device=like.device)
    return row_max, row_sum, acc


def tile_step(state: State, scores: torch.Tensor, value_tile: torch.Tensor) -> State:
    """Fold one tile of scores (..., Bq, Bk) and its values (..., Bk, Dv) into the running state.

    ``state`` is ``(row_max (..., Bq), row_sum (..., Bq), acc (..., Bq, Dv))``; returns the new state.
    """
    row_max, row_sum, acc = state
    new_max = torch.maximum(row_max, scores.amax(dim=-1))  # (..., Bq)
    # A row with every key so far masked has max -inf: subtract 0 instead, so exp(-inf) = 0, not NaN.
    safe_max = torch.where(torch.isfinite(new_max), new_max, torch.zeros_like(new_max))
    correction = torch.exp(row_max - safe_max)  # rescales sums taken under the old maximum
    probs = torch.exp(scores - safe_max[..., None])  # (..., Bq, Bk)
    row_sum = row_sum * correction + probs.sum(dim=-1)
    acc = acc * correction[..., None] + probs @ value_tile  # (..., Bq, Bk) @ (..., Bk, Dv) -> (..., Bq, Dv)
    return new_max, row_sum, acc


def finish(state: State) -> tuple[torch.Tensor, torch.Tensor]:
    """Output (..., Bq, Dv) = acc / sum and log-sum-exp (..., Bq) = max + log(sum); zero / -inf for masked rows."""
    row_max, row_sum, acc = state
    seen = row_sum > 0
    output = acc / torch.where(seen, row_sum, torch.ones_like(row_sum))[..., None]
    lse = torch.where(seen, row_max + torch.log(row_sum), torch.full_like(row_sum, float("-inf")))
    return output, lse


def _expand_mask(attn_mask, lq: int, lk: int):
    """A view of the mask broadcast to (..., Lq, Lk), so tiles can be sliced out of it (no copy)."""
    if attn_mask is None:
        return None
    mask = attn_mask.reshape((1,) * max(0, 2 - attn_mask.ndim) + tuple(attn_mask.shape))
    return mask.expand(*mask.shape[:-2], lq, lk)


def _apply_masks(scores, rows: torch.Tensor, cols: torch.Tensor, mask_rows, causal: bool):
    """Mask scores (..., R, C) of the query positions ``rows`` (R,) against the key positions ``cols`` (C,).

    ``causal`` hides keys after each query; ``mask_rows`` (..., R, C) is the user mask's matching part.
    """
    if causal:
        scores = scores.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
    if mask_rows is None:
        return scores
    if mask_rows.dtype == torch.bool:
        return torch.where(mask_rows, scores, float("-inf"))  # (..., R, C): batch dims from either side
    return scores + mask_rows.to(scores.dtype)


def _mask_tile(scores, mask, q0: int, q1: int, k0: int, k1: int, kind: int):
    """Apply the causal or user mask to the tile of scores (..., Bq, Bk) of queries [q0, q1), keys [k0, k1)."""
    if kind != MASKED and mask is None:  # a tile wholly below the causal diagonal, no user mask
        return scores
    rows = torch.arange(q0, q1, device=scores.device)
    cols = torch.arange(k0, k1, device=scores.device)
    tile = None if mask is None else mask[..., q0:q1, k0:k1]
    return _apply_masks(scores, rows, cols, tile, causal=kind == MASKED)  # MASKED: crosses the diagonal


def _query_block(q_blk, key, value, mask, q0: int, q1: int, is_causal: bool, block_size: int, batch: tuple):
    """Attention for the queries [q0, q1): loop over key tiles, folding each into the online softmax."""
    state = initial_state(batch, q1 - q0, value.shape[-1], q_blk)
    for k0, k1 in _bounds(key.shape[-2], block_size):
        kind = tile_kind(q0, q1, k0, k1, is_causal)
        if kind == SKIPPED:
            continue
        scores = q_blk @ key[..., k0:k1, :].transpose(-2, -1)  # (..., Bq, Dk) @ (..., Dk, Bk) -> (..., Bq, Bk)
        scores = _mask_tile(scores, mask, q0, q1, k0, k1, kind)
        state = tile_step(state, scores, value[..., k0:k1, :])
    return finish(state)


def tiled_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None = None,
                  is_causal: bool = False, scale: float | None = None,
                  block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward pass, query block by query block: ``(output (..., Lq, Dv), lse (..., Lq))``.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv) and the options as in ``flash_attention``
    (which checks them); the leading dims broadcast.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    dtype = query.dtype
    work = torch.float32 if dtype in _HALF else dtype
    query, key, value = query.to(work) * scale, key.to(work), value.to(work)
    lq, lk = query.shape[-2], key.shape[-2]
    mask = _expand_mask(attn_mask, lq, lk)
    masks = () if mask is None else (mask.shape[:-2],)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2], *masks)
    output = query.new_empty((*batch, lq, value.shape[-1]))
    lse = query.new_empty((*batch, lq))
    for q0, q1 in _bounds(lq, block_size):
        output[..., q0:q1, :], lse[..., q0:q1] = _query_block(
            query[..., q0:q1, :], key, value, mask, q0, q1, is_causal, block_size, batch)
    return output.to(dtype), lse


def tile_grads(probs: torch.Tensor, delta: torch.Tensor, q_blk: torch.Tensor, k_blk: torch.Tensor,
               v_blk: torch.Tensor, do_blk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tile's share of the gradients: ``(dQ (..., Bq, Dk), dK (..., Bk, Dk), dV (..., Bk, Dv))``.

    ``probs`` (..., Bq, Bk) are the tile's weights P = exp(S - lse), ``delta`` (..., Bq) is rowsum(dO ∘ O);
    q_blk (..., Bq, Dk) is the scaled query, k_blk (..., Bk, Dk), v_blk (..., Bk, Dv), do_blk (..., Bq, Dv).
    The dQ returned is with respect to the scaled query (multiply by ``scale``).
    """
    dv = probs.transpose(-2, -1) @ do_blk  # dV = Pᵀ dO: (..., Bk, Bq) @ (..., Bq, Dv) -> (..., Bk, Dv)
    dp = do_blk @ v_blk.transpose(-2, -1)  # dP = dO Vᵀ: (..., Bq, Dv) @ (..., Dv, Bk) -> (..., Bq, Bk)
    ds = probs * (dp - delta[..., None])  # dS = P ∘ (dP − rowsum(dO ∘ O)), the softmax's backward
    return ds @ k_blk, ds.transpose(-2, -1) @ q_blk, dv  # dQ = dS K, dK = dSᵀ Q


def key_block_grads(saved: tuple, grads: tuple, k0: int, k1: int, is_causal: bool, block_size: int) -> None:
    """Add the gradients of the keys [k0, k1) to dK, dV and of every query that sees them to dQ (in place).

    ``saved`` = (query (..., Lq, Dk) scaled, key (..., Lk, Dk), value (..., Lk, Dv), dO (..., Lq, Dv),
    lse (..., Lq), delta (..., Lq), mask (..., Lq, Lk) or None); ``grads`` = (dQ, dK, dV) of their shapes.
    """
    query, key, value, grad_out, lse, delta, mask = saved
    dq, dk, dv = grads
    k_blk, v_blk = key[..., k0:k1, :], value[..., k0:k1, :]
    for q0, q1 in _bounds(query.shape[-2], block_size):
        kind = tile_kind(q0, q1, k0, k1, is_causal)
        if kind == SKIPPED:
            continue
        scores = query[..., q0:q1, :] @ k_blk.transpose(-2, -1)  # (..., Bq, Dk) @ (..., Dk, Bk) -> (..., Bq, Bk)
        scores = _mask_tile(scores, mask, q0, q1, k0, k1, kind)
        probs = torch.exp(scores - lse[..., q0:q1, None])  # the forward's weights, recomputed from one number a row
        tile = tile_grads(probs, delta[..., q0:q1], query[..., q0:q1, :], k_blk, v_blk, grad_out[..., q0:q1, :])
        dq[..., q0:q1, :] += tile[0]
        dk[..., k0:k1, :] += tile[1]
        dv[..., k0:k1, :] += tile[2]


def tiled_backward(grad_out: torch.Tensor, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                   output: torch.Tensor, lse: torch.Tensor, grad_lse: torch.Tensor | None = None,
                   attn_mask: torch.Tensor | None = None, is_causal: bool = False, scale: float | None = None,
                   block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward pass, key block by key block: ``(dQ (..., Lq, Dk), dK (..., Lk, Dk), dV (..., Lk, Dv))``.

    grad_out (..., Lq, Dv) is dL/d(output); query, key, value, output (..., Lq, Dv) and lse (..., Lq) are
    what the forward saved; ``grad_lse`` (..., Lq) is dL/d(lse) or None. The gradients have the broadcast
    leading dims of the forward and its working dtype (float32 for half inputs). No (Lq, Lk) matrix is made:
    each tile's weights are recomputed as exp(S - lse).
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    work = torch.float32 if query.dtype in _HALF else query.dtype
    query, key, value = query.to(work) * scale, key.to(work), value.to(work)
    grad_out = grad_out.to(work)
    delta = (grad_out * output.to(work)).sum(dim=-1)  # (..., Lq): rowsum(dO ∘ O) = Σ_j P_ij dP_ij
    if grad_lse is not None:
        delta = delta - grad_lse.to(work)  # ∂lse/∂s_ij = P_ij: lse's own gradient joins dS through delta
    lse = lse.to(work)
    lse = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))  # a fully masked row: exp(-inf - 0) = 0
    lq, lk = query.shape[-2], key.shape[-2]
    mask = _expand_mask(attn_mask, lq, lk)
    batch = delta.shape[:-1]
    grads = (query.new_zeros((*batch, lq, query.shape[-1])), query.new_zeros((*batch, lk, key.shape[-1])),
             query.new_zeros((*batch, lk, value.shape[-1])))
    saved = (query, key, value, grad_out, lse, delta, mask)
    for k0, k1 in _bounds(lk, block_size):  # FlashAttention-2's order: one key block (a GPU program) at a time
        key_block_grads(saved, grads, k0, k1, is_causal, block_size)
    return grads[0] * scale, grads[1], grads[2]  # dQ: the scores were taken with the scaled query


def _grouped(query, key, value, attn_mask):
    """Views for grouped-query attention: query (..., Hkv, G, Lq, Dk), key and value (..., Hkv, 1, Lk, D).

    Returns (query, key, value, mask, G); G = 1 and the inputs unchanged when no grouping is needed
    (key and value have the query's heads, one head, or no head dim).
    """
    if min(query.ndim, key.ndim) < 3 or key.shape[-3] in (1, query.shape[-3]):
        return query, key, value, attn_mask, 1
    hkv = key.shape[-3]
    groups = query.shape[-3] // hkv
    query = query.unflatten(-3, (hkv, groups))
    key, value = key.unsqueeze(-3), value.unsqueeze(-3)
    if attn_mask is not None:
        mask = attn_mask.reshape((1,) * max(0, 3 - attn_mask.ndim) + tuple(attn_mask.shape))
        attn_mask = mask.unsqueeze(-3) if mask.shape[-3] == 1 else mask.unflatten(-3, (hkv, groups))
    return query, key, value, attn_mask, groups


class FlashAttention(torch.autograd.Function):
    """Tiled attention as an autograd Function: ``FlashAttention.apply(query, key, value, is_causal)``.

    query (..., Hq, Lq, Dk), key (..., Hkv, Lk, Dk), value (..., Hkv, Lk, Dv) -> ``(output (..., Lq, Dv),
    lse (..., Lq))``; optional further arguments ``scale``, ``attn_mask`` (no gradient) and ``block_size``.
    Leading dims broadcast; key and value may have fewer heads than the query, a divisor of Hq (grouped-query
    attention, each key/value head serving Hq/Hkv query heads). The forward saves only the inputs, the output
    and the log-sum-exp; the backward recomputes each tile's weights from it. Both outputs are differentiable.
    No input checks: ``flash_attention`` is the checked entry.
    """

    @staticmethod
    def forward(ctx, query, key, value, is_causal=False, scale=None, attn_mask=None,
                block_size=DEFAULT_BLOCK_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
        """(output (..., Lq, Dv), lse (..., Lq)) tile by tile (``tiled_forward``); saves q, k, v, output, lse."""
        q, k, v, mask, groups = _grouped(query, key, value, attn_mask)
        output, lse = tiled_forward(q, k, v, mask, is_causal, scale, block_size)
        if groups > 1:
            output, lse = output.flatten(-4, -3), lse.flatten(-3, -2)  # (..., Hkv, G, ...) -> (..., Hq, ...)
        ctx.save_for_backward(query, key, value, output, lse, attn_mask)
        ctx.options = (is_causal, scale, block_size)
        ctx.set_materialize_grads(False)
        return output, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse) -> tuple:
        """``tiled_backward`` on the same views, each gradient summed back to its input's shape and dtype."""
        query, key, value, output, lse, attn_mask = ctx.saved_tensors
        if grad_out is None:
            grad_out = torch.zeros_like(output)
        q, k, v, mask, groups = _grouped(query, key, value, attn_mask)
        if groups > 1:
            grad_out, output = (t.unflatten(-3, q.shape[-4:-2]) for t in (grad_out, output))
            lse = lse.unflatten(-2, q.shape[-4:-2])
            grad_lse = None if grad_lse is None else grad_lse.unflatten(-2, q.shape[-4:-2])
        dq, dk, dv = tiled_backward(grad_out, q, k, v, output, lse, grad_lse, mask, *ctx.options)
        grads = [g.sum_to_size(t.shape).reshape(x.shape).to(x.dtype)
                 for g, t, x in ((dq, q, query), (dk, k, key), (dv, v, value))]
        return (*grads, None, None, None, None)


def check_flash_args(query, key, value, attn_mask=None, is_causal=False, scale=None, block_size=128,
                     enable_gqa=False) -> None:
    """flash_attention's inputs: scaled dot-product attention's, and a positive int ``block_size``."""
    check_attention_args(query, key, value, attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    require_positive_int("block_size", block_size)


@checked(check_flash_args)
def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: torch.Tensor | None = None, *, is_causal: bool = False, scale: float | None = None,
                    block_size: int = DEFAULT_BLOCK_SIZE,
                    enable_gqa: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact ``softmax(Q Kᵀ · scale + mask) V`` tile by tile; returns ``(output (..., Lq, Dv), lse (..., Lq))``.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv); ``attn_mask``, ``is_causal``, ``scale`` and
    ``enable_gqa`` as in ``attnlib.scaled_dot_product_attention``. Tiles are ``block_size`` queries by
    ``block_size`` keys.
    ``lse`` is each query's log-sum-exp of its scaled, masked scores (``-inf`` for a fully masked
    query, whose output is zero). Output keeps the input dtype; half-precision inputs are computed
    in float32 and their ``lse`` is float32. Differentiable (``FlashAttention``): the backward pass is
    tiled too. On CUDA with Triton installed and no ``attn_mask``, the fused kernel of
    ``attnlib.flash_triton`` computes it (with its own tile sizes; ``block_size`` is then unused).
    """
    if attn_mask is None and _fused_kernel_takes(query, key, value):
        from attnlib import flash_triton  # noqa: PLC0415 - Triton is optional and slow to import

        return flash_triton.FlashAttention.apply(query, key, value, is_causal, scale)
    return FlashAttention.apply(query, key, value, is_causal, scale, attn_mask, block_size)


def _fused_kernel_takes(query, key, value) -> bool:
    """Whether the inputs go to the Triton kernel: 16- or 32-bit CUDA tensors with the same leading dims but for
    fewer key/value heads (dim -3) dividing the query's, and Triton installed."""
    if query.device.type != "cuda" or query.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return False
    if not query.ndim == key.ndim == value.ndim or query.shape[:-3] != key.shape[:-3]:
        return False
    if key.shape[:-1] != value.shape[:-1]:
        return False
    if query.ndim >= 3 and query.shape[-3] % key.shape[-3]:
        return False
    return importlib.util.find_spec("triton") is not None


def _row_indices(rows, lq: int, device) -> torch.Tensor:
    """``rows`` (None = all, an int, a slice, a sequence or tensor of ints) as a 1-D index tensor."""
    everything = torch.arange(lq, device=device)
    if rows is None:
        return everything
    try:
        return everything[rows].reshape(-1)
    except IndexError:
        raise ValueError(f"expected rows to index queries 0..{lq - 1}, got {rows!r}") from None


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


@checked(check_lse_args)
def weights_from_lse(query: torch.Tensor, key: torch.Tensor, lse: torch.Tensor,
                     attn_mask: torch.Tensor | None = None, *, rows=None, is_causal: bool = False,
                     scale: float | None = None) -> torch.Tensor:
    """Attention weights (..., R, Lk) of the chosen query ``rows``, recomputed as ``exp(s - lse)``.

    query (..., Lq, Dk), key (..., Lk, Dk), lse (..., Lq) from ``flash_attention`` with the same
    mask, ``is_causal`` and ``scale``. ``rows``: None (all Lq), an int, a slice or a list of ints.
    Costs O(R·Lk) memory: draw a few rows of a long sequence without its (Lq, Lk) matrix.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    idx = _row_indices(rows, query.shape[-2], query.device)  # (R,)
    work = torch.float32 if query.dtype in _HALF else query.dtype
    picked = query.to(work).index_select(-2, idx) * scale  # (..., R, Dk)
    scores = picked @ key.to(work).transpose(-2, -1)  # (..., R, Dk) @ (..., Dk, Lk) -> (..., R, Lk)
    mask = _expand_mask(attn_mask, query.shape[-2], key.shape[-2])
    mask_rows = None if mask is None else mask.index_select(-2, idx)  # (..., R, Lk)
    scores = _apply_masks(scores, idx, torch.arange(key.shape[-2], device=key.device), mask_rows, is_causal)
    lse_rows = lse.to(work).index_select(-1, idx)[..., None]  # (..., R, 1)
    weights = torch.exp(scores - torch.where(torch.isfinite(lse_rows), lse_rows, torch.zeros_like(lse_rows)))
    return torch.where(torch.isfinite(lse_rows), weights, torch.zeros_like(weights)).to(query.dtype)
