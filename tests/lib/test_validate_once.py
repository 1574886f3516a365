"""Validate once: a public call enters validation exactly once, then computes unchecked.

Validation is the code of ``attnlib/_checks.py`` (the shared helpers and the wrapper ``@checked`` puts around a
step) and each step's contract, a function of an attnlib module named ``check_...`` or ``require_...`` (private:
``_check_...``). A profiler records every entry into validation from code outside it: the call of a contract or of
a step's public function made by ``@checked``. Whatever runs inside validation is part of that one entry; a second
entry (e.g. an unchecked path that calls a public step) is a second validation. The tensors of an entry are the
arrays among its arguments, ``*args`` and ``**kwargs``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import attnlib
from attnlib import _checks, linear, numpy_ops
from attnlib.flash import flash_attention

CHECKS_FILE = _checks.__file__
ATTNLIB_DIR = str(Path(attnlib.__file__).parent)
CONTRACT = re.compile(r"_?(check|require)_")


def _validates(code) -> bool:
    """True for the code of _checks.py and of a contract (check_... or require_...) in an attnlib module."""
    return code.co_filename == CHECKS_FILE or (code.co_filename.startswith(ATTNLIB_DIR)
                                               and CONTRACT.match(code.co_name) is not None)


def _inside_validation(frame) -> bool:
    """True when a caller of ``frame``, however far up, is validation code."""
    caller = frame.f_back
    while caller is not None:
        if _validates(caller.f_code):
            return True
        caller = caller.f_back
    return False


def _arrays(frame) -> list:
    """The tensors and arrays a call received: its named arguments, then what its *args and **kwargs hold."""
    code, local = frame.f_code, frame.f_locals
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    values = [local[n] for n in names if n in local]
    flags = code.co_flags
    n = code.co_argcount + code.co_kwonlyargcount
    if flags & 0x04:  # CO_VARARGS
        values += list(local.get(code.co_varnames[n], ()))
        n += 1
    if flags & 0x08:  # CO_VARKEYWORDS
        values += list(local.get(code.co_varnames[n], {}).values())
    return [v for v in values if isinstance(v, (torch.Tensor, np.ndarray))]


class Entries:
    """The entries into validation from outside it while recording: (function name, its arrays)."""

    def __init__(self):
        self.calls: list[tuple[str, list]] = []

    def profile(self, frame, event, arg):
        if event == "call" and _validates(frame.f_code) and not _inside_validation(frame):
            self.calls.append((frame.f_code.co_name, _arrays(frame)))

    def record(self, call):
        self.calls.clear()
        sys.setprofile(self.profile)
        try:
            return call()
        finally:
            sys.setprofile(None)


@pytest.fixture
def entries():
    return Entries()


def _qkv(hq=4, hkv=4, numpy=False):
    gen = torch.Generator().manual_seed(0)
    q, k, v = torch.randn(2, hq, 5, 8, generator=gen), torch.randn(2, hkv, 7, 8, generator=gen), \
        torch.randn(2, hkv, 7, 3, generator=gen)
    return tuple(t.numpy() for t in (q, k, v)) if numpy else (q, k, v)


def _checked_once(entries, call, **tensors):
    """Run ``call``: it enters attnlib._checks exactly once, and that entry receives each of ``tensors``."""
    entries.record(call)
    assert len(entries.calls) == 1, f"expected one validation, got {[name for name, _ in entries.calls]}"
    name, received = entries.calls[0]
    for label, t in tensors.items():
        assert any(r is t for r in received), f"{label} not among the arrays {name} validated"


def test_the_profiler_sees_a_check(entries):
    q, k, _ = _qkv()
    entries.record(lambda: attnlib.dot_product_scores(q, k))
    assert [name for name, _ in entries.calls] == ["public"]
    assert entries.calls[0][1][0] is q and entries.calls[0][1][1] is k


def test_a_contract_called_by_a_method_is_one_entry_with_its_helpers_inside(entries):
    """QKVProjection.forward calls its contract itself, which calls the shared helpers: one entry."""
    torch.manual_seed(0)
    layer = attnlib.QKVProjection(8, 4)
    x = torch.randn(5, 8)
    entries.record(lambda: layer(x))
    assert len(entries.calls) == 1 and entries.calls[0][1][0] is x


def test_a_second_validation_is_counted(entries):
    """The unchecked path re-entering a public step is what this file exists to catch: it is seen."""
    q, k, _ = _qkv()

    def twice():
        scores = attnlib.dot_product_scores(q, k)
        return attnlib.softmax(scores)

    entries.record(twice)
    assert len(entries.calls) == 2


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("hkv", [4, 2])
def test_sdpa_checks_each_tensor_once(entries, need_weights, hkv):
    query, key, value = _qkv(hkv=hkv)
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) < 0.7
    _checked_once(entries, lambda: attnlib.scaled_dot_product_attention(
        query, key, value, mask, enable_gqa=hkv != 4, need_weights=need_weights),
        query=query, key=key, value=value, attn_mask=mask)


@pytest.mark.parametrize("hkv", [4, 2])
def test_the_numpy_twin_checks_each_array_once(entries, hkv):
    query, key, value = _qkv(hkv=hkv, numpy=True)
    mask = np.tril(np.ones((5, 7), dtype=bool))
    _checked_once(entries, lambda: numpy_ops.scaled_dot_product_attention(
        query, key, value, mask, enable_gqa=hkv != 4), query=query, key=key, value=value, attn_mask=mask)


@pytest.mark.parametrize("num_kv_heads", [None, 2])
def test_multihead_forward_checks_each_tensor_once(entries, num_kv_heads):
    torch.manual_seed(0)
    layer = attnlib.MultiHeadAttention(16, 4, num_kv_heads=num_kv_heads)
    query, key, value = torch.randn(2, 5, 16), torch.randn(2, 7, 16), torch.randn(2, 7, 16)
    mask = torch.ones(7, dtype=torch.bool)
    _checked_once(entries, lambda: layer(query, key, value, mask), query=query, key=key, value=value, attn_mask=mask)


def test_flash_attention_checks_each_tensor_once(entries):
    query, key, value = _qkv()
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) < 0.7
    _checked_once(entries, lambda: flash_attention(query, key, value, mask, block_size=2),
                  query=query, key=key, value=value, attn_mask=mask)


def test_the_steps_check_each_tensor_once(entries):
    query, key, value = _qkv()
    x, w = torch.randn(5, 8), torch.randn(8, 4)
    torch.manual_seed(0)
    layer = attnlib.QKVProjection(8, 4)
    scores = attnlib.dot_product_scores(query, key)
    weights = torch.softmax(scores, dim=-1)
    calls = [(lambda: attnlib.dot_product_scores(query, key), {"query": query, "key": key}),
             (lambda: attnlib.weighted_sum(weights, value), {"weights": weights, "value": value}),
             (lambda: attnlib.softmax(scores), {"x": scores}),
             (lambda: attnlib.scale_scores(scores, 8), {"scores": scores}),
             (lambda: attnlib.project(x, w), {"x": x, "weight": w}),
             (lambda: layer(x), {"x": x}),
             (lambda: attnlib.apply_mask(scores, is_causal=True), {"scores": scores})]
    for call, tensors in calls:
        _checked_once(entries, call, **tensors)


def test_linear_attention_checks_each_tensor_once(entries):
    query, key, value = _qkv()
    causal_query = torch.randn(2, 4, 7, 8, generator=torch.Generator().manual_seed(1))  # Lq = Lk
    calls = [(lambda: linear.linear_attention(query, key, value), {"query": query, "key": key, "value": value}),
             (lambda: linear.linear_attention_recurrent(causal_query, key, value),
              {"query": causal_query, "key": key, "value": value}),
             (lambda: linear.linear_attention_weights(query, key), {"query": query, "key": key}),
             (lambda: linear.max_weight_bound(key), {"key": key})]
    for call, tensors in calls:
        _checked_once(entries, call, **tensors)


# --- checked: every parameter of a check is fed, by the step or by an option, never left at its default --------

def _check_with_block(query, block_size=128) -> None:
    if block_size <= 0:
        raise ValueError(f"expected block_size > 0, got {block_size}")


def test_a_check_parameter_the_step_lacks_is_refused_when_the_step_is_defined():
    with pytest.raises(TypeError, match=r"\['block_size'\] fed by neither") as info:
        @_checks.checked(_check_with_block)
        def step(query):  # no block_size: the check would always see its default 128
            return query
    assert "step(query)" in str(info.value)  # the step's signature, as it came


def test_an_option_feeds_it_and_a_step_parameter_feeds_it():
    @_checks.checked(_check_with_block, block_size=4)
    def fixed(query):
        return query

    @_checks.checked(_check_with_block)
    def step(query, block_size=128):
        return query

    assert fixed(1) == 1 and step(1, block_size=2) == 1
    with pytest.raises(ValueError, match="got -1"):
        step(1, block_size=-1)


def test_an_option_the_check_lacks_or_the_step_has_is_refused():
    with pytest.raises(TypeError, match=r"options \['size'\]"):
        _checks.checked(_check_with_block, size=4)(lambda query, block_size=1: query)
    with pytest.raises(TypeError, match=r"options \['block_size'\]"):
        _checks.checked(_check_with_block, block_size=4)(lambda query, block_size=1: query)
    with pytest.raises(TypeError, match="require parameter"):
        _checks.checked(_check_with_block, require=_checks.require_array)(lambda query, block_size=1: query)


def test_require_is_the_kind_of_array_the_step_takes():
    torch_softmax, numpy_softmax = attnlib.softmax, numpy_ops.softmax
    with pytest.raises(TypeError, match="expected x to be a torch.Tensor"):
        torch_softmax(np.zeros(3))
    with pytest.raises(TypeError, match="expected x to be a numpy.ndarray"):
        numpy_softmax(torch.zeros(3))
