"""attnlib.causal and the end-aligned causal mask: sliding windows, the KV cache, its size, cached decoding."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from attnlib import causal_mask, scaled_dot_product_attention
from attnlib.causal import (
    KVCache,
    PagedKVCache,
    cached_attention,
    kv_bytes_per_token,
    kv_cache_bytes,
    paged_attention,
    sliding_window_mask,
)
from tests.lib.tensors import randn

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
@pytest.mark.parametrize("sinks", [0, 1, 4])
def test_sliding_window_mask_follows_its_definition(lq, lk, window, sinks):
    mask = sliding_window_mask(lq, lk, window, sinks=sinks)
    assert mask.shape == (lq, lk) and mask.dtype == torch.bool
    for i in range(lq):
        for j in range(lk):
            distance = (lk - lq + i) - j
            assert bool(mask[i, j]) == (0 <= distance < window or (j < sinks and distance >= 0)), (i, j)


def test_sinks_keep_the_first_positions_in_view_and_nothing_else_changes():
    windowed, sunk = sliding_window_mask(12, 12, 4), sliding_window_mask(12, 12, 4, sinks=2)
    assert torch.equal(sunk[:, 2:], windowed[:, 2:])  # past the sinks: the window alone
    assert torch.equal(sunk[:, :2], causal_mask(12)[:, :2])  # the sinks: every query at or after them
    assert sunk.sum(dim=-1).tolist() == [1, 2, 3, 4, 5] + [6] * 7  # the window's 4 and the 2 sinks
    assert torch.equal(sliding_window_mask(12, 12, 4, sinks=12), causal_mask(12))


def test_wide_window_is_the_end_aligned_causal_mask_and_rows_keep_window_keys():
    assert torch.equal(sliding_window_mask(5, 9, 9), causal_mask(5, 9, align="lower_right"))
    assert sliding_window_mask(10, 10, 4).sum(dim=-1).tolist() == [1, 2, 3] + [4] * 7


@pytest.mark.parametrize("window, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bad_window_is_a_clear_error(window, error):
    with pytest.raises(error, match="window"):
        sliding_window_mask(4, 4, window)


@pytest.mark.parametrize("sinks, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError), (None, TypeError)])
def test_bad_sinks_are_a_clear_error(sinks, error):
    with pytest.raises(error, match="sinks"):
        sliding_window_mask(4, 4, 2, sinks=sinks)
    cache = KVCache(1, 1, 1, 4, 2, dtype=torch.float64)
    with pytest.raises(error, match="sinks"):
        cached_attention(cache, 0, randn(1, 1, 1, 2), randn(1, 1, 1, 2), randn(1, 1, 1, 2), window=2, sinks=sinks)
    assert len(cache) == 0  # nothing stored: the check comes first


# --- the KV cache: decoding one position at a time equals full causal attention -------------------------

def _decode(query, key, value, chunks, window=None, dtype=torch.float64, sinks=0):
    """Feed query/key/value (B, H, L, D) to a one-layer cache in the given chunk sizes; concatenated outputs."""
    b, hkv, length, dk = key.shape
    cache = KVCache(1, b, hkv, length, dk, dtype=dtype, value_dim=value.shape[-1])
    outputs, start = [], 0
    for size in chunks:
        new = slice(start, start + size)
        out, _ = cached_attention(cache, 0, query[:, :, new], key[:, :, new], value[:, :, new], window=window,
                                  sinks=sinks)
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
@pytest.mark.parametrize("sinks", [0, 1, 4])
def test_windowed_decoding_equals_attention_with_the_sliding_window_mask(window, sinks):
    query, key, value = randn(2, 2, 36, 4, seed=7), randn(2, 1, 36, 4, seed=8), randn(2, 1, 36, 3, seed=9)
    mask = sliding_window_mask(36, 36, window, sinks=sinks)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=True)
    for chunks in ([1] * 36, [10, 1, 25]):
        decoded = _decode(query, key, value, chunks, window=window, sinks=sinks)
        torch.testing.assert_close(decoded, expected, atol=1e-12, rtol=0)


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


# --- the cache per token, by attention layout ---------------------------------------------------------------

def test_kv_bytes_per_token_of_mha_mqa_gqa_equal_the_cache_of_one_position():
    layers, heads, dk = 32, 32, 128
    mha = kv_bytes_per_token("mha", layers, heads, dk)
    assert mha == kv_cache_bytes(layers, heads, dk, 1) == 2 * layers * heads * dk * 2
    assert kv_bytes_per_token("gqa", layers, heads, dk, num_kv_heads=8) == kv_cache_bytes(layers, 8, dk, 1)
    assert kv_bytes_per_token("mqa", layers, heads, dk) * heads == mha
    assert kv_bytes_per_token("gqa", layers, heads, dk, num_kv_heads=heads) == mha  # GQA spans MHA ...
    assert kv_bytes_per_token("gqa", layers, heads, dk, num_kv_heads=1) == kv_bytes_per_token("mqa", layers, heads, dk)


def test_mla_caches_nine_halves_of_a_head_per_layer_as_deepseek_v2_states():
    """DeepSeek-V2: d_c = 4·d_h and d_h^R = d_h/2 give (d_c + d_h^R)·l = (9/2)·d_h·l elements per token."""
    d_h, layers = 128, 60
    elements = kv_bytes_per_token("mla", layers, 128, d_h, latent_dim=4 * d_h, rope_dim=d_h // 2, bytes_per_value=1)
    assert elements == 9 * d_h * layers // 2
    gqa_heads = elements / (2 * d_h * layers)  # the same cache as GQA with this many key/value heads
    assert gqa_heads == 2.25


def test_kv_bytes_per_token_bad_input():
    with pytest.raises(ValueError, match="layout in"):
        kv_bytes_per_token("mhq", 2, 4, 8)
    with pytest.raises(ValueError, match="num_kv_heads dividing num_heads=12, got 5"):
        kv_bytes_per_token("gqa", 2, 12, 8, num_kv_heads=5)
    with pytest.raises(TypeError, match="latent_dim"):
        kv_bytes_per_token("mla", 2, 12, 8, rope_dim=4)


# --- the paged KV cache ---------------------------------------------------------------------------------------

def _serve(schedule, hq=4, hkv=2, dk=8, dv=6, block_size=4, num_blocks=64):
    """Decode interleaved sequences with one PagedKVCache and one contiguous KVCache each; outputs of both.

    ``schedule`` lists (sequence id, new positions); every step draws fresh seeded q, k, v.
    """
    paged = PagedKVCache(num_blocks, block_size, hkv, dk, dtype=torch.float64, value_dim=dv)
    contiguous, paged_out, contiguous_out = {}, {}, {}
    for step, (seq, size) in enumerate(schedule):
        q, k, v = randn(1, hq, size, dk, seed=3 * step), randn(1, hkv, size, dk, seed=3 * step + 1), randn(
            1, hkv, size, dv, seed=3 * step + 2)
        cache = contiguous.setdefault(seq, KVCache(1, 1, hkv, 64, dk, dtype=torch.float64, value_dim=dv))
        contiguous_out.setdefault(seq, []).append(cached_attention(cache, 0, q, k, v)[0][0])
        paged_out.setdefault(seq, []).append(paged_attention(paged, seq, q[0], k[0], v[0])[0])
    return paged, paged_out, contiguous_out


SCHEDULE = [("a", 5), ("b", 11), ("c", 2), ("a", 1), ("b", 1), ("c", 1), ("a", 1), ("c", 7), ("b", 1), ("a", 9),
            ("c", 1), ("a", 1), ("b", 1)]


def test_paged_decoding_equals_the_contiguous_cache_for_interleaved_sequences():
    paged, paged_out, contiguous_out = _serve(SCHEDULE)
    for seq in "abc":
        torch.testing.assert_close(torch.cat(paged_out[seq], dim=1), torch.cat(contiguous_out[seq], dim=1),
                                   atol=1e-12, rtol=0)
    assert paged.lengths == {"a": 17, "b": 14, "c": 11}
    expected_tables, lengths, handed_out = {}, {}, 0  # blocks 0, 1, 2, ... handed out as sequences grow
    for seq, size in SCHEDULE:
        lengths[seq] = lengths.get(seq, 0) + size
        while len(expected_tables.setdefault(seq, [])) * 4 < lengths[seq]:
            expected_tables[seq].append(handed_out)
            handed_out += 1
    assert paged.block_tables == expected_tables
    assert expected_tables["a"] != list(range(expected_tables["a"][0], expected_tables["a"][0] + 5))  # scattered


def test_released_blocks_are_reused_and_decoding_stays_exact():
    paged, _, _ = _serve(SCHEDULE)
    freed = list(paged.block_tables["b"])
    paged.release("b")
    assert set(freed) <= set(paged.free_blocks) and "b" not in paged.lengths
    q, k, v = randn(4, 6, 8, seed=90), randn(2, 6, 8, seed=91), randn(2, 6, 6, seed=92)
    out, weights = paged_attention(paged, "d", q, k, v, need_weights=True)
    assert paged.block_tables["d"] == freed[:2]  # the first free blocks are b's old ones
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(out, expected, atol=1e-12, rtol=0)
    assert weights.shape == (4, 6, 6)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=6), block_size=st.integers(1, 16))
def test_wasted_slots_equal_the_closed_form(lengths, block_size):
    """Only each sequence's last block is partly empty: Σ_s (⌈L_s/b⌉·b − L_s) slots, each < b."""
    pool = 6 * 40  # enough blocks for the longest draw: six sequences of 40 positions in blocks of 1
    paged = PagedKVCache(pool, block_size, 1, 2, dtype=torch.float64)
    for seq, length in enumerate(lengths):
        zeros = torch.zeros(1, length, 2, dtype=torch.float64)
        paged.append(seq, zeros, zeros)
    expected = sum(math.ceil(n / block_size) * block_size - n for n in lengths)
    assert paged.wasted_slots() == expected < block_size * len(lengths)
    assert pool - len(paged.free_blocks) == sum(math.ceil(n / block_size) for n in lengths)


