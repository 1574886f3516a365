"""Validate once: a public call checks each tensor it is given once, then computes with unchecked kernels.

Every checking function of ``attnlib._checks`` is wrapped, wherever attnlib imported it, by one that records
which tensors it was handed. A call into ``_checks`` from outside it counts as one check of each tensor passed
(the checks it makes inside ``_checks`` are part of that one).
"""

from __future__ import annotations

import collections
import inspect
import sys

import numpy as np
import pytest
import torch

import attnlib
from attnlib import _checks, linear, numpy_ops
from attnlib.flash import flash_attention

CHECKS = {name: f for name, f in vars(_checks).items()
          if inspect.isfunction(f) and f.__module__ == _checks.__name__ and not name.startswith("_")}


@pytest.fixture
def entries(monkeypatch):
    """id(tensor) -> the names of the checks that received it from outside attnlib._checks."""
    seen = collections.defaultdict(list)

    def counting(name, check):
        def wrapper(*args, **kwargs):
            if sys._getframe(1).f_globals.get("__name__") != _checks.__name__:
                for arg in (*args, *kwargs.values()):
                    if isinstance(arg, (torch.Tensor, np.ndarray)):
                        seen[id(arg)].append(name)
            return check(*args, **kwargs)
        return wrapper

    for module in [m for name, m in sys.modules.items() if name.startswith("attnlib")]:
        for name, check in CHECKS.items():
            if getattr(module, name, None) is check:
                monkeypatch.setattr(module, name, counting(name, check))
    return seen


def _qkv(hq=4, hkv=4, numpy=False):
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, hq, 5, 8, generator=gen), torch.randn(2, hkv, 7, 8, generator=gen), \
        torch.randn(2, hkv, 7, 3, generator=gen)
    return tuple(t.numpy() for t in (q, k, v)) if numpy else (q, k, v)


def _checked_once(entries, **tensors):
    for name, t in tensors.items():
        assert len(entries[id(t)]) == 1, f"{name} checked by {entries[id(t)]}"


def test_the_counting_wrappers_are_in_place(entries):
    q, k, _ = _qkv()
    attnlib.dot_product_scores(q, k)
    assert entries[id(q)] == ["check_scores_args"]


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("hkv", [4, 2])
def test_sdpa_checks_each_tensor_once(entries, need_weights, hkv):
    query, key, value = _qkv(hkv=hkv)
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) < 0.7
    attnlib.scaled_dot_product_attention(query, key, value, mask, enable_gqa=hkv != 4, need_weights=need_weights)
    _checked_once(entries, query=query, key=key, value=value, attn_mask=mask)


@pytest.mark.parametrize("hkv", [4, 2])
def test_the_numpy_twin_checks_each_array_once(entries, hkv):
    query, key, value = _qkv(hkv=hkv, numpy=True)
    mask = np.tril(np.ones((5, 7), dtype=bool))
    numpy_ops.scaled_dot_product_attention(query, key, value, mask, enable_gqa=hkv != 4)
    _checked_once(entries, query=query, key=key, value=value, attn_mask=mask)


@pytest.mark.parametrize("num_kv_heads", [None, 2])
def test_multihead_forward_checks_each_tensor_once(entries, num_kv_heads):
    torch.manual_seed(0)
    layer = attnlib.MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads)
    query, key, value = torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.randn(2, 7, 16)
    mask = torch.ones(7, dtype=torch.bool)
    layer(query, key, value, mask)
    _checked_once(entries, query=query, key=key, value=value, attn_mask=mask)


def test_flash_attention_checks_each_tensor_once(entries):
    query, key, value = _qkv()
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) < 0.7
    flash_attention(query, key, value, mask, block_size=2)
    _checked_once(entries, query=query, key=key, value=value, attn_mask=mask)


def test_the_steps_check_each_tensor_once(entries):
    query, key, value = _qkv()
    x, w = torch.randn(5, 8), torch.randn(8, 4)
    torch.manual_seed(0)
    layer = attnlib.QKVProjection(8, 4)
    scores = attnlib.dot_product_scores(query, key)
    weights = torch.softmax(scores, dim=-1)
    calls = [(lambda: attnlib.dot_product_scores(query, key), {"query": query, "key": key}),
             (lambda: attnlib.weighted_sum(weights, value), {"weights": weights, "value": value}),
             (lambda: attnlib.project(x, w), {"x": x, "weight": w}),
             (lambda: layer(x), {"x": x}),
             (lambda: attnlib.apply_mask(scores, is_causal=True), {"scores": scores})]
    for call, tensors in calls:
        entries.clear()
        call()
        _checked_once(entries, **tensors)


def test_linear_attention_checks_each_tensor_once(entries):
    query, key, value = _qkv()
    causal_query = torch.randn(2, 4, 7, 8, generator=torch.Generator().manual_seed(1))  # Lq = Lk
    calls = [(lambda: linear.linear_attention(query, key, value), {"query": query, "key": key, "value": value}),
             (lambda: linear.linear_attention_recurrent(causal_query, key, value),
              {"query": causal_query, "key": key, "value": value}),
             (lambda: linear.linear_attention_weights(query, key), {"query": query, "key": key}),
             (lambda: linear.max_weight_bound(key), {"key": key})]
    for call, tensors in calls:
        entries.clear()
        call()
        _checked_once(entries, **tensors)
