"""Bad input: each kind raises ValueError/TypeError whose message names what was expected and what came.

One parametrized case per kind of mistake; a fuzz test checks that nothing else escapes from deep inside torch.
"""

from __future__ import annotations

import inspect
import os
import re
import traceback
from pathlib import Path
from unittest import mock

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import attnlib
from attnlib import (
    MultiHeadAttention,
    QKVProjection,
    apply_mask,
    causal_mask,
    dot_product_scores,
    get_device,
    merge_heads,
    numpy_ops,
    padding_mask,
    project,
    scale_scores,
    scaled_dot_product_attention,
    softmax,
    split_heads,
    weighted_sum,
)
from attnlib.causal import kv_bytes_per_token
from attnlib.device import describe_device
from attnlib.io_cost import (
    HBMTraffic,
    arithmetic_intensity,
    attention_flops,
    flash_attention_io,
    flash_block_sizes,
    roofline,
    standard_attention_io,
)
from attnlib.linear import elu_feature_map, linear_attention, linear_attention_recurrent, linear_attention_weights
from attnlib.positions import alibi_bias, alibi_slopes, apply_rotary, rotary_frequencies, rotary_matrix
from attnlib.scaling import qk_norm, score_variance, softcap
from attnlib.softmax import attention_entropy

Q, K, V = torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 3)
X = torch.randn(2, 5, 8)
MASK = torch.ones(4, 6, dtype=torch.bool)


def sdpa(**changes):
    """Call scaled_dot_product_attention on the good inputs above with some arguments changed."""
    kwargs = {"query": Q, "key": K, "value": V} | changes
    return lambda: scaled_dot_product_attention(**kwargs)


def with_device_env(text):
    def call():
        with mock.patch.dict(os.environ, {"ATTNLIB_DEVICE": text}):
            return get_device()
    return call


def mha(*args, **kwargs):
    torch.manual_seed(0)
    return MultiHeadAttention(16, 4)(*args, **kwargs)


