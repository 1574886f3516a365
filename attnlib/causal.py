"""Causal attention for decoding: sliding windows, the KV cache, and what the cache costs in memory.

A decoder predicts token t+1 from tokens 0..t. When it generates, it adds one token at a time, and the
keys and values of the earlier tokens never change, so it keeps them in a **KV cache** and computes
only the new token's query, key and value at each step.

The new queries are the *last* ``Lq`` of ``Lk`` positions, so their masks are aligned at the end
(lower right): query i sits at position ``Lk - Lq + i``. ``causal_mask(Lq, Lk, align="lower_right")``
is that causal mask and ``sliding_window_mask`` the same with a window, optionally keeping the first
``sinks`` positions visible to every query (attention sinks, StreamingLLM: Xiao et al. 2024).

A server decodes many sequences at once. ``PagedKVCache`` stores them in fixed-size blocks from one
pool, each sequence with a table of its blocks (vLLM's PagedAttention, Kwon et al. 2023), and
``paged_attention`` decodes from it exactly as ``cached_attention`` does from the contiguous ``KVCache``.
``kv_bytes_per_token`` compares what multi-head, multi-query, grouped-query and latent attention store.
"""

from __future__ import annotations

import torch

from attnlib._checks import (
    checked,
    require_float_tensor,
    require_like,
    require_positive_int,
    require_positive_ints,
    require_tensor,
)
from attnlib.attention import check_attention_args, scaled_dot_product_attention
from attnlib.softmax import causal_mask, check_causal_mask_args


def check_sliding_window_args(lq, lk, window, device=None, sinks=0) -> None:
    """A sliding-window mask's arguments: those of an end-aligned causal mask, a window > 0 and sinks >= 0."""
    require_positive_int("window", window)
    require_sinks(sinks)
    check_causal_mask_args(lq, lk, device, "lower_right")


def require_sinks(sinks) -> None:
    """Raise TypeError/ValueError unless ``sinks`` (how many first positions stay visible) is an int >= 0."""
    if isinstance(sinks, bool) or not isinstance(sinks, int):
        raise TypeError(f"expected sinks to be an int >= 0, got {type(sinks).__name__}")
    if sinks < 0:
        raise ValueError(f"expected sinks to be an int >= 0, got {sinks}")


@checked(check_sliding_window_args)
def sliding_window_mask(lq: int, lk: int, window: int, device=None, *, sinks: int = 0) -> torch.Tensor:
    """Boolean (Lq, Lk) mask: query i, at position Lk - Lq + i, may attend key j iff 0 <= (Lk - Lq + i) - j < window,
    or j < sinks and j <= Lk - Lq + i (the first ``sinks`` positions stay visible: attention sinks).

    ``window=1`` is each position alone; ``window >= Lk`` is ``causal_mask(Lq, Lk, align="lower_right")``.
    """
    mask = causal_mask.unchecked(lq, lk, device=device, align="lower_right")  # (Lq, Lk)
    positions = torch.arange(lk - lq, lk, device=device)[:, None]  # (Lq, 1): where each query sits
    keys = torch.arange(lk, device=device)[None, :]  # (1, Lk)
    too_old = (keys <= positions - window) & (keys >= sinks)  # (Lq, Lk): left the window, and not a sink
    return mask & ~too_old


@checked(require_positive_ints)
def kv_cache_bytes(num_layers: int, num_kv_heads: int, head_dim: int, length: int,
                   batch_size: int = 1, bytes_per_value: int = 2) -> int:
    """Bytes of a KV cache: 2 (keys and values) x layers x KV heads x head width x positions x batch x bytes."""
    return 2 * num_layers * num_kv_heads * head_dim * length * batch_size * bytes_per_value


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


