"""Hypothesis property tests: the invariants attention must keep for any input."""

from __future__ import annotations

import hypothesis.extra.numpy as hnp
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib import scaled_dot_product_attention, softmax

PROPERTY = settings(max_examples=50, deadline=None, derandomize=True)  # modest: the CPU is shared
VALUES = st.floats(-5, 5, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def attention_inputs(draw, masked=True):
    """query (B, Lq, Dk), key (B, Lk, Dk), value (B, Lk, Dv) in float64, and a mask (B, Lq, Lk) or None.

    The mask is bool (True = may attend) or float (finite values added, ``-inf`` hides a key).
    """
    b, lq, lk = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    dk, dv = draw(st.integers(1, 6)), draw(st.integers(1, 4))
    query, key, value = (torch.from_numpy(draw(hnp.arrays("float64", shape, elements=VALUES)))
                         for shape in [(b, lq, dk), (b, lk, dk), (b, lk, dv)])
    kind = draw(st.sampled_from(["bool", "float", "none"] if masked else ["none"]))
    if kind == "none":
        return query, key, value, None
    keep = torch.from_numpy(draw(hnp.arrays(bool, (b, lq, lk))))
    if kind == "bool":
        return query, key, value, keep
    additive = torch.from_numpy(draw(hnp.arrays("float64", (b, lq, lk), elements=VALUES)))
    return query, key, value, additive.masked_fill(~keep, float("-inf"))


def _keep(mask):
    """Where a query may attend: a bool mask itself, or where a float mask is not -inf."""
    return mask if mask.dtype == torch.bool else mask > float("-inf")


def _allowed_rows(mask, query, key):
    if mask is None:
        return torch.ones(*query.shape[:-1], dtype=torch.bool)
    return _keep(mask).expand(*query.shape[:-1], key.shape[-2]).any(dim=-1)  # (B, Lq): at least one key visible


@PROPERTY
@given(attention_inputs())
def test_rows_of_weights_sum_to_one_or_zero_when_fully_masked(inputs):
    query, key, value, mask = inputs
    _, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask)
    expected = _allowed_rows(mask, query, key).double()
    torch.testing.assert_close(weights.sum(dim=-1), expected, atol=1e-12, rtol=0)
    assert (weights >= 0).all()


@PROPERTY
@given(attention_inputs())
def test_masked_keys_get_exactly_zero_weight_and_dead_rows_zero_output(inputs):
    query, key, value, mask = inputs
    for need_weights in (True, False):
        out, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        assert torch.isfinite(out).all()
        dead = ~_allowed_rows(mask, query, key)
        assert out[dead].eq(0).all()
        if need_weights and mask is not None:
            assert weights[~_keep(mask).expand_as(weights)].eq(0).all()


@PROPERTY
@given(hnp.arrays("float64", hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
                  elements=st.floats(-50, 50, allow_nan=False, width=64)),
       st.floats(-1e3, 1e3, allow_nan=False), st.floats(0.1, 10))
def test_softmax_is_shift_invariant(x, shift, temperature):
    x = torch.from_numpy(x)
    torch.testing.assert_close(softmax(x + shift, temperature=temperature), softmax(x, temperature=temperature),
                               atol=1e-9, rtol=1e-7)


@PROPERTY
@given(attention_inputs(), st.randoms(use_true_random=False))
def test_permuting_keys_and_values_together_leaves_the_output_unchanged(inputs, rng):
    query, key, value, mask = inputs
    perm = torch.tensor(rng.sample(range(key.shape[-2]), key.shape[-2]))
    permuted_mask = None if mask is None else mask[..., perm]
    out, weights = scaled_dot_product_attention(query, key, value, attn_mask=mask)
    out_p, weights_p = scaled_dot_product_attention(query, key[:, perm], value[:, perm], attn_mask=permuted_mask)
    torch.testing.assert_close(out_p, out, atol=1e-10, rtol=1e-9)
    torch.testing.assert_close(weights_p, weights[..., perm], atol=1e-12, rtol=1e-10)


@PROPERTY
@given(attention_inputs(), st.randoms(use_true_random=False))
def test_permuting_queries_permutes_the_output_rows(inputs, rng):
    query, key, value, mask = inputs
    perm = torch.tensor(rng.sample(range(query.shape[-2]), query.shape[-2]))
    permuted_mask = None if mask is None else mask[:, perm]
    for need_weights in (True, False):
        out, _ = scaled_dot_product_attention(query, key, value, attn_mask=mask, need_weights=need_weights)
        out_p, _ = scaled_dot_product_attention(query[:, perm], key, value, attn_mask=permuted_mask,
                                                need_weights=need_weights)
        torch.testing.assert_close(out_p, out[:, perm], atol=1e-10, rtol=1e-9)


@PROPERTY
@given(attention_inputs(masked=False))
def test_each_output_row_lies_within_the_range_of_the_values(inputs):
    query, key, value, _ = inputs
    out, _ = scaled_dot_product_attention(query, key, value)  # a convex combination of value rows
    low, high = value.amin(dim=-2, keepdim=True), value.amax(dim=-2, keepdim=True)
    assert (out >= low - 1e-12).all() and (out <= high + 1e-12).all()