# (id, call, exception type, expected text, received text)
CASES = [
    ("query rank", sdpa(query=torch.randn(8)), ValueError, "(..., Lq, Dk)", "(8,)"),
    ("key rank", lambda: dot_product_scores(Q, torch.randn(8)), ValueError, "(..., Lk, Dk)", "(8,)"),
    ("value rank", sdpa(value=torch.randn(6)), ValueError, "(..., Lk, Dv)", "(6,)"),
    ("Dk mismatch", sdpa(key=torch.randn(2, 6, 5)), ValueError, "Dk=8", "(2, 6, 5)"),
    ("no keys", sdpa(key=torch.randn(2, 0, 8), value=torch.randn(2, 0, 3)), ValueError, "Lk >= 1 and Dk >= 1",
     "(2, 0, 8)"),
    ("softmax over an empty dim", lambda: softmax(torch.randn(3, 0)), ValueError, "at least one entry along dim=-1",
     "(3, 0)"),
    ("Lk mismatch key/value", sdpa(value=torch.randn(2, 5, 3)), ValueError, "Lk=6", "(2, 5, 3)"),
    ("batch dims", sdpa(key=torch.randn(3, 6, 8), value=torch.randn(3, 6, 3)), ValueError,
     "broadcast together", "(2,), (3,)"),
    ("heads do not divide embed_dim", lambda: MultiHeadAttention(10, 3), ValueError,
     "divisible by num_heads", "embed_dim=10, num_heads=3"),
    ("split_heads width", lambda: split_heads(torch.randn(2, 5, 10), 3), ValueError,
     "divisible by num_heads=3", "(2, 5, 10)"),
    ("num_heads zero", lambda: MultiHeadAttention(8, 0), ValueError, "positive int", "got 0"),
    ("kdim not an int", lambda: MultiHeadAttention(8, 2, kdim=4.0), TypeError, "positive int", "builtins.float"),
    ("mask shape", sdpa(attn_mask=torch.ones(4, 5, dtype=torch.bool)), ValueError, "(..., 4, 6)", "(4, 5)"),
    ("mask dtype", sdpa(attn_mask=torch.ones(4, 6, dtype=torch.long)), TypeError, "dtype bool", "torch.int64"),
    ("mask batch", sdpa(attn_mask=torch.ones(3, 4, 6, dtype=torch.bool)), ValueError,
     "broadcast together", "(3,)"),
    ("mask is numpy", sdpa(attn_mask=np.ones((4, 6), dtype=bool)), TypeError, "torch.Tensor", "numpy.ndarray"),
    ("numpy to torch", sdpa(query=Q.numpy(), key=K.numpy(), value=V.numpy()), TypeError,
     "torch.Tensor", "numpy.ndarray"),
    ("torch to numpy", lambda: numpy_ops.scaled_dot_product_attention(Q, K, V), TypeError,
     "numpy.ndarray", "torch.Tensor"),
    ("torch mask to numpy", lambda: numpy_ops.apply_mask(np.zeros((4, 6)), MASK), TypeError,
     "numpy.ndarray", "torch.Tensor"),
    ("integer inputs", sdpa(query=Q.long(), key=K.long(), value=V.long()), TypeError,
     "floating-point dtype", "torch.int64"),
    ("integer scores", lambda: apply_mask(torch.zeros(4, 6, dtype=torch.long), MASK), TypeError,
     "floating-point dtype", "torch.int64"),
    ("dtype mismatch", sdpa(query=Q.double()), TypeError, "share one dtype", "torch.float64, torch.float32"),
    ("negative temperature", lambda: softmax(X, temperature=-1.0), ValueError, "finite number > 0", "-1.0"),
    ("temperature not a number", lambda: softmax(X, temperature="hot"), TypeError, "positive number",
     "builtins.str"),
    ("bad dim", lambda: softmax(X, dim=3), ValueError, "[-3, 2]", "dim=3"),
    ("dim not an int", lambda: softmax(X, dim=1.0), TypeError, "dim to be an int", "builtins.float"),
    ("attn_mask with is_causal", sdpa(attn_mask=MASK, is_causal=True), ValueError,
     "either attn_mask or is_causal=True", "got both"),
    ("is_causal not a bool", sdpa(is_causal=MASK), TypeError, "is_causal to be a bool", "torch.Tensor"),
    ("scale zero", sdpa(scale=0.0), ValueError, "finite number > 0", "got 0.0"),
    ("scale not a number", sdpa(scale="1/8"), TypeError, "positive number", "builtins.str"),
    ("scale nan", sdpa(scale=float("nan")), ValueError, "finite number > 0", "got nan"),
    ("unknown ATTNLIB_DEVICE", with_device_env("tpu"), ValueError, "one of cpu, cuda, cuda:N, mps", "'tpu'"),
    ("unavailable ATTNLIB_DEVICE", with_device_env("cuda:99"), ValueError, "available: cpu", "'cuda:99'"),
    ("describe_device name", lambda: describe_device("gpu0"), ValueError, "a device such as 'cpu'", "'gpu0'"),
    ("padding length too long", lambda: padding_mask([6, 2], 5), ValueError, "[0, 5]", "[6, 2]"),
    ("padding length negative", lambda: numpy_ops.padding_mask([-1, 2], 5), ValueError, "[0, 5]", "[-1, 2]"),
    ("padding lengths not ints", lambda: padding_mask([1.5, 2.0], 5), TypeError, "1-D sequence of ints",
     "torch.float32"),
    ("padding lengths not a sequence", lambda: padding_mask(None, 5), TypeError, "1-D sequence of ints",
     "NoneType"),
    ("causal_mask device", lambda: causal_mask(3, device=True), TypeError, "a str or a torch.device", "bool"),
    ("causal_mask length zero", lambda: causal_mask(0), ValueError, "positive int", "got 0"),
    ("from_torch on a Linear", lambda: MultiHeadAttention.from_torch(nn.Linear(4, 4)), TypeError,
     "torch.nn.MultiheadAttention", "Linear"),
    ("from_torch add_bias_kv", lambda: MultiHeadAttention.from_torch(nn.MultiheadAttention(4, 2, add_bias_kv=True)),
     ValueError, "without add_bias_kv/add_zero_attn", "got one with them"),
    ("MHA input width", lambda: mha(torch.randn(2, 3, 8)), ValueError, "(B, L, 16)", "(2, 3, 8)"),
    ("MHA input rank", lambda: mha(torch.randn(3, 16)), ValueError, "(B, L, 16)", "(3, 16)"),
    ("MHA batch mismatch", lambda: mha(torch.randn(2, 3, 16), torch.randn(3, 5, 16)), ValueError,
     "matching B", "(3, 5, 16)"),
    ("MHA dtype", lambda: mha(torch.randn(2, 3, 16, dtype=torch.float64)), TypeError,
     "dtype torch.float32", "torch.float64"),
    ("project width", lambda: project(X, torch.randn(5, 4)), ValueError, "D=8", "(5, 4)"),
    ("project bias", lambda: project(X, torch.randn(8, 4), torch.randn(3)), ValueError, "(Dk,) = (4,)", "(3,)"),
    ("project weight dtype", lambda: project(X, torch.randn(8, 4, dtype=torch.float64)), TypeError,
     "dtype torch.float32", "torch.float64"),
    ("weighted_sum Lk", lambda: weighted_sum(torch.rand(2, 4, 6), torch.randn(2, 5, 3)), ValueError,
     "Lk=6", "(2, 5, 3)"),
    ("merge_heads rank", lambda: merge_heads(X), ValueError, "(B, H, L, Dk)", "(2, 5, 8)"),
    ("scale_scores d_k", lambda: scale_scores(X, -4), ValueError, "positive int", "-4"),
    ("QKVProjection input dtype", lambda: QKVProjection(8, 4)(X.double()), TypeError, "dtype torch.float32",
     "torch.float64"),
    ("QKVProjection d_k", lambda: QKVProjection(8, 4.0), TypeError, "positive int", "builtins.float"),
    ("score_variance d_k", lambda: score_variance(0), ValueError, "positive int", "got 0"),
    ("numpy project width", lambda: numpy_ops.project(X.numpy(), np.zeros((5, 4), np.float32)), ValueError, "D=8",
     "(5, 4)"),
    ("numpy project bias", lambda: numpy_ops.project(X.numpy(), np.zeros((8, 4), np.float32), np.zeros(3, np.float32)),
     ValueError, "(Dk,) = (4,)", "(3,)"),
    ("numpy ragged lengths", lambda: numpy_ops.padding_mask([[1], [2, 3]], 5), TypeError, "1-D sequence of ints",
     "list"),
    ("numpy float lengths", lambda: numpy_ops.padding_mask([1.5], 5), TypeError, "1-D sequence of ints", "float64"),
    ("numpy weighted_sum Lk", lambda: numpy_ops.weighted_sum(np.ones((4, 6)), np.ones((5, 3))), ValueError, "Lk=6",
     "(5, 3)"),
    ("numpy split_heads width", lambda: numpy_ops.split_heads(np.ones((2, 5, 10)), 3), ValueError,
     "divisible by num_heads=3", "(2, 5, 10)"),
    ("numpy Dk mismatch", lambda: numpy_ops.dot_product_scores(np.zeros((4, 8)), np.zeros((6, 5))), ValueError,
     "Dk=8", "(6, 5)"),
    # the fuzz's input that crashed torch 2.11's CPU kernel (a floating point exception): (B, H, L, D) with H = 0
    ("empty batch", sdpa(query=torch.randn(2, 0, 1, 1), key=torch.randn(2, 0, 1, 1), value=torch.randn(2, 0, 1, 1),
                         need_weights=False), ValueError, "leading dims broadcast to sizes >= 1", "got (2, 0)"),
    ("empty batch from the mask", sdpa(query=torch.randn(2, 1, 4, 8), key=torch.randn(2, 1, 6, 8),
                                       value=torch.randn(2, 1, 6, 3), attn_mask=torch.ones(0, 4, 6, dtype=torch.bool)),
     ValueError, "leading dims broadcast to sizes >= 1", "got (2, 0)"),
    ("numpy empty batch", lambda: numpy_ops.scaled_dot_product_attention(np.zeros((0, 4, 8)), np.zeros((0, 6, 8)),
                                                                         np.zeros((0, 6, 3))),
     ValueError, "leading dims broadcast to sizes >= 1", "got (0,)"),
    ("mask on another device", sdpa(query=Q.to("meta"), key=K.to("meta"), value=V.to("meta"), attn_mask=MASK),
     ValueError, "expected attn_mask on meta like the query", "got cpu"),
]


