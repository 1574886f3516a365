"""attnlib.attention against torch.nn.functional.scaled_dot_product_attention and plain torch ops."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib import scaled_dot_product_attention, weighted_sum
from tests.lib.tensors import expected_weights, randn, random_bool_mask, random_float_mask, tol

DTYPES = [torch.float64, torch.float32, torch.bfloat16]
MASKS = ["none", "bool", "float", "causal"]
# (query shape, key shape, value shape): Lq≠Lk, Dv≠Dk, no/one/two/three batch dims.
SHAPES = [
    ((4, 8), (6, 8), (6, 3)),
    ((2, 5, 8), (2, 7, 8), (2, 7, 4)),
    ((2, 3, 4, 16), (2, 3, 6, 16), (2, 3, 6, 5)),
    ((2, 2, 3, 6, 4), (2, 2, 3, 9, 4), (2, 2, 3, 9, 7)),
]


def _inputs(shapes, dtype, seed=0):
    return tuple(randn(*shape, dtype=dtype, seed=seed + i) for i, shape in enumerate(shapes))


def _mask(kind, lq, lk, dtype, seed=10):
    if kind == "bool":
        return random_bool_mask(lq, lk, seed=seed)
    if kind == "float":
        return random_float_mask(lq, lk, seed=seed, dtype=dtype)
    return None


def _torch_sdpa(query, key, value, attn_mask, is_causal, scale, dtype):
    """torch's own kernel; bfloat16 inputs are compared with torch in float64 on the same values."""
    if dtype == torch.bfloat16:
        query, key, value = query.double(), key.double(), value.double()
        attn_mask = attn_mask.double() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale)
    return out.to(dtype)


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fast"])
@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{len(s[0])}d")
def test_output_equals_torch_sdpa(shapes, dtype, mask_kind, scale, need_weights):
    query, key, value = _inputs(shapes, dtype)
    lq, lk = query.shape[-2], key.shape[-2]
    attn_mask = _mask(mask_kind, lq, lk, dtype)
    is_causal = mask_kind == "causal"
    out, weights = scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                                scale=scale, need_weights=need_weights)
    expected = _torch_sdpa(query, key, value, attn_mask, is_causal, scale, dtype)
    assert out.shape == expected.shape and out.dtype == dtype
    torch.testing.assert_close(out, expected, **tol(dtype))
    assert (weights is None) == (not need_weights)


@pytest.mark.parametrize("scale", [None, 0.3])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{len(s[0])}d")
def test_weights_equal_softmax_of_masked_scores(shapes, dtype, mask_kind, scale):
    query, key, value = _inputs(shapes, dtype)
    attn_mask = _mask(mask_kind, query.shape[-2], key.shape[-2], dtype)
    is_causal = mask_kind == "causal"
    _, weights = scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, is_causal=is_causal,
                                              scale=scale)
    mask64 = attn_mask.double() if attn_mask is not None and attn_mask.is_floating_point() else attn_mask
    expected = expected_weights(query.double(), key.double(), mask64, is_causal, scale)
    assert weights.shape == (*query.shape[:-1], key.shape[-2]) and weights.dtype == dtype
    torch.testing.assert_close(weights, expected.to(dtype), **tol(dtype))


def test_bfloat16_close_to_torch_in_bfloat16():
    query, key, value = _inputs(SHAPES[2], torch.bfloat16)
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, is_causal=True, need_weights=need_weights)
        expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
        torch.testing.assert_close(out, expected, atol=3e-2, rtol=3e-2)


