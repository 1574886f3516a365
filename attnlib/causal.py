"""Causal attention for decoding: sliding windows, the KV cache, and what the cache costs in memory.

A decoder predicts token t+1 from tokens 0..t. When it generates, it adds one token at a time, and the
keys and values of the earlier tokens never change, so it keeps them in a **KV cache** and computes
only the new token's query, key and value at each step.

The new queries are the *last* ``Lq`` of ``Lk`` positions, so their masks are aligned at the end
(lower right): query i sits at position ``Lk - Lq + i``. ``causal_mask(Lq, Lk, align="lower_right")``
is that causal mask and ``sliding_window_mask`` the same with a window.

A server decodes many sequences at once. ``PagedKVCache`` stores them in fixed-size blocks from one
pool, each sequence with a table of its blocks (vLLM's PagedAttention, Kwon et al. 2023), and
``paged_attention`` decodes from it exactly as ``cached_attention`` does from the contiguous ``KVCache``.
``kv_bytes_per_token`` compares what multi-head, multi-query, grouped-query and latent attention store.
"""

from __future__ import annotations

import torch

from attnlib._checks import require_float, require_like, require_positive_int, require_rank, require_tensor
from attnlib.attention import scaled_dot_product_attention
from attnlib.softmax import causal_mask


def sliding_window_mask(lq: int, lk: int, window: int, device=None) -> torch.Tensor:
    """Boolean (Lq, Lk) mask: query i, at position Lk - Lq + i, may attend key j iff 0 <= (Lk - Lq + i) - j < window.

    ``window=1`` is each position alone; ``window >= Lk`` is ``causal_mask(Lq, Lk, align="lower_right")``.
    """
    require_positive_int("window", window)
    mask = causal_mask(lq, lk, device=device, align="lower_right")  # checks Lq, Lk and device
    positions = torch.arange(lk - lq, lk, device=device)[:, None]  # (Lq, 1): where each query sits
    too_old = torch.arange(lk, device=device)[None, :] <= positions - window  # (Lq, Lk)
    return mask & ~too_old


def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, length: int,
                   batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Bytes of a KV cache: 2 (keys and values) x layers x KV heads x head width x positions x batch x bytes."""
    for name, value in (("num_layers", num_layers), ("num_kv_heads", num_kv_heads), ("head_dim", head_dim),
                        ("length", length), ("batch_size", batch_size), ("bytes_per_value", bytes_per_value)):
        require_positive_int(name, value)
    return 2 * num_layers * num_kv_heads * head_dim * length * batch_size * bytes_per_value


class KVCache:
    """The keys and values of every layer for the positions seen so far, preallocated.

    Storage is allocated once, for ``max_length`` positions: keys (B, Hkv, max_length, Dk) and values
    (B, Hkv, max_length, Dv) per layer (``value_dim`` Dv defaults to ``head_dim`` Dk), so ``nbytes`` equals
    ``kv_cache_bytes(...)`` for max_length from the start and decoding never copies the past.
    ``append(layer, key, value)`` writes one or more new positions and returns every position stored
    so far, (B, Hkv, L, Dk) and (B, Hkv, L, Dv) views of the storage.
    """

    def __init__(self, num_layers: int, batch_size: int, num_kv_heads: int, max_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device=None, value_dim: int | None = None):
        value_dim = head_dim if value_dim is None else value_dim
        for name, value in (("num_layers", num_layers), ("batch_size", batch_size), ("num_kv_heads", num_kv_heads),
                            ("max_length", max_length), ("head_dim", head_dim), ("value_dim", value_dim)):
            require_positive_int(name, value)
        shape = (batch_size, num_kv_heads, max_length)  # (B, Hkv, max_length, ...)
        self.keys = [torch.zeros(*shape, head_dim, dtype=dtype, device=device) for _ in range(num_layers)]
        self.values = [torch.zeros(*shape, value_dim, dtype=dtype, device=device) for _ in range(num_layers)]
        self.lengths = [0] * num_layers  # positions stored, per layer
        self.max_length = max_length

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache's storage (all layers, keys and values)."""
        return sum(t.nbytes for t in self.keys + self.values)

    def __len__(self) -> int:
        """Positions stored in layer 0 (every layer has the same once a step has passed through all)."""
        return self.lengths[0]

    def _check(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> None:
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < len(self.keys):
            raise ValueError(f"expected layer in [0, {len(self.keys) - 1}], got {layer!r}")
        b, h, _, _ = self.keys[layer].shape
        for name, t, store in (("key", key, self.keys[layer]), ("value", value, self.values[layer])):
            require_tensor(name, t)
            require_float(name, t)
            require_rank(name, t, 4, "(B, Hkv, Lnew, D)", max_rank=4)
            require_like(name, t, "the cache", store)
            if t.shape[0] != b or t.shape[1] != h or t.shape[3] != store.shape[3]:
                raise ValueError(f"expected {name} of shape (B, Hkv, Lnew, D) = ({b}, {h}, Lnew, {store.shape[3]}) "
                                 f"like the cache, got {tuple(t.shape)}")
        if key.shape[2] != value.shape[2]:
            raise ValueError(f"expected key and value with the same number of new positions, got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")
        end = self.lengths[layer] + key.shape[2]
        if end > self.max_length:
            raise ValueError(f"expected at most max_length={self.max_length} positions in the cache, got "
                             f"{self.lengths[layer]} stored + {key.shape[2]} new = {end}")

    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store key, value (B, Hkv, Lnew, Dk) after the past; return all keys, values (B, Hkv, L, Dk) so far."""
        self._check(layer, key, value)
        start, end = self.lengths[layer], self.lengths[layer] + key.shape[2]
        self.keys[layer][:, :, start:end] = key
        self.values[layer][:, :, start:end] = value
        self.lengths[layer] = end
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


def cached_attention(cache: KVCache, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     *, window: int | None = None,
                     need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention of the new positions over the cached past and themselves; returns (output, weights).

    query (B, Hq, Lnew, Dk), key and value (B, Hkv, Lnew, Dk): the new positions' projections. They are
    appended to ``cache`` at ``layer``; each new query then attends to every stored position up to its
    own (end-aligned causal mask), or only the last ``window`` of them. Hq may be a multiple of Hkv
    (grouped-query attention). Output (B, Hq, Lnew, Dv); weights (B, Hq, Lnew, L) or None.
    """
    keys, values = cache.append(layer, key, value)  # (B, Hkv, L, Dk): the past and the new positions
    lq, lk = query.shape[-2], keys.shape[-2]
    if window is None:
        mask = causal_mask(lq, lk, device=query.device, align="lower_right")
    else:
        mask = sliding_window_mask(lq, lk, window, device=query.device)
    return scaled_dot_product_attention(query, keys, values, attn_mask=mask, need_weights=need_weights,
                                        enable_gqa=query.shape[-3] != keys.shape[-3])


# --- the KV cache per token, by attention variant ------------------------------------------------------------

KV_LAYOUTS = ("mha", "mqa", "gqa", "mla")


def _heads_for(layout: str, num_heads: int, num_kv_heads: int | None) -> int:
    """Key/value heads stored per layer: H for MHA, 1 for MQA, Hkv (dividing H) for GQA."""
    if layout == "mha":
        return num_heads
    if layout == "mqa":
        return 1
    require_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"expected num_kv_heads dividing num_heads={num_heads}, got {num_kv_heads}")
    return num_kv_heads