@pytest.mark.parametrize("call, error, expected, received", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_names_expected_and_received(call, error, expected, received):
    with pytest.raises(error, match=re.escape(expected)) as info:
        call()
    assert received in str(info.value)
    assert type(info.value) is error  # not a subclass from deep inside torch


def test_there_are_at_least_twenty_kinds():
    assert len(CASES) >= 20 and len({c[0] for c in CASES}) == len(CASES)


ATTNLIB_DIR = Path(attnlib.__file__).parent
FUZZ = settings(max_examples=50, deadline=None, derandomize=True)


def _assert_clean(call):
    """Run ``call``: it may succeed (then with finite results) or raise ValueError/TypeError from attnlib."""
    try:
        result = call()
    except (ValueError, TypeError) as error:
        raised_in = Path(traceback.extract_tb(error.__traceback__)[-1].filename)
        assert raised_in.parent == ATTNLIB_DIR, f"{type(error).__name__} from {raised_in}: {error}"
        return None
    for out in result if isinstance(result, tuple) else (result,):
        assert out is None or torch.isfinite(torch.as_tensor(out).float()).all()
    return result


@st.composite
def near_valid_attention(draw):
    """Inputs for scaled_dot_product_attention that are valid except for a few random mistakes."""
    lq, lk, dk, dv, b = (draw(st.integers(1, 3)) for _ in range(5))
    shapes = [[b, lq, dk], [b, lk, dk], [b, lk, dv], draw(st.sampled_from([[lq, lk], [lk], [b, 1, lk], []]))]
    for shape in shapes:  # the mistakes: a wrong size, a dropped or an extra dim
        if shape and draw(st.integers(0, 5)) == 0:
            shape[draw(st.integers(0, len(shape) - 1))] = draw(st.integers(0, 4))
        if draw(st.integers(0, 7)) == 0:
            shape.insert(0, 2)
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.bfloat16, torch.int64]))
    query, key, value = (torch.randn(s).to(dtype) for s in shapes[:3])
    mask_dtype = draw(st.sampled_from([None, torch.bool, torch.float32, torch.float64, torch.int64]))
    mask = None if mask_dtype is None else (torch.rand(shapes[3]) < 0.5).to(mask_dtype)
    return query, key, value, mask