@pytest.mark.parametrize("lq, lk", [(3, 7), (7, 3), (5, 5)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_causal_is_top_left_aligned_like_torch(lq, lk, need_weights):
    query, key, value = randn(2, lq, 4, seed=1), randn(2, lk, 4, seed=2), randn(2, lk, 3, seed=3)
    out, _ = scaled_dot_product_attention(query, key, value, is_causal=True, need_weights=need_weights)
    expected = F.scaled_dot_product_attention(query, key, value, is_causal=True)
    torch.testing.assert_close(out, expected, **tol(torch.float64))


@pytest.mark.parametrize(
    "mask_shape", [(6,), (4, 1), (1, 6), (3, 4, 6), (2, 1, 1, 6), (2, 3, 4, 6)], ids=str
)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_broadcast_masks_match_torch(qkv64, mask_shape, kind):
    query, key, value = qkv64
    mask = random_bool_mask(*mask_shape, seed=4) if kind == "bool" else random_float_mask(*mask_shape, seed=4)
    torch_mask = mask.reshape(1, -1) if mask.ndim == 1 else mask  # torch wants (Lq, Lk) at least
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=torch_mask)
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        torch.testing.assert_close(out, expected, **tol(torch.float64))


def test_mask_with_more_batch_dims_broadcasts_on_both_paths():
    query, key, value = randn(4, 8, seed=1), randn(6, 8, seed=2), randn(6, 3, seed=3)
    mask = random_bool_mask(2, 1, 4, 6, seed=5)
    expected = F.scaled_dot_product_attention(*(t.expand(2, 1, -1, -1) for t in (query, key, value)), attn_mask=mask)
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        torch.testing.assert_close(out, expected, **tol(torch.float64))


def test_float_mask_of_another_dtype_is_cast_on_both_paths(qkv64):
    query, key, value = (t.float() for t in qkv64)
    mask = random_float_mask(4, 6, seed=6)  # float64 mask for float32 inputs
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask.float())
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, expected, **tol(torch.float32))


def test_weights_path_equals_fast_path(qkv64):
    query, key, value = qkv64
    mask = random_bool_mask(2, 1, 4, 6, seed=7)
    slow, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask)
    fast, none = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=False)
    assert none is None and weights is not None
    torch.testing.assert_close(slow, fast, **tol(torch.float64))


