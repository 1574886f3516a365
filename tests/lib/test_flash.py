"""attnlib.flash: tiled attention with the online softmax, against torch's SDPA and attnlib's reference path."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import causal_mask, padding_mask, scaled_dot_product_attention
from attnlib.bench import cpu_peak_bytes
from attnlib.flash import FULL, MASKED, SKIPPED, FlashAttention, flash_attention, tile_grid, weights_from_lse
from tests.lib.tensors import CUDA, expected_weights, randn, random_bool_mask, random_float_mask, tol

# (Lq, Lk, block_size): block sizes that divide L, that do not, equal to L, larger than L; Lq≠Lk both ways.
CASES = [(16, 16, 4), (16, 16, 5), (16, 16, 16), (16, 16, 64), (12, 20, 4), (12, 20, 7), (20, 12, 3), (20, 12, 8),
         (1, 9, 2), (9, 1, 2)]


def _qkv(lq, lk, dtype=torch.float32, batch=(2, 3), dk=8, dv=5, seed=0):
    return (randn(*batch, lq, dk, dtype=dtype, seed=seed), randn(*batch, lk, dk, dtype=dtype, seed=seed + 1),
            randn(*batch, lk, dv, dtype=dtype, seed=seed + 2))


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("lq", "lk", "block_size"), CASES)
def test_output_equals_torch_sdpa_float32(lq, lk, block_size, is_causal):
    query, key, value = _qkv(lq, lk)
    output, lse = flash_attention(query, key, value, is_causal=is_causal, block_size=block_size)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    assert output.shape == expected.shape and lse.shape == query.shape[:-1]
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("lq", "lk", "block_size"), CASES)
def test_lse_equals_torch_logsumexp(lq, lk, block_size, is_causal):
    query, key, value = _qkv(lq, lk, dtype=torch.float64)
    _, lse = flash_attention(query, key, value, is_causal=is_causal, block_size=block_size, scale=0.3)
    scores = query @ key.transpose(-2, -1) * 0.3
    if is_causal:
        scores = scores.masked_fill(~causal_mask(lq, lk), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), **tol(torch.float64))


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
@pytest.mark.parametrize(("lq", "lk", "block_size"), [(12, 20, 7), (20, 12, 4)])
def test_masks_equal_torch_sdpa(lq, lk, block_size, mask_kind):
    query, key, value = _qkv(lq, lk, dtype=torch.float64)
    make = random_bool_mask if mask_kind == "bool" else random_float_mask
    attn_mask = make(3, lq, lk, seed=4)  # (H, Lq, Lk) broadcast over the batch
    output, _ = flash_attention(query, key, value, attn_mask=attn_mask, block_size=block_size)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
    torch.testing.assert_close(output, expected, **tol(torch.float64))


@settings(max_examples=40, deadline=None)
@given(lq=st.integers(1, 24), lk=st.integers(1, 24), block_size=st.integers(1, 30), is_causal=st.booleans(),
       seed=st.integers(0, 1000))
def test_any_shape_and_block_size_equals_torch_sdpa(lq, lk, block_size, is_causal, seed):
    query, key, value = _qkv(lq, lk, dtype=torch.float64, batch=(2,), seed=seed)
    output, _ = flash_attention(query, key, value, is_causal=is_causal, block_size=block_size)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    torch.testing.assert_close(output, expected, **tol(torch.float64))


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_mask_with_more_batch_dims_than_the_inputs(mask_kind):
    query, key, value = _qkv(7, 9, dtype=torch.float64, batch=())  # (Lq, Dk), (Lk, Dk), (Lk, Dv)
    make = random_bool_mask if mask_kind == "bool" else random_float_mask
    attn_mask = make(2, 1, 7, 9, seed=5)  # (B, H, Lq, Lk): the output gets the mask's batch
    output, lse = flash_attention(query, key, value, attn_mask=attn_mask, block_size=4)
    expected, weights = scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
    assert output.shape == (2, 1, 7, 5) and lse.shape == (2, 1, 7)
    # torch's SDPA does not broadcast the inputs up to the mask's batch: compare with plain torch ops instead.
    torch.testing.assert_close(output, expected_weights(query, key, attn_mask) @ value, **tol(torch.float64))
    torch.testing.assert_close(output, expected, **tol(torch.float64))
    torch.testing.assert_close(weights_from_lse(query, key, lse, attn_mask=attn_mask), weights, **tol(torch.float64))


def test_key_and_value_broadcast_over_heads():
    query, _, _ = _qkv(7, 9, dtype=torch.float64, batch=(2, 3))
    _, key, value = _qkv(7, 9, dtype=torch.float64, batch=(2, 1), seed=7)  # one key/value head shared by 3
    output, _ = flash_attention(query, key, value, block_size=4)
    expected, _ = scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(output, expected, **tol(torch.float64))


def test_fully_masked_queries_get_zero_output_and_minus_inf_lse():
    query, key, value = _qkv(7, 9, dtype=torch.float64)
    attn_mask = padding_mask([5, 0], 9)  # (2, 1, 1, 9): the second sequence has no key at all
    output, lse = flash_attention(query, key, value, attn_mask=attn_mask, block_size=4)
    reference, weights = scaled_dot_product_attention(query, key, value, attn_mask=attn_mask)
    assert not output.isnan().any()
    assert (output[1] == 0).all() and torch.isneginf(lse[1]).all() and torch.isfinite(lse[0]).all()
    torch.testing.assert_close(output, reference, **tol(torch.float64))
    torch.testing.assert_close(weights_from_lse(query, key, lse, attn_mask=attn_mask), weights, **tol(torch.float64))


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("lq", "lk", "block_size"), [(16, 16, 5), (12, 20, 7), (20, 12, 4)])
def test_weights_from_lse_equal_reference_weights(lq, lk, block_size, is_causal):
    query, key, value = _qkv(lq, lk)
    _, lse = flash_attention(query, key, value, is_causal=is_causal, block_size=block_size)
    _, weights = scaled_dot_product_attention(query, key, value, is_causal=is_causal)
    recomputed = weights_from_lse(query, key, lse, is_causal=is_causal)
    torch.testing.assert_close(recomputed, weights, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(recomputed.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("rows", [3, slice(2, 9, 3), [0, 11, 5], torch.tensor([7, 1])], ids=str)
def test_weights_from_lse_picks_rows(rows):
    query, key, value = _qkv(12, 20, dtype=torch.float64)
    attn_mask = random_float_mask(12, 20, seed=3)
    _, lse = flash_attention(query, key, value, attn_mask=attn_mask, block_size=6, scale=0.5)
    _, weights = scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, scale=0.5)
    picked = weights_from_lse(query, key, lse, rows=rows, attn_mask=attn_mask, scale=0.5)
    index = torch.arange(12)[rows].reshape(-1)
    torch.testing.assert_close(picked, weights[..., index, :], **tol(torch.float64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_dtype_kept_and_half_computed_in_float32(dtype):
    query, key, value = _qkv(10, 14, dtype=dtype)
    output, lse = flash_attention(query, key, value, is_causal=True, block_size=4)
    assert output.dtype == dtype and output.device == query.device
    assert lse.dtype == (torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype)
    expected = F.scaled_dot_product_attention(query.double(), key.double(), value.double(), is_causal=True)
    torch.testing.assert_close(output, expected.to(dtype), **tol(dtype))
    assert weights_from_lse(query, key, lse, is_causal=True).dtype == dtype


def test_positional_order_is_query_key_value_attn_mask_and_the_rest_keyword_only():
    query, key, value = _qkv(9, 9)
    mask = torch.rand(9, 9, generator=torch.Generator().manual_seed(3)) < 0.7
    positional, _ = flash_attention(query, key, value, mask, scale=0.25, block_size=4)
    expected = F.scaled_dot_product_attention(query, key, value, mask, scale=0.25)
    torch.testing.assert_close(positional, expected, **tol(query.dtype))
    with pytest.raises(TypeError):
        flash_attention(query, key, value, None, True)  # is_causal is keyword-only


@CUDA
def test_runs_on_the_inputs_cuda_device():
    query, key, value = (t.cuda() for t in _qkv(40, 50))
    output, lse = flash_attention(query, key, value, is_causal=True, block_size=16)
    assert output.device == query.device and lse.device == query.device
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-4)


def test_tile_grid_matches_the_causal_mask_block_by_block():
    lq, lk, block = 11, 17, 4
    grid = tile_grid(lq, lk, block, is_causal=True)
    mask = causal_mask(lq, lk)
    assert grid.shape == (3, 5)
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            tile = mask[i * block:(i + 1) * block, j * block:(j + 1) * block]
            expected = FULL if tile.all() else (SKIPPED if not tile.any() else MASKED)
            assert grid[i, j] == expected, (i, j)
    assert (tile_grid(lq, lk, block) == FULL).all()


def test_peak_memory_stays_far_below_one_score_matrix():
    query, key, value = _qkv(1024, 1024, batch=(1, 2), dk=16, dv=16)
    matrix = 2 * 1024 * 1024 * 4  # bytes of one (H, Lq, Lk) float32 matrix
    flash = cpu_peak_bytes(lambda: flash_attention(query, key, value, block_size=128))
    reference = cpu_peak_bytes(lambda: scaled_dot_product_attention(query, key, value))
    assert flash < matrix / 8 and reference >= matrix


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"query": [[1.0]]}, TypeError, "expected query to be a torch.Tensor"),
    ({"query": torch.ones(4, 8, dtype=torch.int64)}, TypeError, "floating-point dtype"),
    ({"key": torch.ones(6, 3)}, ValueError, "Dk=8"),
    ({"value": torch.ones(5, 2)}, ValueError, "Lk=6"),
    ({"query": torch.ones(8)}, ValueError, r"\(\.\.\., Lq, Dk\)"),
    ({"block_size": 0}, ValueError, "block_size to be a positive int, got 0"),
    ({"block_size": 2.5}, TypeError, "block_size to be a positive int"),
    ({"scale": -1.0}, ValueError, "scale to be a finite number > 0"),
    ({"is_causal": 1}, TypeError, "is_causal to be a bool"),
    ({"attn_mask": torch.ones(4, 5, dtype=torch.bool)}, ValueError, r"broadcastable to \(\.\.\., Lq, Lk\)"),
    ({"attn_mask": torch.ones(4, 6, dtype=torch.bool), "is_causal": True}, ValueError, "either attn_mask"),
    ({"attn_mask": torch.ones(4, 6, dtype=torch.int64)}, TypeError, "dtype bool"),
])
def test_bad_inputs_raise_clear_errors(kwargs, error, match):
    args = {"query": torch.ones(4, 8), "key": torch.ones(6, 8), "value": torch.ones(6, 3), **kwargs}
    with pytest.raises(error, match=match):
        flash_attention(**args)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"lse": torch.zeros(5)}, ValueError, r"lse of shape \(\.\.\., Lq\) with Lq=4"),
    ({"lse": torch.zeros(4, dtype=torch.int64)}, TypeError, "floating-point dtype"),
    ({"rows": 4}, ValueError, r"rows to index queries 0\.\.3"),
    ({"rows": [0, 9]}, ValueError, "rows to index queries"),
])
def test_weights_from_lse_bad_inputs(kwargs, error, match):
    args = {"query": torch.ones(4, 8), "key": torch.ones(6, 8), "lse": torch.zeros(4), **kwargs}
    with pytest.raises(error, match=match):
        weights_from_lse(**args)


# The backward pass (FlashAttention, an autograd Function): every gradient against torch's autograd through plain
# torch ops, in float64, and for the log-sum-exp as well as the output.

def _leaves(*tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def _grads(outputs, inputs, seed=11):
    """Gradients of a random linear function of ``outputs`` (each weighted by its own seeded tensor)."""
    loss = sum((out * randn(*out.shape, dtype=out.dtype, seed=seed + i)).sum() for i, out in enumerate(outputs))
    return torch.autograd.grad(loss, inputs)


def _reference(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """(output, lse) through plain torch ops: the graph torch's autograd differentiates."""
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        attn_mask = causal_mask(query.shape[-2], key.shape[-2])
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return torch.softmax(scores, dim=-1) @ value, torch.logsumexp(scores, dim=-1)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("lq", "lk", "block_size"), CASES)
def test_backward_equals_torch_autograd_float64(lq, lk, block_size, is_causal):
    inputs = _leaves(*_qkv(lq, lk, dtype=torch.float64))
    ours = _grads(flash_attention(*inputs, is_causal=is_causal, block_size=block_size, scale=0.4), inputs)
    expected = _grads(_reference(*inputs, is_causal=is_causal, scale=0.4), inputs)
    for name, got, want in zip("qkv", ours, expected, strict=True):
        assert got.shape == want.shape, name
        torch.testing.assert_close(got, want, **tol(torch.float64), msg=lambda m, n=name: f"d{n}: {m}")