def test_paged_cache_errors_write_nothing():
    paged = PagedKVCache(3, 4, 2, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"expected at most 3 free blocks to be needed, got 4"):
        paged.append("a", randn(2, 13, 8), randn(2, 13, 8))
    assert paged.lengths == {} and len(paged.free_blocks) == 3
    with pytest.raises(ValueError, match=r"\(Hkv, Lnew, D\) = \(2, Lnew, 8\)"):
        paged.append("a", randn(3, 1, 8), randn(3, 1, 8))
    with pytest.raises(TypeError, match="dtype torch.float64"):
        paged.append("a", randn(2, 1, 8, dtype=torch.float32), randn(2, 1, 8, dtype=torch.float32))
    with pytest.raises(KeyError, match="'zz'"):
        paged.release("zz")
    assert paged.nbytes == 2 * 3 * 2 * 4 * 8 * 8


def test_sequences_keep_decoding_exactly_while_released_blocks_are_reused_under_them():
    """Release a sequence mid-stream; a new one decodes step by step in its old blocks (stale values in them)
    while the others go on; every step equals a contiguous KVCache per sequence."""
    paged = PagedKVCache(6, 4, 2, 8, dtype=torch.float64, value_dim=6)
    contiguous = {}
    schedule = [("a", 3), ("b", 6), ("a", 1), ("b", 1), ("a", 1), "release b", ("c", 2), ("a", 1)]
    schedule += [("c", 1), ("a", 1)] * 5
    for step, entry in enumerate(schedule):
        if entry == "release b":
            freed = paged.block_tables["b"]
            paged.release("b")
            continue
        seq, size = entry
        q, k = randn(4, size, 8, seed=5 * step), randn(2, size, 8, seed=5 * step + 1)  # 4 query heads, 2 KV heads
        v = randn(2, size, 6, seed=5 * step + 2)
        cache = contiguous.setdefault(seq, KVCache(1, 1, 2, 32, 8, dtype=torch.float64, value_dim=6))
        expected, _ = cached_attention(cache, 0, q[None], k[None], v[None])
        out, _ = paged_attention(paged, seq, q, k, v)
        torch.testing.assert_close(out, expected[0], atol=1e-12, rtol=0)
    assert paged.lengths == {"a": 11, "c": 7}
    assert set(paged.block_tables["c"]) <= set(freed)  # c lives where b lived
    assert len(paged.free_blocks) == 6 - 3 - 2


@pytest.mark.parametrize("layout, kwargs, by_hand", [
    ("mha", {"num_layers": 32, "num_heads": 32, "head_dim": 128}, 2 * 32 * 32 * 128 * 2),  # Llama 2 7B
    ("mqa", {"num_layers": 32, "num_heads": 71, "head_dim": 64}, 2 * 32 * 1 * 64 * 2),  # Falcon 7B
    ("gqa", {"num_layers": 32, "num_heads": 32, "head_dim": 128, "num_kv_heads": 8}, 2 * 32 * 8 * 128 * 2),  # Mistral
    ("mla", {"num_layers": 60, "num_heads": 128, "head_dim": 128, "latent_dim": 512, "rope_dim": 64},
     60 * (512 + 64) * 2),  # DeepSeek-V2: the latent and the shared rotary key, per layer
    ("mla", {"num_layers": 60, "num_heads": 128, "head_dim": 128, "latent_dim": 512, "rope_dim": 64,
             "bytes_per_value": 1}, 60 * 576),
])
def test_kv_bytes_per_token_of_named_models_equal_hand_counts(layout, kwargs, by_hand):
    assert kv_bytes_per_token(layout, **kwargs) == by_hand
