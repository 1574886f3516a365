"""attnlib.numpy_ops, the NumPy mirror, equals the torch functions on the same inputs."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

import attnlib
from attnlib import numpy_ops
from tests.lib.tensors import randn, random_bool_mask, random_float_mask

SHARED = [name for name, f in inspect.getmembers(numpy_ops, inspect.isfunction)
          if f.__module__ == numpy_ops.__name__ and not name.startswith("_")]
DTYPES = [torch.float64, torch.float32]
TOL = {torch.float64: {"rtol": 1e-12, "atol": 1e-12}, torch.float32: {"rtol": 1e-5, "atol": 1e-6}}


def test_every_numpy_function_has_a_torch_twin_with_the_same_parameters():
    assert len(SHARED) >= 11
    for name in SHARED:
        ours = list(inspect.signature(getattr(numpy_ops, name)).parameters)
        torch_version = getattr(attnlib, name)
        theirs = [p for p in inspect.signature(torch_version).parameters if p != "device"]
        assert ours == theirs, name


def _same(np_out, torch_out, dtype):
    assert isinstance(np_out, np.ndarray)
    assert np_out.dtype == torch.empty(0, dtype=torch_out.dtype).numpy().dtype
    np.testing.assert_allclose(np_out, torch_out.numpy(), **TOL[dtype])


def _both(name, *args, **kwargs):
    """Call numpy_ops.<name> with NumPy copies of the tensor args, and attnlib.<name> with the tensors."""
    def to_np(a):
        return a.numpy() if isinstance(a, torch.Tensor) else a

    np_result = getattr(numpy_ops, name)(*map(to_np, args), **{key: to_np(a) for key, a in kwargs.items()})
    return np_result, getattr(attnlib, name)(*args, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_projection_scores_and_scaling(dtype):
    x, w, b = randn(2, 5, 8, dtype=dtype, seed=1), randn(8, 4, dtype=dtype, seed=2), randn(4, dtype=dtype, seed=3)
    q, k = randn(2, 3, 4, 8, dtype=dtype, seed=4), randn(2, 3, 6, 8, dtype=dtype, seed=5)
    for name, args in [("project", (x, w)), ("project", (x, w, b)), ("dot_product_scores", (q, k)),
                       ("scale_scores", (randn(2, 4, 6, dtype=dtype), 16))]:
        _same(*_both(name, *args), dtype)


@pytest.mark.parametrize("temperature", [1.0, 0.3, 4.0])
@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_softmax(dtype, dim, temperature):
    x = randn(3, 4, 5, dtype=dtype, seed=6) * 5
    x[0, 1] = float("-inf")  # a fully masked row along the last dim
    _same(*_both("softmax", x, dim=dim, temperature=temperature), dtype)


@pytest.mark.parametrize("lq, lk", [(4, 4), (3, 6), (6, 3)])
def test_causal_mask(lq, lk):
    np_mask, torch_mask = _both("causal_mask", lq, lk)
    assert np_mask.dtype == np.bool_ and np.array_equal(np_mask, torch_mask.numpy())


@pytest.mark.parametrize("lengths", [[3, 0, 5], [5], [0, 0]])
def test_padding_mask(lengths):
    np_mask, torch_mask = _both("padding_mask", lengths, 5)
    assert np_mask.shape == (len(lengths), 1, 1, 5) and np.array_equal(np_mask, torch_mask.numpy())


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_apply_mask(dtype, mask_kind):
    scores = randn(2, 4, 6, dtype=dtype, seed=7)
    mask = {"bool": random_bool_mask(4, 6, seed=8), "float": random_float_mask(4, 6, seed=8, dtype=dtype)}
    _same(*_both("apply_mask", scores, mask.get(mask_kind), is_causal=mask_kind == "causal"), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_weighted_sum(dtype):
    weights, value = torch.softmax(randn(2, 4, 6, dtype=dtype, seed=9), -1), randn(2, 6, 3, dtype=dtype, seed=10)
    _same(*_both("weighted_sum", weights, value), dtype)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("scale", [None, 0.5])
@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "causal", "fully_masked"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scaled_dot_product_attention(dtype, mask_kind, scale, need_weights):
    q, k, v = (randn(*s, dtype=dtype, seed=11 + i) for i, s in enumerate([(2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5)]))
    fully = random_bool_mask(2, 1, 4, 6, seed=14)
    fully[1, 0, 2] = False  # one query of batch 1 sees no key
    mask = {"bool": random_bool_mask(4, 6, seed=14), "float": random_float_mask(1, 6, seed=14, dtype=dtype),
            "fully_masked": fully}.get(mask_kind)
    (np_out, np_w), (torch_out, torch_w) = _both("scaled_dot_product_attention", q, k, v, attn_mask=mask,
                                                 is_causal=mask_kind == "causal", scale=scale,
                                                 need_weights=need_weights)
    _same(np_out, torch_out, dtype)
    if need_weights:
        _same(np_w, torch_w, dtype)
    else:
        assert np_w is None and torch_w is None


@pytest.mark.parametrize("num_heads", [1, 2, 4])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_split_and_merge_heads(dtype, num_heads):
    _same(*_both("split_heads", randn(2, 5, 8, dtype=dtype, seed=15), num_heads), dtype)
    _same(*_both("merge_heads", randn(2, num_heads, 5, 3, dtype=dtype, seed=16)), dtype)


def test_float16_is_computed_in_float32_like_torch():
    q, k, v = (randn(2, 4, 8, seed=i, dtype=torch.float16) * 30 for i in range(3))
    (np_out, np_w), (torch_out, torch_w) = _both("scaled_dot_product_attention", q, k, v)
    assert np_out.dtype == np.float16 and np.isfinite(np_out).all()
    np.testing.assert_allclose(np_out.astype(np.float32), torch_out.float().numpy(), rtol=2e-3, atol=2e-2)
    np.testing.assert_allclose(np_w.astype(np.float32), torch_w.float().numpy(), rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("lq, lk", [(3, 3), (2, 5), (5, 5)])
@pytest.mark.parametrize("align", ["upper_left", "lower_right"])
def test_causal_mask_alignment_matches_torch(lq, lk, align):
    from attnlib import causal_mask as torch_causal_mask  # noqa: PLC0415

    np.testing.assert_array_equal(numpy_ops.causal_mask(lq, lk, align=align),
                                  torch_causal_mask(lq, lk, align=align).numpy())


def test_grouped_query_attention_matches_torch():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(2, 6, 4, 8)), rng.normal(size=(2, 2, 5, 8)), rng.normal(size=(2, 2, 5, 3))
    ours, weights = numpy_ops.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    theirs = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(t) for t in (q, k, v)),
                                                              enable_gqa=True)
    np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-12)
    assert weights.shape == (2, 6, 4, 5)
    with pytest.raises(ValueError, match="multiple of the key/value heads"):
        numpy_ops.scaled_dot_product_attention(q, k[:, :1].repeat(4, axis=1), v[:, :1].repeat(4, axis=1),
                                               enable_gqa=True)