@settings(max_examples=25, deadline=None)
@given(lq=st.integers(1, 20), lk=st.integers(1, 20), block_size=st.integers(1, 24), is_causal=st.booleans(),
       seed=st.integers(0, 1000))
def test_backward_any_shape_and_block_size(lq, lk, block_size, is_causal, seed):
    inputs = _leaves(*_qkv(lq, lk, dtype=torch.float64, batch=(2,), seed=seed))
    ours = _grads(flash_attention(*inputs, is_causal=is_causal, block_size=block_size)[:1], inputs)
    expected = _grads([F.scaled_dot_product_attention(*inputs, is_causal=is_causal)], inputs)
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))


@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_backward_with_masks(mask_kind):
    inputs = _leaves(*_qkv(12, 20, dtype=torch.float64))
    make = random_bool_mask if mask_kind == "bool" else random_float_mask
    attn_mask = make(3, 12, 20, seed=4)  # (H, Lq, Lk) broadcast over the batch
    ours = _grads(flash_attention(*inputs, attn_mask=attn_mask, block_size=7), inputs)
    expected = _grads(_reference(*inputs, attn_mask=attn_mask), inputs)
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))


def test_backward_of_fully_masked_queries_is_zero_like_the_reference_path():
    inputs = _leaves(*_qkv(7, 9, dtype=torch.float64))
    attn_mask = padding_mask([5, 0], 9)  # the second sequence has no key: zero output, zero gradient
    ours = _grads(flash_attention(*inputs, attn_mask=attn_mask, block_size=4)[:1], inputs)
    expected = _grads(scaled_dot_product_attention(*inputs, attn_mask=attn_mask)[:1], inputs)
    for got, want in zip(ours, expected, strict=True):
        assert not got.isnan().any()
        torch.testing.assert_close(got, want, **tol(torch.float64))
    assert (ours[0][1] == 0).all()


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("hq", "hkv"), [(6, 2), (4, 1), (3, 3)])
def test_grouped_query_attention_equals_torch_sdpa_enable_gqa(hq, hkv, is_causal):
    query, key, value = _leaves(randn(2, hq, 10, 8, seed=1), randn(2, hkv, 13, 8, seed=2), randn(2, hkv, 13, 4, seed=3))
    output, lse = FlashAttention.apply(query, key, value, is_causal, None, None, 4)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=is_causal, enable_gqa=True)
    assert output.shape == (2, hq, 10, 4) and lse.shape == (2, hq, 10)
    torch.testing.assert_close(output, expected, **tol(torch.float64))
    public, _ = flash_attention(query, key, value, is_causal=is_causal, block_size=3, enable_gqa=True)
    torch.testing.assert_close(public, expected, **tol(torch.float64))
    ours, theirs = _grads([output], (query, key, value)), _grads([expected], (query, key, value))
    for got, want in zip(ours, theirs, strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))


