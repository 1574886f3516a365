"""attnlib.linear: linear attention's parallel form against explicit loops, and its recurrent form against both."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.linear import elu_feature_map, linear_attention, linear_attention_recurrent, linear_attention_weights
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