def test_output_is_weights_times_values(qkv64):
    query, key, value = qkv64
    out, weights = scaled_dot_product_attention(query, key, value, is_causal=True)
    torch.testing.assert_close(out, torch.einsum("bhqk,bhkd->bhqd", weights, value), **tol(torch.float64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
def test_weighted_sum_equals_einsum(dtype):
    weights, value = torch.softmax(randn(2, 4, 6, seed=1, dtype=dtype), -1), randn(2, 6, 3, seed=2, dtype=dtype)
    out = weighted_sum(weights, value)
    assert out.dtype == dtype
    torch.testing.assert_close(out, torch.einsum("bqk,bkd->bqd", weights, value), **tol(dtype))


def test_weighted_sum_of_one_hot_weights_picks_value_rows():
    value = randn(5, 3, seed=1)
    picks = torch.tensor([4, 0, 2])
    weights = F.one_hot(picks, 5).double()  # (Lq=3, Lk=5)
    torch.testing.assert_close(weighted_sum(weights, value), value[picks], rtol=0, atol=0)


def test_gradients_match_torch(qkv64):
    leaves = [t.clone().requires_grad_(True) for t in qkv64]
    ours, _ = scaled_dot_product_attention(*leaves, is_causal=True)
    ours.sum().backward()
    ours_grads = [t.grad for t in leaves]
    theirs_leaves = [t.clone().requires_grad_(True) for t in qkv64]
    F.scaled_dot_product_attention(*theirs_leaves, is_causal=True).sum().backward()
    for mine, theirs in zip(ours_grads, [t.grad for t in theirs_leaves], strict=True):
        torch.testing.assert_close(mine, theirs, **tol(torch.float64))


# --- dropout_p: torch's semantics ---------------------------------------------------------------

def test_dropout_zero_changes_nothing(qkv64):
    query, key, value = qkv64
    plain = scaled_dot_product_attention(query, key, value)
    torch.manual_seed(0)
    for got, expected in zip(scaled_dot_product_attention(query, key, value, dropout_p=0.0), plain, strict=True):
        assert torch.equal(got, expected)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_scales_kept_weights_and_output_uses_them(p):
    query, key, value = (randn(4, 64, 8, seed=1), randn(4, 64, 8, seed=2), randn(4, 64, 5, seed=3))
    _, plain = scaled_dot_product_attention(query, key, value)
    torch.manual_seed(3)
    out, used = scaled_dot_product_attention(query, key, value, dropout_p=p)
    kept = used != 0
    torch.testing.assert_close(used[kept], plain[kept] / (1 - p))  # kept ones scaled by 1/(1-p)
    dropped = 1 - kept.double().mean().item()
    assert abs(dropped - p) < 4 * (p * (1 - p) / kept.numel()) ** 0.5 + 1e-3  # about a fraction p are zero
    torch.testing.assert_close(out, used @ value)  # the output is the weighted sum with the weights used
    # each row still sums to 1 on average (the point of the 1/(1-p) rescaling)
    assert abs(used.sum(-1).mean().item() - 1) < 0.05


def test_dropout_one_drops_everything(qkv64):
    query, key, value = qkv64
    out, used = scaled_dot_product_attention(query, key, value, dropout_p=1.0)
    assert torch.count_nonzero(used) == 0 and torch.count_nonzero(out) == 0


def test_dropout_fast_path_passes_p_to_torch():
    query, key, value = (randn(2, 16, 8, seed=4), randn(2, 16, 8, seed=5), randn(2, 16, 3, seed=6))
    torch.manual_seed(7)
    ours, none = scaled_dot_product_attention(query, key, value, dropout_p=0.3, need_weights=False)
    torch.manual_seed(7)
    theirs = F.scaled_dot_product_attention(query, key, value, dropout_p=0.3)
    assert none is None
    torch.testing.assert_close(ours, theirs)
    assert not torch.allclose(ours, F.scaled_dot_product_attention(query, key, value))


def test_dropout_reference_matches_torch_in_distribution():
    """Same p, many seeds: our dropped output and torch's have the same mean (the undropped output)."""
    query, key, value = (randn(1, 8, 4, seed=8), randn(1, 8, 4, seed=9), randn(1, 8, 2, seed=10))
    plain, _ = scaled_dot_product_attention(query, key, value)
    ours = torch.stack([scaled_dot_product_attention(query, key, value, dropout_p=0.4)[0] for _ in range(2000)])
    torch.testing.assert_close(ours.mean(0), plain, atol=0.08, rtol=0)


@pytest.mark.parametrize("p, error", [(-0.1, ValueError), (1.5, ValueError), (float("nan"), ValueError),
                                      ("0.1", TypeError), (None, TypeError), (True, TypeError)])
@pytest.mark.parametrize("need_weights", [True, False])
def test_bad_dropout_p_is_a_clear_error(qkv64, p, error, need_weights):
    with pytest.raises(error, match="dropout_p"):
        scaled_dot_product_attention(*qkv64, dropout_p=p, need_weights=need_weights)


@pytest.mark.parametrize("p", [0.0, 0.25, 1.0])
def test_numpy_twin_drops_the_same_way(p):
    import numpy as np  # noqa: PLC0415

    from attnlib import numpy_ops  # noqa: PLC0415

    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 40, 4)), rng.normal(size=(3, 50, 4)), rng.normal(size=(3, 50, 2))
    _, plain = numpy_ops.scaled_dot_product_attention(q, k, v)
    np.random.seed(0)
    out, used = numpy_ops.scaled_dot_product_attention(q, k, v, dropout_p=p)
    kept = used != 0
    np.testing.assert_allclose(used[kept], plain[kept] / (1 - p))
    assert abs((1 - kept.mean()) - p) < 0.02
    np.testing.assert_allclose(out, used @ v)
    with pytest.raises(ValueError, match="dropout_p"):
        numpy_ops.scaled_dot_product_attention(q, k, v, dropout_p=-1.0)