def kv_bytes_per_token(layout: str, num_layers: int, num_heads: int, head_dim: int, num_kv_heads: int | None = None,
                       latent_dim: int | None = None, rope_dim: int | None = None, bytes_per_value: int = 2) -> int:
    """Bytes the KV cache grows by per token, over all layers, for one attention ``layout``.

    "mha": keys and values of all H heads, 2·H·Dk per layer; "mqa": one shared head, 2·Dk (Shazeer 2019);
    "gqa": ``num_kv_heads`` heads, 2·Hkv·Dk (Ainslie et al. 2023); "mla": DeepSeek-V2's multi-head latent
    attention caches one compressed vector of ``latent_dim`` plus a shared rotary key of ``rope_dim``.
    """
    if layout not in KV_LAYOUTS:
        raise ValueError(f"expected layout in {KV_LAYOUTS}, got {layout!r}")
    for name, value in (("num_layers", num_layers), ("num_heads", num_heads), ("head_dim", head_dim),
                        ("bytes_per_value", bytes_per_value)):
        require_positive_int(name, value)
    if layout == "mla":
        require_positive_int("latent_dim", latent_dim)
        require_positive_int("rope_dim", rope_dim)
        return num_layers * (latent_dim + rope_dim) * bytes_per_value
    return kv_cache_bytes(num_layers, _heads_for(layout, num_heads, num_kv_heads), head_dim, 1,
                          bytes_per_value=bytes_per_value)


# --- a paged KV cache (vLLM's PagedAttention) -----------------------------------------------------------------

