"""attnlib.linear: both forms and the weights against explicit loops over (query, key) pairs, written from the
formula; the bound on any query's weight against weights of many queries, and its limit."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.examples import running_example
from attnlib.linear import (
    elu_feature_map,
    linear_attention,
    linear_attention_recurrent,
    linear_attention_weights,
    max_weight_bound,
)
from tests.lib.tensors import randn, tol


def _by_loops(query, key, value, is_causal, eps=1e-6):
    """o_i = Σ_j sim(q_i, k_j) v_j / (Σ_j sim(q_i, k_j) + eps), sim = (elu(q) + 1)·(elu(k) + 1), one pair at a time."""
    lq, lk = query.shape[0], key.shape[0]
    out = torch.zeros(lq, value.shape[1], dtype=query.dtype)
    for i in range(lq):
        total, norm = torch.zeros(value.shape[1], dtype=query.dtype), 0.0
        for j in range(i + 1 if is_causal else lk):
            sim = float((F.elu(query[i]) + 1) @ (F.elu(key[j]) + 1))
            total += sim * value[j]
            norm += sim
        out[i] = total / (norm + eps)
    return out


@pytest.mark.parametrize("is_causal, lq, lk", [(False, 5, 9), (False, 7, 7), (True, 8, 8), (True, 1, 1)])
def test_parallel_form_equals_an_explicit_loop(is_causal, lq, lk):
    q, k, v = randn(lq, 4, seed=1), randn(lk, 4, seed=2), randn(lk, 3, seed=3)
    torch.testing.assert_close(linear_attention(q, k, v, is_causal=is_causal), _by_loops(q, k, v, is_causal),
                               **tol(torch.float64))


@pytest.mark.parametrize("lq, lk", [(6, 6), (1, 1), (9, 9)])
def test_recurrent_form_equals_an_explicit_loop(lq, lk):
    q, k, v = randn(2, lq, 3, seed=10), randn(2, lk, 3, seed=11), randn(2, lk, 5, seed=12)
    expected = torch.stack([_by_loops(q[b], k[b], v[b], is_causal=True) for b in range(2)])
    torch.testing.assert_close(linear_attention_recurrent(q, k, v), expected, **tol(torch.float64))


@pytest.mark.parametrize("is_causal", [False, True])
def test_weights_equal_the_formula_pair_by_pair(is_causal):
    q, k = randn(5, 3, seed=13), randn(5, 3, seed=14)
    sim = torch.tensor([[float((F.elu(q[i]) + 1) @ (F.elu(k[j]) + 1)) if j <= i or not is_causal else 0.0
                         for j in range(5)] for i in range(5)], dtype=torch.float64)
    torch.testing.assert_close(linear_attention_weights(q, k, is_causal=is_causal, eps=1e-300),
                               sim / sim.sum(dim=-1, keepdim=True), **tol(torch.float64))


@settings(max_examples=40, deadline=None)
@given(batch=st.lists(st.integers(1, 3), max_size=2), length=st.integers(1, 24), dk=st.integers(1, 8),
       dv=st.integers(1, 8), seed=st.integers(0, 2**16))
def test_recurrent_form_equals_the_parallel_causal_form(batch, length, dk, dv, seed):
    q, k, v = randn(*batch, length, dk, seed=seed), randn(*batch, length, dk, seed=seed + 1), randn(
        *batch, length, dv, seed=seed + 2)
    torch.testing.assert_close(linear_attention_recurrent(q, k, v), linear_attention(q, k, v, is_causal=True),
                               **tol(torch.float64))


def test_weights_reproduce_the_output_and_are_a_distribution():
    q, k, v = randn(2, 6, 5, seed=4), randn(2, 6, 5, seed=5), randn(2, 6, 3, seed=6)
    for is_causal in (False, True):
        weights = linear_attention_weights(q, k, is_causal=is_causal, eps=1e-12)
        torch.testing.assert_close(weights @ v, linear_attention(q, k, v, is_causal=is_causal, eps=1e-12),
                                   **tol(torch.float64))
        torch.testing.assert_close(weights.sum(dim=-1), torch.ones(2, 6, dtype=torch.float64), **tol(torch.float64))
        assert (weights[..., 0] > 0).all()  # elu + 1 > 0: every visible key gets some weight
    assert linear_attention_weights(q, k, is_causal=True).triu(1).eq(0).all()


def test_feature_map_is_positive_and_the_identity_plus_one_above_zero():
    x = torch.linspace(-30, 5, 200, dtype=torch.float64)
    phi = elu_feature_map(x)
    assert (phi > 0).all()
    torch.testing.assert_close(phi[x > 0], x[x > 0] + 1)
    torch.testing.assert_close(phi[x <= 0], torch.exp(x[x <= 0]))


def test_a_custom_feature_map_and_float32():
    q, k, v = randn(3, 4, dtype=torch.float32, seed=7), randn(3, 4, dtype=torch.float32, seed=8), randn(
        3, 2, dtype=torch.float32, seed=9)
    out = linear_attention(q, k, v, feature_map=torch.exp)  # φ = exp: not softmax (exp(q)·exp(k) ≠ exp(q·k))
    weights = torch.exp(q) @ torch.exp(k).T
    torch.testing.assert_close(out, (weights / (weights.sum(-1, keepdim=True) + 1e-6)) @ v, **tol(torch.float32))


def test_bad_input():
    with pytest.raises(ValueError, match="Lq == Lk"):
        linear_attention(randn(3, 4), randn(5, 4), randn(5, 2), is_causal=True)
    with pytest.raises(ValueError, match="Dk=4"):
        linear_attention(randn(3, 4), randn(3, 5), randn(3, 2))
    with pytest.raises(ValueError, match="eps"):
        linear_attention_recurrent(randn(3, 4), randn(3, 4), randn(3, 2), eps=0.0)


@settings(max_examples=40, deadline=None)
@given(lk=st.integers(1, 10), dk=st.integers(1, 6), key_scale=st.floats(0.1, 5.0), seed=st.integers(0, 2**16))
def test_no_query_gives_a_key_more_than_the_bound(lk, dk, key_scale, seed):
    k = randn(lk, dk, seed=seed) * key_scale
    bound = max_weight_bound(k)
    for query_scale in (0.1, 1.0, 10.0, 1000.0):
        q = randn(20, dk, seed=seed + 1) * query_scale  # 20 queries, ever larger
        weights = linear_attention_weights(q, k, eps=1e-300)
        assert (weights <= bound + 1e-12).all()
    if lk == 1:
        torch.testing.assert_close(bound, torch.ones(1, dtype=torch.float64))


def test_the_bound_is_reached_on_the_running_example_and_softmax_has_none():
    ex = running_example()  # no positions: the verb's query asks for an actor only
    x = torch.from_numpy(ex.x)
    q, k = x @ torch.from_numpy(ex.w_q), x @ torch.from_numpy(ex.w_k)
    sat, cat = ex.tokens.index("sat"), ex.tokens.index("cat")
    # φ(k_cat) = (2, 1, 1, 1) against (1, 1, 1, 1) or (1, 2, 1, 1): each other key has min ratio 1/2
    torch.testing.assert_close(max_weight_bound(k)[cat], torch.tensor(1 / (1 + 5 / 2), dtype=torch.float64))
    weights = [float(linear_attention_weights(s * q, k, eps=1e-300)[sat, cat]) for s in (1.0, 10.0, 1e6)]
    assert weights == sorted(weights) and abs(weights[-1] - 1 / 3.5) < 1e-5
    softmax = torch.softmax(1e3 * q @ k.T, dim=-1)[sat, cat]
    assert softmax > 1 - 1e-12  # a scaled query makes softmax's lookup hard


def test_the_bound_needs_positive_features():
    with pytest.raises(ValueError, match="positive"):
        max_weight_bound(randn(4, 3), feature_map=lambda x: x)
    with pytest.raises(ValueError, match=r"\(\.\.\., Lk, Dk\)"):
        max_weight_bound(randn(4))