# --- grouped-query attention (enable_gqa), against torch's own -----------------------------------------

# (Hq, Hkv): multi-head (equal), grouped, multi-query (Hkv = 1)
GQA_HEADS = [(4, 4), (6, 2), (8, 1), (4, 2)]


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fast"])
@pytest.mark.parametrize("mask_kind", MASKS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("hq, hkv", GQA_HEADS, ids=str)
def test_gqa_equals_torch_sdpa_enable_gqa(hq, hkv, dtype, mask_kind, need_weights):
    gen = torch.Generator().manual_seed(hq * 10 + hkv)
    b, lq, lk, dk, dv = (int(n) for n in torch.randint(1, 7, (5,), generator=gen))
    query = randn(b, hq, lq, dk, dtype=dtype, seed=1)
    key, value = randn(b, hkv, lk, dk, dtype=dtype, seed=2), randn(b, hkv, lk, dv, dtype=dtype, seed=3)
    mask = _mask(mask_kind, lq, lk, dtype)
    is_causal = mask_kind == "causal"
    out, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal,
                                                enable_gqa=True, need_weights=need_weights)
    expected = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal,
                                              enable_gqa=True)
    torch.testing.assert_close(out, expected, **tol(dtype))
    if need_weights:
        assert weights.shape == (b, hq, lq, lk)


def test_gqa_query_head_uses_its_groups_key_value_head():
    query, key, value = randn(2, 6, 5, 4, seed=1), randn(2, 3, 7, 4, seed=2), randn(2, 3, 7, 2, seed=3)
    out, weights = scaled_dot_product_attention(query, key, value, enable_gqa=True)
    for h in range(6):  # query heads 0, 1 share key/value head 0; 2, 3 head 1; 4, 5 head 2
        one, w = scaled_dot_product_attention(query[:, h], key[:, h // 2], value[:, h // 2])
        torch.testing.assert_close(out[:, h], one, **tol(torch.float64))
        torch.testing.assert_close(weights[:, h], w, **tol(torch.float64))


def test_gqa_with_equal_heads_is_ordinary_attention_and_broadcasts_batch(qkv64):
    query = randn(3, 4, 5, 8, seed=1)
    key, value = randn(1, 2, 6, 8, seed=2), randn(1, 2, 6, 3, seed=3)  # batch 1 broadcasts to 3
    mask = random_bool_mask(3, 1, 5, 6, seed=4)
    expected = F.scaled_dot_product_attention(query, key.expand(3, -1, -1, -1), value.expand(3, -1, -1, -1),
                                              attn_mask=mask, enable_gqa=True)
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, enable_gqa=True,
                                              need_weights=need_weights)
        torch.testing.assert_close(out, expected, **tol(torch.float64))
    q, k, v = qkv64
    torch.testing.assert_close(scaled_dot_product_attention(q, k, v, enable_gqa=True)[0],
                               scaled_dot_product_attention(q, k, v)[0], rtol=0, atol=0)


@pytest.mark.parametrize("shapes, message", [
    (((2, 6, 5, 4), (2, 4, 7, 4), (2, 4, 7, 4)), "Hq=6 to be a multiple"),
    (((2, 4, 5, 4), (2, 2, 7, 4), (2, 1, 7, 4)), "same number of heads"),
    (((5, 4), (7, 4), (7, 4)), "3 dims"),
])
def test_gqa_bad_heads_are_clear_errors(shapes, message):
    query, key, value = (randn(*s, seed=i) for i, s in enumerate(shapes))
    for need_weights in (True, False):
        with pytest.raises(ValueError, match=message):
            scaled_dot_product_attention(query, key, value, enable_gqa=True, need_weights=need_weights)
    with pytest.raises(TypeError, match="enable_gqa to be a bool"):
        scaled_dot_product_attention(query, query, query, enable_gqa="yes")
