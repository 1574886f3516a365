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

import math

import torch

from attnlib._checks import check_flash_args, check_lse_args, checked, require_positive_ints

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


@checked(check_flash_args)
def flash_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: torch.Tensor | None = None, *, is_causal: bool = False, scale: float | None = None,
                    block_size: int = DEFAULT_BLOCK_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact ``softmax(Q Kᵀ · scale + mask) V`` tile by tile; returns ``(output (..., Lq, Dv), lse (..., Lq))``.

    query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv); ``attn_mask``, ``is_causal`` and ``scale``
    as in ``attnlib.scaled_dot_product_attention``. Tiles are ``block_size`` queries by ``block_size`` keys.
    ``lse`` is each query's log-sum-exp of its scaled, masked scores (``-inf`` for a fully masked
    query, whose output is zero). Output keeps the input dtype; half-precision inputs are computed
    in float32 and their ``lse`` is float32.
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


def _row_indices(rows, lq: int, device) -> torch.Tensor:
    """``rows`` (None = all, an int, a slice, a sequence or tensor of ints) as a 1-D index tensor."""
    everything = torch.arange(lq, device=device)
    if rows is None:
        return everything
    try:
        return everything[rows].reshape(-1)
    except IndexError:
        raise ValueError(f"expected rows to index queries 0..{lq - 1}, got {rows!r}") from None


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