def test_grouped_query_attention_with_a_per_head_mask():
    query, key, value = _leaves(randn(2, 6, 10, 8, seed=1), randn(2, 2, 13, 8, seed=2), randn(2, 2, 13, 4, seed=3))
    attn_mask = random_bool_mask(6, 10, 13, seed=9)  # (Hq, Lq, Lk): each query head its own mask
    output, _ = FlashAttention.apply(query, key, value, False, None, attn_mask, 4)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, enable_gqa=True)
    torch.testing.assert_close(output, expected, **tol(torch.float64))
    for got, want in zip(_grads([output], (query, key, value)), _grads([expected], (query, key, value)), strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))


def test_broadcast_key_gets_its_gradient_summed_over_the_heads_it_serves():
    query, = _leaves(randn(2, 3, 7, 8, seed=1))
    key, value = _leaves(randn(2, 1, 9, 8, seed=2), randn(2, 1, 9, 5, seed=3))
    ours = _grads(flash_attention(query, key, value, block_size=4)[:1], (query, key, value))
    expected = _grads(_reference(query, key, value)[:1], (query, key, value))
    assert ours[1].shape == key.shape and ours[2].shape == value.shape
    for got, want in zip(ours, expected, strict=True):
        torch.testing.assert_close(got, want, **tol(torch.float64))


