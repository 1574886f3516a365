"""Causal attention for decoding: sliding windows, the KV cache, and what the cache costs in memory.

A decoder predicts token t+1 from tokens 0..t. When it generates, it adds one token at a time, and the
keys and values of the earlier tokens never change, so it keeps them in a **KV cache** and computes
only the new token's query, key and value at each step.

The new queries are the *last* ``Lq`` of ``Lk`` positions, so their masks are aligned at the end
(lower right): query i sits at position ``Lk - Lq + i``. ``causal_mask(Lq, Lk, align="lower_right")``
is that causal mask and ``sliding_window_mask`` the same with a window.
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

    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor):
        """Store key, value (B, Hkv, Lnew, Dk) after the past; return all keys, values (B, Hkv, L, Dk) so far."""
        self._check(layer, key, value)
        start, end = self.lengths[layer], self.lengths[layer] + key.shape[2]
        self.keys[layer][:, :, start:end] = key
        self.values[layer][:, :, start:end] = value
        self.lengths[layer] = end
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]


def cached_attention(cache: KVCache, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     window: int | None = None, need_weights: bool = False):
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