class PagedKVCache:
    """One layer's keys and values for many sequences, in fixed-size blocks from a shared pool.

    Storage: keys (num_blocks, Hkv, block_size, Dk), values (num_blocks, Hkv, block_size, Dv). Each
    sequence has a **block table**, the list of its blocks in order: position p lives in block
    ``table[p // block_size]`` at slot ``p % block_size`` (Kwon et al. 2023). Blocks come from a free
    list when a sequence needs one and go back when it is released, so no sequence reserves a
    maximum length up front: only its last block can have empty slots (``wasted_slots``).
    """

    def __init__(self, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device=None, value_dim: int | None = None):
        value_dim = head_dim if value_dim is None else value_dim
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size), ("num_kv_heads", num_kv_heads),
                            ("head_dim", head_dim), ("value_dim", value_dim)):
            require_positive_int(name, value)
        shape = (num_blocks, num_kv_heads, block_size)
        self.keys = torch.zeros(*shape, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros(*shape, value_dim, dtype=dtype, device=device)
        self.block_size = block_size
        self.free_blocks = list(range(num_blocks - 1, -1, -1))  # pop() hands out block 0 first
        self.block_tables: dict = {}  # sequence id -> its blocks, in order
        self.lengths: dict = {}  # sequence id -> positions stored

    @property
    def nbytes(self) -> int:
        """Bytes of the whole pool (keys and values), used or free."""
        return self.keys.nbytes + self.values.nbytes

    def wasted_slots(self) -> int:
        """Slots allocated to sequences but not yet filled: Σ_s (blocks_s · block_size − L_s)."""
        return sum(len(self.block_tables[s]) * self.block_size - n for s, n in self.lengths.items())

    def _check(self, key: torch.Tensor, value: torch.Tensor) -> None:
        _, h, _, _ = self.keys.shape
        for name, t, store in (("key", key, self.keys), ("value", value, self.values)):
            require_tensor(name, t)
            require_float(name, t)
            require_rank(name, t, 3, "(Hkv, Lnew, D)", max_rank=3)
            require_like(name, t, "the cache", store)
            if t.shape[0] != h or t.shape[2] != store.shape[3]:
                raise ValueError(f"expected {name} of shape (Hkv, Lnew, D) = ({h}, Lnew, {store.shape[3]}) "
                                 f"like the cache, got {tuple(t.shape)}")
        if key.shape[1] != value.shape[1]:
            raise ValueError(f"expected key and value with the same number of new positions, got "
                             f"{tuple(key.shape)} and {tuple(value.shape)}")

    def _reserve(self, seq, end: int) -> list[int]:
        """The block table of ``seq``, grown from the free list to hold ``end`` positions."""
        table = self.block_tables.get(seq, [])
        needed = -(-end // self.block_size) - len(table)  # ⌈end / block_size⌉ blocks in all
        if needed > len(self.free_blocks):
            raise ValueError(f"expected at most {len(self.free_blocks)} free blocks to be needed, got {needed} "
                             f"for sequence {seq!r} at {end} positions")
        return table + [self.free_blocks.pop() for _ in range(needed)]

    def append(self, seq, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store key (Hkv, Lnew, Dk), value (Hkv, Lnew, Dv) after ``seq``'s past; return all its keys, values so far.

        A new ``seq`` (any hashable id) starts empty. Returns (Hkv, L, Dk) and (Hkv, L, Dv), gathered in order.
        """
        self._check(key, value)
        start = self.lengths.get(seq, 0)
        end = start + key.shape[1]
        table = self.block_tables[seq] = self._reserve(seq, end)
        positions = torch.arange(start, end, device=self.keys.device)  # (Lnew,)
        blocks = torch.tensor(table, device=self.keys.device)[positions // self.block_size]  # (Lnew,)
        slots = positions % self.block_size  # (Lnew,)
        self.keys[blocks, :, slots] = key.transpose(0, 1)  # (Lnew, Hkv, Dk) into each position's slot
        self.values[blocks, :, slots] = value.transpose(0, 1)
        self.lengths[seq] = end
        return self.gather(seq)

    def gather(self, seq) -> tuple[torch.Tensor, torch.Tensor]:
        """``seq``'s keys (Hkv, L, Dk) and values (Hkv, L, Dv), copied out of its blocks in order."""
        if seq not in self.lengths:
            raise KeyError(f"expected a sequence stored in the cache {sorted(self.lengths, key=repr)}, got {seq!r}")
        index = torch.tensor(self.block_tables[seq], device=self.keys.device)
        length = self.lengths[seq]
        keys = self.keys[index].transpose(0, 1).flatten(1, 2)  # (n, Hkv, b, Dk) -> (Hkv, n·b, Dk)
        values = self.values[index].transpose(0, 1).flatten(1, 2)
        return keys[:, :length], values[:, :length]

    def release(self, seq) -> None:
        """Forget ``seq`` and return its blocks to the free list."""
        self.gather(seq)  # raises KeyError for an unknown sequence
        self.free_blocks.extend(reversed(self.block_tables.pop(seq)))
        del self.lengths[seq]


def paged_attention(cache: PagedKVCache, seq, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    *, need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``cached_attention`` for one sequence of a ``PagedKVCache``; returns (output, weights).

    query (Hq, Lnew, Dk), key (Hkv, Lnew, Dk), value (Hkv, Lnew, Dv): the new positions of sequence ``seq``,
    appended to the cache; each new query attends to every stored position up to its own.
    Output (Hq, Lnew, Dv); weights (Hq, Lnew, L) or None.
    """
    keys, values = cache.append(seq, key, value)  # (Hkv, L, Dk), (Hkv, L, Dv)
    mask = causal_mask(query.shape[-2], keys.shape[-2], device=query.device, align="lower_right")
    return scaled_dot_product_attention(query, keys, values, attn_mask=mask, need_weights=need_weights,
                                        enable_gqa=query.shape[-3] != keys.shape[-3])
