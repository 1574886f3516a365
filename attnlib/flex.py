"""FlexAttention: the book's attention variants as small functions that one fused kernel calls.

``torch.nn.attention.flex_attention`` computes ``softmax(score_mod(Q Kᵀ · scale)) V`` where a ``mask_mod``
allows the pair (He et al., PyTorch 2024). Both are plain Python functions of positions:

* ``mask_mod(b, h, q_idx, kv_idx) -> bool``: may query ``q_idx`` of sequence ``b``, head ``h``, see key ``kv_idx``?
* ``score_mod(score, b, h, q_idx, kv_idx) -> score``: the scaled score, changed (a bias, a cap).

Compiled (``torch.compile``, on a GPU), they are written into a FlashAttention-style Triton kernel, and
``create_block_mask`` evaluates the mask_mod once per tile to list the tiles it may skip: a ``BlockMask``, the
same FULL / MASKED / SKIPPED grid as ``attnlib.flash.tile_grid``. Eagerly (on a CPU) flex_attention builds the
full score matrix, and it has no backward pass there: right, not fast. This module writes the chapters' variants
in that form, each beside attnlib's own dense implementation it must equal:

============================  ==========================  =============================================
variant                       FlexAttention               attnlib's own
============================  ==========================  =============================================
causal                        ``causal``                  ``causal_mask`` (``is_causal=True``)
sliding window                ``sliding_window(w)``       ``attnlib.causal.sliding_window_mask``
padding                       ``padding(lengths)``        ``padding_mask``
documents packed in one row   ``document(ids)``           ``document_mask`` (below)
prefix-LM                     ``prefix_lm(lengths)``      ``prefix_lm_mask`` (below)
ALiBi                         ``alibi(slopes)``           ``attnlib.positions.alibi_bias`` (a float mask)
soft-capping                  ``softcap(cap)``            ``attnlib.scaling.softcap`` on the scores
============================  ==========================  =============================================

Shapes: query (B, H, Lq, D), key and value (B, H, Lk, D); a mask_mod's ``b, h, q_idx, kv_idx`` are 0-d int
tensors (flex_attention vmaps the function over all of them).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from attnlib.flash import FULL, MASKED, SKIPPED

# --- mask_mods: which (query, key) pairs may meet --------------------------------------------------------------


def causal(b, h, q_idx, kv_idx) -> torch.Tensor:
    """Query i sees the keys j <= i (top-left aligned, as ``is_causal=True``): a bool of the indices' shape (N,)."""
    return q_idx >= kv_idx


def sliding_window(window: int) -> Callable:
    """A mask_mod: query i sees the keys i - window < j <= i (``sliding_window_mask`` when Lq == Lk)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)
    return mask_mod


def padding(lengths: torch.Tensor) -> Callable:
    """A mask_mod: sequence b has ``lengths[b]`` real keys, the rest padding (lengths (B,) int)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx < lengths[b]
    return mask_mod


def document(ids: torch.Tensor) -> Callable:
    """A causal mask_mod for documents packed into one row: a query sees earlier keys of its own document.

    ``ids`` (B, L) int gives each position's document.
    """
    def mask_mod(b, h, q_idx, kv_idx):
        return (ids[b, q_idx] == ids[b, kv_idx]) & (q_idx >= kv_idx)
    return mask_mod


def prefix_lm(prefix_lengths: torch.Tensor) -> Callable:
    """A mask_mod: the first ``prefix_lengths[b]`` positions see each other both ways; the rest are causal (B,)."""
    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx < prefix_lengths[b]) | (q_idx >= kv_idx)
    return mask_mod


# --- score_mods: the score changed ----------------------------------------------------------------------------


def alibi(slopes: torch.Tensor) -> Callable:
    """A score_mod: ALiBi's bias -m_h · (i - j) for query i, key j, head h (slopes (H,))."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return score - slopes[h] * (q_idx - kv_idx)
    return score_mod


def softcap(cap: float) -> Callable:
    """A score_mod: the scaled score squashed to ``cap · tanh(score / cap)``, inside (-cap, cap)."""
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod


# --- attnlib's own dense masks for the two variants it has no other home for ----------------------------------


def document_mask(ids: torch.Tensor) -> torch.Tensor:
    """Boolean (B, 1, L, L) mask of packed documents: same document and causal; ids (B, L) int."""
    same = ids[:, :, None] == ids[:, None, :]  # (B, L, L)
    return (same & torch.ones_like(same[0]).tril())[:, None]


def prefix_lm_mask(prefix_lengths: torch.Tensor, length: int) -> torch.Tensor:
    """Boolean (B, 1, L, L) prefix-LM mask: keys in the prefix for every query, the rest causal (lengths (B,))."""
    keys = torch.arange(length, device=prefix_lengths.device)
    in_prefix = keys[None, None, :] < prefix_lengths[:, None, None]  # (B, 1, L)
    return (in_prefix | torch.ones(length, length, dtype=torch.bool, device=keys.device).tril())[:, None]


# --- running it ----------------------------------------------------------------------------------------------


def block_mask(mask_mod, batch: int | None, heads: int | None, lq: int, lk: int, device,
               block_size: int = 128) -> BlockMask:
    """``create_block_mask`` on ``device`` (its default is CUDA): which (block_size × block_size) tiles are needed.

    ``batch`` and ``heads`` None: the mask is the same for every sequence and head (B = H = 1 in the BlockMask).
    """
    return create_block_mask(mask_mod, batch, heads, lq, lk, device=device, BLOCK_SIZE=block_size)


def _listed(count: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Boolean (B, H, rows, cols): tile (i, j) is among the first ``count[..., i]`` of ``indices[..., i, :]``."""
    first = (torch.arange(indices.shape[-1], device=indices.device) < count[..., None]).long()  # (B, H, rows, cols)
    return torch.zeros_like(first).scatter_add(-1, indices.long(), first) > 0  # entries past count add 0


def tile_kinds(mask: BlockMask) -> torch.Tensor:
    """The BlockMask as attnlib.flash's tile grid (B, H, Lq blocks, Lk blocks): SKIPPED, MASKED or FULL."""
    masked = _listed(mask.kv_num_blocks, mask.kv_indices)  # tiles the kernel computes with the mask_mod applied
    full = (_listed(mask.full_kv_num_blocks, mask.full_kv_indices) if mask.full_kv_num_blocks is not None
            else torch.zeros_like(masked))  # tiles it computes without evaluating the mask_mod
    return torch.where(full, FULL, torch.where(masked, MASKED, SKIPPED)).cpu()


@functools.cache
def _compiled() -> Callable:
    return torch.compile(flex_attention)


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod=None,
              mask: BlockMask | None = None, scale: float | None = None) -> torch.Tensor:
    """``flex_attention`` (B, H, Lq, D) x (B, H, Lk, D) -> (B, H, Lq, Dv): compiled on CUDA, eager elsewhere.

    Eagerly it builds the full score matrix (and says so in a warning, silenced here): the CPU path of the book.
    """
    if query.device.type == "cuda":
        return _compiled()(query, key, value, score_mod=score_mod, block_mask=mask, scale=scale)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return flex_attention(query, key, value, score_mod=score_mod, block_mask=mask, scale=scale)