def test_gradcheck_passes_for_output_and_lse():
    inputs = _leaves(randn(1, 2, 5, 3, seed=1), randn(1, 2, 7, 3, seed=2), randn(1, 2, 7, 2, seed=3))
    assert torch.autograd.gradcheck(lambda q, k, v: FlashAttention.apply(q, k, v, True, 0.7, None, 3), inputs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_gradients_keep_the_input_dtype(dtype):
    inputs = _leaves(*_qkv(10, 14, dtype=dtype))
    ours = _grads(flash_attention(*inputs, is_causal=True, block_size=4)[:1], inputs)
    exact = _leaves(*(t.double() for t in inputs))
    expected = _grads(_reference(*exact, is_causal=True)[:1], exact)
    for got, want in zip(ours, expected, strict=True):
        assert got.dtype == dtype
        torch.testing.assert_close(got, want.to(dtype), atol=4 * tol(dtype)["atol"], rtol=4 * tol(dtype)["rtol"])


def test_backward_peak_memory_stays_far_below_one_score_matrix():
    query, key, value = _leaves(*_qkv(1024, 1024, batch=(1, 2), dk=16, dv=16))
    matrix = 2 * 1024 * 1024 * 4  # bytes of one (H, Lq, Lk) float32 matrix
    output, _ = flash_attention(query, key, value, block_size=128)
    grad = torch.ones_like(output)
    flash = cpu_peak_bytes(lambda: torch.autograd.grad(output, (query, key, value), grad))
    reference, _ = scaled_dot_product_attention(query, key, value)
    full = cpu_peak_bytes(lambda: torch.autograd.grad(reference, (query, key, value), grad))
    assert flash < matrix / 4 and full >= matrix  # tiles of 128 x 128 and the gradients; the reference: (H, L, L)s
