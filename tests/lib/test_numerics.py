"""Adversarial numerics: huge logits, half precision near its range, fully masked rows. No NaN, no inf."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from attnlib import numpy_ops, scaled_dot_product_attention, softmax
from tests.lib.tensors import randn, random_bool_mask

PATHS = pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "fast"])


def _finite(*tensors):
    return all(t is None or bool(torch.isfinite(t).all()) for t in tensors)


@pytest.mark.parametrize("magnitude", [1e4, 1e6])
def test_softmax_of_huge_float32_logits(magnitude):
    x = randn(4, 16, seed=1, dtype=torch.float32) * magnitude
    naive = torch.exp(x) / torch.exp(x).sum(-1, keepdim=True)  # what the max-subtraction avoids
    assert not _finite(naive)
    out = softmax(x)
    assert _finite(out)
    torch.testing.assert_close(out.sum(-1), torch.ones(4), atol=1e-6, rtol=0)
    torch.testing.assert_close(out, torch.softmax(x.double(), -1).float(), atol=1e-6, rtol=1e-5)


@PATHS
def test_attention_with_float32_scores_of_magnitude_1e4(need_weights):
    query, key, value = randn(2, 4, 16, seed=2) * 100, randn(2, 6, 16, seed=3) * 100, randn(2, 6, 3, seed=4)
    scores = query @ key.transpose(-1, -2) / 4  # scaled scores with standard deviation 1e4
    assert scores.abs().max() > 1e4
    out, weights = scaled_dot_product_attention(query.float(), key.float(), value.float(), need_weights=need_weights)
    assert _finite(out, weights)
    expected = F.scaled_dot_product_attention(query, key, value).float()
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


def _half_inputs(dtype, seed=5):
    """Query and key with two features of 250 (raw scores ~1.3e5, beyond float16's 65504) and values up to
    60000; the random features keep the softmax from saturating, so the output is a real mixture."""
    query, key = randn(2, 2, 5, 8, seed=seed), randn(2, 2, 7, 8, seed=seed + 1)
    query[..., :2], key[..., :2] = 250.0, 250.0
    value = torch.rand(2, 2, 7, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    value = 200 + value * 59_800
    return tuple(t.to(dtype) for t in (query, key, value))


@PATHS
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_near_its_range(dtype, need_weights):
    query, key, value = _half_inputs(dtype)
    assert not _finite(query[0, 0] @ key[0, 0].T) or dtype == torch.bfloat16  # naive float16 scores overflow
    out, weights = scaled_dot_product_attention(query, key, value, need_weights=need_weights)
    assert out.dtype == dtype and _finite(out, weights)
    expected, weights64 = scaled_dot_product_attention(query.double(), key.double(), value.double())
    assert weights64.amax() < 0.99  # not saturated: a genuine weighted mixture of the values
    torch.testing.assert_close(out.double(), expected, rtol=1e-2, atol=0)
    if need_weights:
        torch.testing.assert_close(weights.double(), weights64, rtol=0, atol=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_softmax_of_large_logits(dtype):
    x = (randn(3, 10, seed=6) * 3e4).clamp(-6e4, 6e4).to(dtype)
    out = softmax(x)
    assert out.dtype == dtype and _finite(out)
    torch.testing.assert_close(out.double(), torch.softmax(x.double(), -1), atol=1e-2, rtol=0)


def _fully_masked(kind, dtype):
    """A mask (B=2, 1, Lq=4, Lk=6) under which query 1 of batch 0 and queries 0-2 of batch 1 see no key."""
    keep = random_bool_mask(2, 1, 4, 6, seed=7)
    keep[0, 0, 1] = False
    keep[1, 0, :3] = False
    if kind == "bool":
        return keep, keep
    return torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, float("-inf")), keep


@PATHS
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_fully_masked_rows_give_zeros_not_nan(dtype, kind, need_weights):
    query, key, value = (randn(2, 3, *s, seed=8 + i, dtype=dtype) for i, s in enumerate([(4, 8), (6, 8), (6, 5)]))
    mask, keep = _fully_masked(kind, dtype)
    out, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
    assert _finite(out, weights)
    dead = ~keep.any(-1).expand(2, 3, 4)  # (B, H, Lq)
    assert dead.sum() == (1 + 3) * 3  # the four queries this test means to cut off, in each of 3 heads
    assert out[dead].eq(0).all() and out[~dead].ne(0).any()
    if need_weights:
        assert weights[dead].eq(0).all()
        row_sums = weights[~dead].sum(-1).double()
        torch.testing.assert_close(row_sums, torch.ones_like(row_sums), atol=1e-2, rtol=0)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_gradients_stay_finite_through_fully_masked_rows(kind):
    leaves = [randn(2, 3, *s, seed=11 + i).requires_grad_(True) for i, s in enumerate([(4, 8), (6, 8), (6, 5)])]
    mask, _ = _fully_masked(kind, torch.float64)
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(*leaves, attn_mask=mask, need_weights=need_weights)
        grads = torch.autograd.grad(out.sum(), leaves)
        assert _finite(*grads)


def test_numpy_mirror_handles_the_same_adversarial_inputs():
    x = randn(4, 16, seed=1, dtype=torch.float32).numpy() * 1e4
    assert np.isfinite(numpy_ops.softmax(x)).all()
    out, weights = numpy_ops.scaled_dot_product_attention(*(t.numpy() for t in _half_inputs(torch.float16)))
    assert out.dtype == np.float16 and np.isfinite(out).all() and np.isfinite(weights).all()
    mask, keep = _fully_masked("bool", torch.float64)
    query, key, value = (randn(2, 3, *shape, seed=i).numpy() for i, shape in enumerate([(4, 8), (6, 8), (6, 5)]))
    out, _ = numpy_ops.scaled_dot_product_attention(query, key, value, attn_mask=mask.numpy())
    dead = ~keep.any(-1).expand(2, 3, 4).numpy()
    assert np.isfinite(out).all() and (out[dead] == 0).all() and (out[~dead] != 0).any()
