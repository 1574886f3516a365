"""attnlib.softmax against torch.softmax, and the masks against torch's own causal mask and truncation."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlib import apply_mask, causal_mask, padding_mask, scaled_dot_product_attention, softmax
from attnlib.softmax import _explicit_softmax, attention_entropy
from tests.lib.tensors import randn, random_bool_mask, tol

ALL_FLOATS = [torch.float64, torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dim", [-1, 0, 1, 2])
@pytest.mark.parametrize("dtype", ALL_FLOATS, ids=str)
def test_softmax_equals_torch(dtype, dim):
    x = randn(3, 4, 5, dtype=dtype, seed=1) * 4
    out = softmax(x, dim=dim)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, torch.softmax(x.double(), dim=dim).to(dtype), **tol(dtype))


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0, 10.0])
def test_temperature_divides_the_logits(temperature):
    x = randn(4, 6, seed=2)
    torch.testing.assert_close(softmax(x, temperature=temperature), torch.softmax(x / temperature, -1),
                               **tol(torch.float64))


def test_low_temperature_tends_to_argmax_and_high_to_uniform():
    x = randn(4, 6, seed=3)
    cold, hot = softmax(x, temperature=1e-3), softmax(x, temperature=1e6)
    torch.testing.assert_close(cold, F.one_hot(x.argmax(-1), 6).double(), atol=1e-6, rtol=0)
    torch.testing.assert_close(hot, torch.full_like(x, 1 / 6), atol=1e-5, rtol=0)


def test_partly_masked_rows_equal_torch_and_fully_masked_rows_are_zero():
    x = randn(3, 5, seed=4)
    x[0, 1:3] = float("-inf")  # partly masked
    x[2] = float("-inf")  # fully masked: torch gives NaN, attnlib zeros
    out = softmax(x)
    torch.testing.assert_close(out[:2], torch.softmax(x[:2], -1), **tol(torch.float64))
    assert out[0, 1:3].eq(0).all() and out[2].eq(0).all()


@pytest.mark.parametrize("lq, lk", [(1, 1), (4, 4), (3, 6), (6, 3)])
def test_causal_mask_is_lower_triangle(lq, lk):
    mask = causal_mask(lq, lk)
    assert mask.dtype == torch.bool and mask.shape == (lq, lk)
    for i in range(lq):
        assert mask[i].tolist() == [j <= i for j in range(lk)]


@pytest.mark.parametrize("length", [1, 5, 9])
def test_causal_mask_agrees_with_torchs_square_subsequent_mask(length):
    theirs = nn.Transformer.generate_square_subsequent_mask(length)  # 0 = may attend, -inf = hidden
    assert torch.equal(causal_mask(length), theirs == 0)


def test_causal_mask_is_created_on_the_requested_device():
    assert causal_mask(3, device="cpu").device == torch.device("cpu")
    assert causal_mask(3).device == torch.device("cpu")


def test_padding_mask_marks_the_first_lengths_keys():
    lengths = [3, 0, 5]
    mask = padding_mask(lengths, 5)
    assert mask.shape == (3, 1, 1, 5) and mask.dtype == torch.bool
    for b, n in enumerate(lengths):
        assert mask[b, 0, 0].tolist() == [j < n for j in range(5)]
    assert torch.equal(mask, padding_mask(torch.tensor(lengths), 5))


@pytest.mark.parametrize("need_weights", [True, False])
def test_padding_equals_truncating_the_keys(need_weights):
    lengths = [6, 2, 4]
    query, key, value = randn(3, 2, 4, 8, seed=5), randn(3, 2, 6, 8, seed=6), randn(3, 2, 6, 5, seed=7)
    out, _ = scaled_dot_product_attention(query, key, value, attn_mask=padding_mask(lengths, 6),
                                          need_weights=need_weights)
    for b, n in enumerate(lengths):
        alone = F.scaled_dot_product_attention(query[b], key[b, :, :n], value[b, :, :n])
        torch.testing.assert_close(out[b], alone, **tol(torch.float64))


def test_apply_mask_bool_hides_with_minus_inf_and_keeps_the_rest():
    scores, keep = randn(2, 4, 6, seed=8), random_bool_mask(2, 4, 6, seed=9)
    masked = apply_mask(scores, keep)
    assert masked[~keep].eq(float("-inf")).all()
    assert torch.equal(masked[keep], scores[keep])


def test_apply_mask_float_adds_and_causal_equals_causal_mask():
    scores, additive = randn(4, 6, seed=10), randn(4, 6, seed=11)
    torch.testing.assert_close(apply_mask(scores, additive), scores + additive, rtol=0, atol=0)
    assert torch.equal(apply_mask(scores, is_causal=True), apply_mask(scores, causal_mask(4, 6)))
    assert apply_mask(scores) is scores


def test_apply_mask_casts_float_masks_to_the_scores_dtype():
    scores = randn(4, 6, seed=12, dtype=torch.float32)
    assert apply_mask(scores, randn(4, 6, seed=13)).dtype == torch.float32


def test_fused_and_explicit_softmax_paths_agree():
    """Rows with a finite max take torch.softmax; the explicit steps give the same weights."""
    x = torch.randn(3, 5, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) * 30
    fused = softmax(x, dim=-1)
    explicit = _explicit_softmax(x, -1, x.amax(dim=-1, keepdim=True))
    torch.testing.assert_close(fused, explicit, rtol=1e-12, atol=1e-15)
    masked = x.clone()
    masked[1, 2] = float("-inf")  # one fully masked row sends the whole call down the explicit path
    out = softmax(masked, dim=-1)
    assert torch.equal(out[1, 2], torch.zeros(7, dtype=torch.float64))
    torch.testing.assert_close(out[0], fused[0], rtol=1e-12, atol=1e-15)


# --- the entropy of the weights -----------------------------------------------------------------------------

def test_attention_entropy_equals_torch_categorical():
    weights = torch.softmax(randn(2, 3, 5, 7, seed=1) * 3, dim=-1)
    expected = torch.distributions.Categorical(probs=weights).entropy()  # (2, 3, 5)
    torch.testing.assert_close(attention_entropy(weights), expected, **tol(torch.float64))
    torch.testing.assert_close(attention_entropy(weights.transpose(-2, -1), dim=-2), expected, **tol(torch.float64))


def test_attention_entropy_extremes():
    uniform = torch.full((4, 8), 1 / 8, dtype=torch.float64)
    torch.testing.assert_close(attention_entropy(uniform), torch.full((4,), math.log(8), dtype=torch.float64))
    one_hot = torch.eye(5, dtype=torch.float64)
    assert attention_entropy(one_hot).eq(0).all()  # 0 · log 0 counts as 0, not NaN
    masked = softmax(torch.full((2, 3), float("-inf")))  # a fully masked row: zeros
    assert attention_entropy(masked).eq(0).all()
    with pytest.raises(TypeError, match="floating-point"):
        attention_entropy(torch.ones(3, dtype=torch.int64))
