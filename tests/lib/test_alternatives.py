"""attnlib.alternatives: additive and bilinear scores, Nadaraya–Watson kernel regression."""

import pytest
import torch

from attnlib import dot_product_scores, scaled_dot_product_attention
from attnlib.alternatives import additive_scores, bilinear_scores, nadaraya_watson
from tests.lib.tensors import randn


def test_additive_scores_equal_a_loop():
    query, key = randn(2, 3, 5, seed=0), randn(2, 4, 6, seed=1)  # Dq = 5 differs from Dk = 6
    w_q, w_k, v = randn(5, 7, seed=2), randn(6, 7, seed=3), randn(7, seed=4)
    scores = additive_scores(query, key, w_q, w_k, v)
    assert scores.shape == (2, 3, 4)
    for b in range(2):
        for i in range(3):
            for j in range(4):
                expected = v @ torch.tanh(query[b, i] @ w_q + key[b, j] @ w_k)
                torch.testing.assert_close(scores[b, i, j], expected)


def test_additive_scores_match_a_torch_module():
    torch.manual_seed(0)
    net_q, net_k = torch.nn.Linear(4, 3, bias=False).double(), torch.nn.Linear(4, 3, bias=False).double()
    net_v = torch.nn.Linear(3, 1, bias=False).double()
    query, key = randn(5, 4, seed=5), randn(6, 4, seed=6)
    with torch.no_grad():
        expected = net_v(torch.tanh(net_q(query)[:, None] + net_k(key)[None])).squeeze(-1)
        got = additive_scores(query, key, net_q.weight.T, net_k.weight.T, net_v.weight[0])
    torch.testing.assert_close(got, expected)


def test_bilinear_with_identity_is_the_dot_product():
    query, key = randn(3, 4, seed=7), randn(5, 4, seed=8)
    torch.testing.assert_close(bilinear_scores(query, key, torch.eye(4, dtype=torch.float64)),
                               dot_product_scores(query, key))


def test_dot_product_attention_is_bilinear_in_x():
    x, w_q, w_k = randn(6, 8, seed=9), randn(8, 4, seed=10), randn(8, 4, seed=11)
    torch.testing.assert_close(bilinear_scores(x, x, w_q @ w_k.T), dot_product_scores(x @ w_q, x @ w_k))


def test_nadaraya_watson_is_attention_with_a_distance_score():
    query, key, value = randn(2, 5, 3, seed=12), randn(2, 7, 3, seed=13), randn(2, 7, 2, seed=14)
    out, weights = nadaraya_watson(query, key, value, bandwidth=0.7)
    distance2 = ((query[:, :, None] - key[:, None]) ** 2).sum(-1)
    torch.testing.assert_close(weights, torch.softmax(-distance2 / (2 * 0.7**2), dim=-1))
    torch.testing.assert_close(out, weights @ value)
    # −‖q−k‖²/2σ² = q·k/σ² − ‖k‖²/2σ² − (a term constant in k): dot-product attention plus a key bias
    bias = -(key**2).sum(-1)[:, None, :] / (2 * 0.7**2)
    sdpa, _ = scaled_dot_product_attention(query, key, value, attn_mask=bias, scale=1 / 0.7**2)
    torch.testing.assert_close(out, sdpa)


def test_nadaraya_watson_bandwidth_limits():
    x = torch.linspace(0, 1, 9, dtype=torch.float64)[:, None]
    y = torch.sin(6 * x)
    narrow, _ = nadaraya_watson(x, x, y, bandwidth=1e-3)  # each query sees only its own key
    torch.testing.assert_close(narrow, y)
    wide, _ = nadaraya_watson(x, x, y, bandwidth=1e3)  # every key alike: the plain mean
    torch.testing.assert_close(wide, y.mean().expand_as(y), atol=1e-5, rtol=0)


def test_bad_input():
    q, k = randn(3, 4), randn(5, 4)
    with pytest.raises(ValueError, match=r"weight of shape \(Dq, Dk\) = \(4, 4\)"):
        bilinear_scores(q, k, randn(4, 3))
    with pytest.raises(ValueError, match="share Dh"):
        additive_scores(q, k, randn(4, 2), randn(4, 3), randn(3))
    with pytest.raises(ValueError, match="bandwidth"):
        nadaraya_watson(q, k, randn(5, 2), bandwidth=0.0)
    with pytest.raises(TypeError, match="dtype"):
        bilinear_scores(q, k.float(), torch.eye(4, dtype=torch.float64))