def same_length(key, value, dim: int) -> None:
    """Raise ValueError unless key and value bring the same number of new positions (along ``dim``)."""
    if key.shape[dim] != value.shape[dim]:
        raise ValueError(f"expected key and value with the same number of new positions, got "
                         f"{tuple(key.shape)} and {tuple(value.shape)}")


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
        require_positive_ints(num_layers=num_layers, batch_size=batch_size, num_kv_heads=num_kv_heads,
                              max_length=max_length, head_dim=head_dim, value_dim=value_dim)
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

    @checked(check_cache_append)
    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store key, value (B, Hkv, Lnew, Dk) after the past; return all keys, values (B, Hkv, L, Dk) so far."""
        start, end = self.lengths[layer], self.lengths[layer] + key.shape[2]
        self.keys[layer][:, :, start:end] = key
        self.values[layer][:, :, start:end] = value
        self.lengths[layer] = end
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


def check_cached_attention(cache, layer, query, key, value, window=None, sinks=0) -> None:
    """cached_attention's inputs: the cache's (``check_cache_append``), a query that can attend to its keys
    (..., Hq, Lnew, Dk) with Hq a multiple of Hkv, a window that is None or > 0, and sinks >= 0. Nothing is
    stored before all of them have passed."""
    check_cache_append(cache, layer, key, value)
    _check_query_for(query, cache.keys[layer], cache.values[layer])
    if window is not None:
        require_positive_int("window", window)
    require_sinks(sinks)


def _check_query_for(query, keys, values) -> None:
    """A query (..., Hq, Lq, Dk) that attends to a cache's keys (..., Hkv, L, Dk) and values, Hq a multiple of Hkv."""
    require_tensor("query", query)
    gqa = query.ndim >= 3 and query.shape[-3] != keys.shape[-3]
    check_attention_args(query, keys, values, enable_gqa=gqa)


