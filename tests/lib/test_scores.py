"""attnlib.scores against torch.nn.functional.linear and einsum."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib import QKVProjection, dot_product_scores, project
from tests.lib.tensors import randn, tol

DTYPES = [torch.float64, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("x_shape", [(8,), (5, 8), (2, 5, 8), (2, 3, 5, 8)], ids=str)
def test_project_equals_linear(x_shape, dtype):
    x, weight, bias = randn(*x_shape, dtype=dtype, seed=1), randn(8, 4, dtype=dtype, seed=2), randn(4, dtype=dtype)
    # nn.Linear stores the transpose: F.linear(x, Wᵀ, b) = x W + b
    torch.testing.assert_close(project(x, weight, bias), F.linear(x, weight.T, bias), **tol(dtype))
    torch.testing.assert_close(project(x, weight), F.linear(x, weight.T), **tol(dtype))
    assert project(x, weight).dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_dot_product_scores_are_all_pairwise_dot_products(dtype):
    query, key = randn(2, 3, 4, 8, dtype=dtype, seed=3), randn(2, 3, 6, 8, dtype=dtype, seed=4)
    scores = dot_product_scores(query, key)
    assert scores.shape == (2, 3, 4, 6) and scores.dtype == dtype
    torch.testing.assert_close(scores, torch.einsum("bhqd,bhkd->bhqk", query, key), **tol(dtype))
    assert torch.isclose(scores[1, 2, 3, 5], torch.dot(query[1, 2, 3], key[1, 2, 5]))


def test_dot_product_scores_broadcast_batch_dims():
    query, key = randn(2, 3, 4, 8, seed=5), randn(6, 8, seed=6)
    torch.testing.assert_close(dot_product_scores(query, key), torch.einsum("bhqd,kd->bhqk", query, key),
                               **tol(torch.float64))


@pytest.mark.parametrize("bias", [False, True])
def test_qkv_projection_uses_its_three_weights(bias):
    torch.manual_seed(0)
    proj = QKVProjection(8, 4, 6, bias=bias).double()
    if bias:
        with torch.no_grad():
            for b in (proj.b_q, proj.b_k, proj.b_v):
                b.normal_()
    x = randn(2, 5, 8, seed=7)
    q, k, v = proj(x)
    assert (q.shape, k.shape, v.shape) == ((2, 5, 4), (2, 5, 4), (2, 5, 6))
    for out, w, b in ((q, proj.w_q, proj.b_q), (k, proj.w_k, proj.b_k), (v, proj.w_v, proj.b_v)):
        torch.testing.assert_close(out, F.linear(x, w.T, b), **tol(torch.float64))


def test_qkv_projection_defaults_and_initialisation_bound():
    torch.manual_seed(0)
    proj = QKVProjection(16, 4)
    assert proj.w_v.shape == (16, 4) and proj.b_q is None
    bound = 16**-0.5
    for w in (proj.w_q, proj.w_k, proj.w_v):
        assert w.abs().max() <= bound and w.std() > bound / 4  # uniform in ±1/√D, not all zero
