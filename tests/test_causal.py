"""attnlib.causal and the end-aligned causal mask: sliding windows, the KV cache, its size, cached decoding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import randn
from torch.nn.attention.bias import causal_lower_right

from attnlib import causal_mask, scaled_dot_product_attention
from attnlib.causal import KVCache, cached_attention, kv_cache_bytes, sliding_window_mask

# decoding one position at a time must equal full causal attention within these
DECODE_TOL = {torch.float64: 1e-6, torch.float32: 1e-5}


# --- masks -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lq, lk", [(1, 9), (3, 7), (5, 5), (4, 12)])
def test_lower_right_causal_mask_equals_torch_causal_lower_right(lq, lk):
    query, key, value = randn(2, 3, lq, 4, seed=1), randn(2, 3, lk, 4, seed=2), randn(2, 3, lk, 5, seed=3)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=causal_lower_right(lq, lk))
    mask = causal_mask(lq, lk, align="lower_right")
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        torch.testing.assert_close(out, expected, atol=1e-12, rtol=1e-10)


def test_causal_mask_default_stays_upper_left_and_both_agree_when_square():
    assert torch.equal(causal_mask(3, 5), torch.ones(3, 5, dtype=torch.bool).tril())
    assert torch.equal(causal_mask(3, 5, align="upper_left"), causal_mask(3, 5))
    assert torch.equal(causal_mask(6, align="lower_right"), causal_mask(6))
    # one new query at the end of 5 positions sees all of them (upper-left would let it see only key 0)
    assert causal_mask(1, 5, align="lower_right").all() and causal_mask(1, 5).sum() == 1
    with pytest.raises(ValueError, match="align 'upper_left' or 'lower_right'"):
        causal_mask(3, 5, align="bottom")


@pytest.mark.parametrize("lq, lk, window", [(6, 6, 1), (6, 6, 3), (2, 9, 4), (4, 7, 100), (1, 1, 1)])
def test_sliding_window_mask_follows_its_definition(lq, lk, window):
    mask = sliding_window_mask(lq, lk, window)
    assert mask.shape == (lq, lk) and mask.dtype == torch.bool
    for i in range(lq):
        for j in range(lk):
            distance = (lk - lq + i) - j
            assert bool(mask[i, j]) == (0 <= distance < window), (i, j)


def test_wide_window_is_the_end_aligned_causal_mask_and_rows_keep_window_keys():
    assert torch.equal(sliding_window_mask(5, 9, 9), causal_mask(5, 9, align="lower_right"))
    assert sliding_window_mask(10, 10, 4).sum(dim=-1).tolist() == [1, 2, 3] + [4] * 7


@pytest.mark.parametrize("window, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_window_is_a_clear_error(window, error):
    with pytest.raises(error, match="window"):
        sliding_window_mask(4, 4, window)


# --- the KV cache: decoding one position at a time equals full causal attention -------------------------

def _decode(query, key, value, chunks, window=None, dtype=torch.float64):
    """Feed query/key/value (B, H, L, D) to a one-layer cache in the given chunk sizes; concatenated outputs."""
    b, hkv, length, dk = key.shape
    cache = KVCache(1, b, hkv, length, dk, dtype=dtype, value_dim=value.shape[-1])
    outputs, start = [], 0
    for size in chunks:
        new = slice(start, start + size)
        out, _ = cached_attention(cache, 0, query[:, :, new], key[:, :, new], value[:, :, new], window=window)
        outputs.append(out)
        start += size
    assert len(cache) == start == length
    return torch.cat(outputs, dim=2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("hq, hkv", [(4, 4), (4, 2), (4, 1)], ids=str)
def test_decoding_step_by_step_equals_full_causal_attention(dtype, hq, hkv):
    length = 40
    query = randn(2, hq, length, 8, dtype=dtype, seed=1)
    key, value = randn(2, hkv, length, 8, dtype=dtype, seed=2), randn(2, hkv, length, 6, dtype=dtype, seed=3)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True, enable_gqa=True)
    decoded = _decode(query, key, value, [1] * length, dtype=dtype)
    torch.testing.assert_close(decoded, expected, atol=DECODE_TOL[dtype], rtol=0)


@pytest.mark.parametrize("chunks", [[7, 1, 1, 20, 3, 1, 1], [33, 1], [34]])
def test_a_prompt_then_single_steps_equals_full_causal_attention(chunks):
    query, key, value = randn(1, 2, 34, 4, seed=4), randn(1, 2, 34, 4, seed=5), randn(1, 2, 34, 4, seed=6)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    torch.testing.assert_close(_decode(query, key, value, chunks), expected, atol=1e-12, rtol=0)


@pytest.mark.parametrize("window", [1, 5, 16, 64])
def test_windowed_decoding_equals_attention_with_the_sliding_window_mask(window):
    query, key, value = randn(2, 2, 36, 4, seed=7), randn(2, 1, 36, 4, seed=8), randn(2, 1, 36, 3, seed=9)
    mask = sliding_window_mask(36, 36, window)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=True)
    for chunks in ([1] * 36, [10, 1, 25]):
        torch.testing.assert_close(_decode(query, key, value, chunks, window=window), expected, atol=1e-12, rtol=0)


def test_append_returns_every_position_so_far_and_weights_on_request():
    cache = KVCache(2, 1, 2, 8, 3, dtype=torch.float64)
    k1, v1 = randn(1, 2, 3, 3, seed=1), randn(1, 2, 3, 3, seed=2)
    k2, v2 = randn(1, 2, 1, 3, seed=3), randn(1, 2, 1, 3, seed=4)
    cache.append(1, k1, v1)
    keys, values = cache.append(1, k2, v2)
    assert torch.equal(keys, torch.cat([k1, k2], dim=2)) and torch.equal(values, torch.cat([v1, v2], dim=2))
    assert cache.lengths == [0, 4] and len(cache) == 0
    _, weights = cached_attention(cache, 0, randn(1, 4, 2, 3, seed=5), k1[:, :, :2], v1[:, :, :2], need_weights=True)
    assert weights.shape == (1, 4, 2, 2) and weights[0, :, 0, 1].eq(0).all()  # causal within the new block


# --- memory arithmetic --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("layers, batch, hkv, length, dk", [(1, 1, 1, 1, 1), (2, 3, 4, 17, 8), (4, 1, 2, 64, 16)])
def test_cache_bytes_equal_the_allocated_tensors(dtype, layers, batch, hkv, length, dk):
    cache = KVCache(layers, batch, hkv, length, dk, dtype=dtype)
    allocated = sum(t.untyped_storage().nbytes() for t in cache.keys + cache.values)
    itemsize = torch.empty((), dtype=dtype).element_size()
    assert cache.nbytes == allocated == kv_cache_bytes(layers, hkv, dk, length, batch, bytes_per_value=itemsize)


def test_cache_bytes_of_a_7b_configuration():
    # 32 layers, 32 heads of 128, fp16, 4096 positions: 0.5 MiB per position, 2 GiB in all
    assert kv_cache_bytes(32, 32, 128, 1) == 2**19
    assert kv_cache_bytes(32, 32, 128, 4096) == 2 * 2**30
    assert kv_cache_bytes(32, 8, 128, 4096) == 2**30 // 2  # 8 key/value heads: a quarter
    with pytest.raises(ValueError, match="length"):
        kv_cache_bytes(32, 8, 128, 0)


# --- bad input ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key_shape, value_shape, message", [
    ((2, 3, 1, 4), (2, 3, 1, 4), r"\(1, 3, Lnew, 4\)"),  # wrong batch
    ((1, 2, 1, 4), (1, 2, 1, 4), r"\(1, 3, Lnew, 4\)"),  # wrong number of key/value heads
    ((1, 3, 1, 5), (1, 3, 1, 5), r"\(1, 3, Lnew, 4\)"),  # wrong head width
    ((1, 3, 2, 4), (1, 3, 1, 4), "same number of new positions"),
    ((1, 3, 4), (1, 3, 4), "4 dims"),
    ((1, 3, 9, 4), (1, 3, 9, 4), "max_length=8"),  # more than the cache holds
])
def test_cache_shape_mismatch_is_a_clear_error(key_shape, value_shape, message):
    cache = KVCache(1, 1, 3, 8, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=message):
        cache.append(0, randn(*key_shape), randn(*value_shape))
    assert cache.lengths == [0]  # nothing was written


def test_cache_overflow_layer_and_dtype_errors():
    cache = KVCache(2, 1, 1, 4, 2, dtype=torch.float64)
    cache.append(0, randn(1, 1, 3, 2), randn(1, 1, 3, 2))
    with pytest.raises(ValueError, match="3 stored \\+ 2 new = 5"):
        cache.append(0, randn(1, 1, 2, 2), randn(1, 1, 2, 2))
    with pytest.raises(ValueError, match=r"layer in \[0, 1\]"):
        cache.append(2, randn(1, 1, 1, 2), randn(1, 1, 1, 2))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        cache.append(1, randn(1, 1, 1, 2, dtype=torch.float32), randn(1, 1, 1, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match="max_length"):
        KVCache(1, 1, 1, 0, 2)