@checked(check_cached_attention)
def cached_attention(cache: KVCache, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     *, window: int | None = None, sinks: int = 0,
                     need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention of the new positions over the cached past and themselves; returns (output, weights).

    query (B, Hq, Lnew, Dk), key and value (B, Hkv, Lnew, Dk): the new positions' projections. They are
    appended to ``cache`` at ``layer``; each new query then attends to every stored position up to its
    own (end-aligned causal mask), or only the last ``window`` of them and the first ``sinks`` (StreamingLLM's
    attention sinks; ignored without a window). Hq may be a multiple of Hkv (grouped-query attention).
    Output (B, Hq, Lnew, Dv); weights (B, Hq, Lnew, L) or None.
    """
    keys, values = KVCache.append.unchecked(cache, layer, key, value)  # (B, Hkv, L, Dk): the past and the new
    lq, lk = query.shape[-2], keys.shape[-2]
    if window is None:
        mask = causal_mask.unchecked(lq, lk, device=query.device, align="lower_right")
    else:
        mask = sliding_window_mask.unchecked(lq, lk, window, query.device, sinks=sinks)
    return scaled_dot_product_attention.unchecked(query, keys, values, attn_mask=mask, need_weights=need_weights,
                                                  enable_gqa=query.shape[-3] != keys.shape[-3])


# --- the KV cache per token, by attention variant ------------------------------------------------------------

KV_LAYOUTS = ("mha", "mqa", "gqa", "mla")


def _heads_for(layout: str, num_heads: int, num_kv_heads: int | None) -> int:
    """Key/value heads stored per layer: H for MHA, 1 for MQA, Hkv (dividing H) for GQA."""
    return {"mha": num_heads, "mqa": 1}.get(layout, num_kv_heads)


def check_kv_layout_args(layout, num_layers, num_heads, head_dim, num_kv_heads, latent_dim, rope_dim,
                         bytes_per_value) -> None:
    """kv_bytes_per_token's inputs: a layout of ``KV_LAYOUTS``, positive sizes, and what the layout needs: Hkv
    dividing H for "gqa", the latent and rotary widths for "mla"."""
    if layout not in KV_LAYOUTS:
        raise ValueError(f"expected layout in {KV_LAYOUTS}, got {layout!r}")
    require_positive_ints(num_layers=num_layers, num_heads=num_heads, head_dim=head_dim,
                          bytes_per_value=bytes_per_value)
    if layout == "mla":
        require_positive_ints(latent_dim=latent_dim, rope_dim=rope_dim)
    if layout == "gqa":
        require_positive_int("num_kv_heads", num_kv_heads)
        if num_heads % num_kv_heads:
            raise ValueError(f"expected num_kv_heads dividing num_heads={num_heads}, got {num_kv_heads}")


@checked(check_kv_layout_args)
def kv_bytes_per_token(layout: str, num_layers: int, num_heads: int, head_dim: int, num_kv_heads: int | None = None,
                       latent_dim: int | None = None, rope_dim: int | None = None, bytes_per_value: int = 2) -> int:
    """Bytes the KV cache grows by per token, over all layers, for one attention ``layout``.

    "mha": keys and values of all H heads, 2·H·Dk per layer; "mqa": one shared head, 2·Dk (Shazeer 2019);
    "gqa": ``num_kv_heads`` heads, 2·Hkv·Dk (Ainslie et al. 2023); "mla": DeepSeek-V2's multi-head latent
    attention caches one compressed vector of ``latent_dim`` plus a shared rotary key of ``rope_dim``.
    """
    if layout == "mla":
        return num_layers * (latent_dim + rope_dim) * bytes_per_value
    return kv_cache_bytes.unchecked(num_layers, _heads_for(layout, num_heads, num_kv_heads), head_dim, length=1,
                                    bytes_per_value=bytes_per_value)


# --- a paged KV cache (vLLM's PagedAttention) -----------------------------------------------------------------

def check_paged_append(cache, key, value) -> None:
    """PagedKVCache.append's inputs: key (Hkv, Lnew, Dk) and value (Hkv, Lnew, Dv) shaped like the pool."""
    for name, t, store in (("key", key, cache.keys), ("value", value, cache.values)):
        check_new_positions(name, t, store, (store.shape[1], None, store.shape[3]), "(Hkv, Lnew, D)")
    same_length(key, value, dim=1)


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
        require_positive_ints(num_blocks=num_blocks, block_size=block_size, num_kv_heads=num_kv_heads,
                              head_dim=head_dim, value_dim=value_dim)
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

    def _reserve(self, seq, end: int) -> list[int]:
        """The block table of ``seq``, grown from the free list to hold ``end`` positions."""
        table = self.block_tables.get(seq, [])
        needed = -(-end // self.block_size) - len(table)  # ⌈end / block_size⌉ blocks in all
        if needed > len(self.free_blocks):
            raise ValueError(f"expected at most {len(self.free_blocks)} free blocks to be needed, got {needed} "
                             f"for sequence {seq!r} at {end} positions")
        return table + [self.free_blocks.pop() for _ in range(needed)]

    @checked(check_paged_append)
    def append(self, seq, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store key (Hkv, Lnew, Dk), value (Hkv, Lnew, Dv) after ``seq``'s past; return all its keys, values so far.

        A new ``seq`` (any hashable id) starts empty. Returns (Hkv, L, Dk) and (Hkv, L, Dv), gathered in order.
        """
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


def check_paged_attention(cache, seq, query, key, value) -> None:
    """paged_attention's inputs: the pool's (``check_paged_append``) and a query (Hq, Lnew, Dk) for its keys."""
    del seq  # any hashable id: a new one starts an empty sequence
    check_paged_append(cache, key, value)
    keys, values = (t[0] for t in (cache.keys, cache.values))  # (Hkv, block_size, D): one block, as a sequence's
    _check_query_for(query, keys, values)


@checked(check_paged_attention)
def paged_attention(cache: PagedKVCache, seq, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    *, need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``cached_attention`` for one sequence of a ``PagedKVCache``; returns (output, weights).

    query (Hq, Lnew, Dk), key (Hkv, Lnew, Dk), value (Hkv, Lnew, Dv): the new positions of sequence ``seq``,
    appended to the cache; each new query attends to every stored position up to its own.
    Output (Hq, Lnew, Dv); weights (Hq, Lnew, L) or None.
    """
    keys, values = PagedKVCache.append.unchecked(cache, seq, key, value)  # (Hkv, L, Dk), (Hkv, L, Dv)
    mask = causal_mask.unchecked(query.shape[-2], keys.shape[-2], device=query.device, align="lower_right")
    return scaled_dot_product_attention.unchecked(query, keys, values, attn_mask=mask, need_weights=need_weights,
                                                  enable_gqa=query.shape[-3] != keys.shape[-3])