@FUZZ
@given(near_valid_attention(), st.booleans(), st.booleans(), st.sampled_from([None, 0.5, 0.0, -1.0]))
def test_near_valid_attention_input_fails_cleanly_inside_attnlib(inputs, is_causal, need_weights, scale):
    query, key, value, mask = inputs
    _assert_clean(lambda: scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal,
                                                       scale=scale, need_weights=need_weights))
    as_numpy = [query.double(), key.double(), value.double() if value.is_floating_point() else value, mask]
    arrays = [None if t is None else t.numpy() for t in as_numpy]
    _assert_clean(lambda: numpy_ops.scaled_dot_product_attention(*arrays[:3], attn_mask=arrays[3],
                                                                 is_causal=is_causal, scale=scale))


PUBLIC = [getattr(attnlib, name) for name in attnlib.__all__ if name not in ("get_device", "MultiHeadAttention")]
PUBLIC += [getattr(numpy_ops, name) for name in dir(numpy_ops)
           if getattr(getattr(numpy_ops, name), "__module__", None) == numpy_ops.__name__ and name[0] != "_"]
GARBAGE = st.one_of(
    hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=3).flatmap(
        lambda shape: st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool]).map(
            lambda dtype: torch.ones(shape, dtype=dtype))),
    hnp.arrays(st.sampled_from(["float64", "int64", "bool"]), hnp.array_shapes(min_dims=0, max_dims=3, max_side=3)),
    st.integers(-2, 5), st.floats(allow_nan=True), st.none(), st.text(max_size=3), st.booleans(),
)


@FUZZ
@given(st.sampled_from(PUBLIC), st.lists(GARBAGE, min_size=1, max_size=4))
def test_garbage_to_any_public_function_fails_cleanly(function, args):
    try:
        inspect.signature(function).bind(*args)
    except TypeError:  # a call Python itself refuses (wrong number of arguments) is not attnlib's to check
        return
    _assert_clean(lambda: _numbers(function(*args)))


def _numbers(result):
    """The numbers in a result: an HBMTraffic's total; a roofline's time without its label."""
    if isinstance(result, HBMTraffic):
        return result.total
    return tuple(r for r in result if not isinstance(r, str)) if isinstance(result, tuple) else result


# the modern-attention functions (not exported at the top level): the same fuzz
MODERN = [apply_rotary, rotary_matrix, rotary_frequencies, alibi_slopes, alibi_bias, softcap, qk_norm,
          attention_entropy, linear_attention, linear_attention_recurrent, linear_attention_weights, elu_feature_map,
          kv_bytes_per_token, standard_attention_io, flash_attention_io, flash_block_sizes, attention_flops,
          arithmetic_intensity, roofline]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(MODERN), st.lists(GARBAGE, min_size=1, max_size=4))
def test_garbage_to_the_modern_functions_fails_cleanly(function, args):
    try:
        inspect.signature(function).bind(*args)
    except TypeError:
        return
    _assert_clean(lambda: _numbers(function(*args)))
