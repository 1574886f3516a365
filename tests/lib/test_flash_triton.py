"""attnlib.flash_triton: the Triton kernels, forward and all three gradients, against torch's autograd in float64.

On a machine without a GPU the kernels run in Triton's interpreter (NumPy, one program after another): the
shapes are small, and the whole file stays within a minute of CPU time. On CUDA the same tests run compiled,
and the CUDA-only tests below check bfloat16 and the dispatch of ``attnlib.flash.flash_attention``.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib import flash_triton
from attnlib.flash import flash_attention
from attnlib.flash_triton import Config, FlashAttention
from tests.lib.tensors import CUDA, randn

pytest.importorskip("triton", reason="the kernels need Triton (pip install 'attnlib[kernels]')")
DEVICE = "cpu" if flash_triton.INTERPRET else "cuda"


def _inputs(q_shape, k_shape, dv, dtype=torch.float32, seed=0):
    """query q_shape, key k_shape, value k_shape with width dv: leaves on the kernels' device."""
    shapes = (q_shape, k_shape, (*k_shape[:-1], dv))
    return [randn(*s, seed=seed + i, dtype=dtype, device=DEVICE).requires_grad_() for i, s in enumerate(shapes)]


def _reference(query, key, value, is_causal, scale=None):
    """(output, lse) in float64 through plain torch ops, key/value heads repeated for grouped queries."""
    query, key, value = (t.detach().double().requires_grad_() for t in (query, key, value))
    groups = query.shape[-3] // key.shape[-3] if query.ndim >= 3 else 1
    k, v = (t.repeat_interleave(groups, dim=-3) if groups > 1 else t for t in (key, value))
    scores = query @ k.transpose(-2, -1) * (query.shape[-1] ** -0.5 if scale is None else scale)
    if is_causal:
        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v, torch.logsumexp(scores, dim=-1)), (query, key, value)


def _check(inputs, is_causal, rtol, scale=None, run=None):
    """Forward, lse and dQ, dK, dV of a random linear loss match the float64 reference to ``rtol`` (in norm)."""
    run = run or (lambda q, k, v: FlashAttention.apply(q, k, v, is_causal, scale))
    outputs = run(*inputs)
    expected, leaves = _reference(*inputs, is_causal, scale)
    weights = [randn(*t.shape, seed=20 + i, device=DEVICE) for i, t in enumerate(outputs)]
    def loss(outs):
        return sum((o.double() * w.double()).sum() for o, w in zip(outs, weights, strict=True))

    got, want = torch.autograd.grad(loss(outputs), inputs), torch.autograd.grad(loss(expected), leaves)
    for name, a, b in zip(("output", "lse", "dQ", "dK", "dV"), (*outputs, *got), (*expected, *want), strict=True):
        assert a.shape == b.shape and a.device.type == DEVICE, name
        error = ((a.double() - b).norm() / b.norm()).item()
        assert error < rtol, f"{name}: relative error {error:.2e}"


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("q_shape", "k_shape", "dv"), [
    ((2, 2, 32, 16), (2, 2, 32, 16), 16),  # whole blocks
    ((1, 4, 33, 8), (1, 2, 47, 8), 5),  # Lq < Lk, ragged last blocks, grouped queries, Dk ≠ Dv, padded widths
    ((1, 3, 40, 16), (1, 1, 21, 16), 16),  # Lq > Lk: causal rows past the keys see them all; one key/value head
], ids=["even", "ragged-gqa", "longer-queries"])
def test_forward_and_gradients_equal_torch_float32(q_shape, k_shape, dv, is_causal):
    _check(_inputs(q_shape, k_shape, dv), is_causal, rtol=1e-5)


def test_tiles_of_different_sizes_and_a_scale():
    """block_m ≠ block_n in all three kernels: the causal stages must still meet on the diagonal."""
    inputs = _inputs((1, 2, 70, 16), (1, 2, 70, 16), 16, seed=3)

    def run(q, k, v):
        return _Explicit.apply(q, k, v, Config(32, 16), (Config(16, 32), Config(32, 16)))

    _check(inputs, True, rtol=1e-5, scale=0.3, run=run)


class _Explicit(torch.autograd.Function):
    """The low-level launches with chosen tile sizes (what FlashAttention does with the tables' sizes)."""

    @staticmethod
    def forward(ctx, query, key, value, config, configs):
        q, k, v = (t.reshape(-1, *t.shape[-2:]).contiguous() for t in (query, key, value))
        output, lse = flash_triton.forward(q, k, v, 1, True, 0.3, config)
        ctx.save_for_backward(q, k, v, output, lse)
        ctx.configs = configs
        return output.reshape(query.shape), lse.reshape(query.shape[:-1])

    @staticmethod
    def backward(ctx, grad_out, grad_lse):
        q, k, v, output, lse = ctx.saved_tensors
        do = grad_out.reshape(q.shape).contiguous()
        delta = (do * output).sum(-1) - grad_lse.reshape(lse.shape)
        grads = flash_triton.backward(do, q, k, v, lse, delta, 1, True, 0.3, ctx.configs)
        return (*(g.reshape(grad_out.shape) for g in grads), None, None)


def test_two_dimensional_inputs_and_float16():
    _check(_inputs((24, 16), (24, 16), 16, dtype=torch.float16), True, rtol=3e-3)


def test_flash_attention_keeps_its_own_path_on_the_cpu():
    """On a CPU flash_attention is the pure-torch tiles (the kernel is for CUDA), and agrees with the kernel."""
    query, key, value = _inputs((1, 2, 20, 16), (1, 2, 20, 16), 16, seed=5)
    ours, _ = FlashAttention.apply(query, key, value, True)
    tiles, _ = flash_attention(query.detach().cpu(), key.detach().cpu(), value.detach().cpu(), is_causal=True)
    torch.testing.assert_close(ours.detach().cpu(), tiles, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(("shapes", "error", "match"), [
    (((1, 4, 8, 16), (1, 3, 8, 16), (1, 3, 8, 16)), ValueError, "Hkv dividing Hq"),
    (((2, 2, 8, 16), (1, 2, 8, 16), (1, 2, 8, 16)), ValueError, "same leading dims"),
    (((1, 8, 16), (1, 8, 8), (1, 8, 16)), ValueError, "one width Dk"),
    (((1, 8, 300), (1, 8, 300), (1, 8, 300)), ValueError, "at most 256"),
])
def test_bad_shapes_raise_clear_errors(shapes, error, match):
    tensors = [torch.zeros(*s, device=DEVICE) for s in shapes]
    with pytest.raises(error, match=match):
        FlashAttention.apply(*tensors, False)


def test_bad_dtypes_raise_clear_errors():
    tensors = [torch.zeros(4, 16, dtype=torch.float64, device=DEVICE) for _ in range(3)]
    with pytest.raises(TypeError, match="float16, bfloat16, float32"):
        FlashAttention.apply(*tensors, False)
    if flash_triton.INTERPRET:
        with pytest.raises(TypeError, match="interpreter"):
            FlashAttention.apply(*(t.bfloat16() for t in tensors), False)


def test_without_triton_the_module_imports_and_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(flash_triton, "triton", None)
    with pytest.raises(ImportError, match=r"attnlib\[kernels\]"):
        FlashAttention.apply(*(torch.zeros(4, 16) for _ in range(3)), False)


@CUDA
@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_d", [64, 128])
def test_compiled_bfloat16_on_cuda(head_d, is_causal):
    """The kernels' own tile sizes (the tables), bfloat16, a length that is no multiple of them."""
    inputs = [randn(2, 4, 1008, head_d, seed=i, dtype=torch.bfloat16, device="cuda").requires_grad_()
              for i in range(3)]
    _check(inputs, is_causal, rtol=2e-2)


@CUDA
def test_flash_attention_runs_the_kernel_on_cuda(monkeypatch):
    query, key, value = (randn(2, 4, 300, 64, seed=i, dtype=torch.float16, device="cuda") for i in range(3))
    calls, original = [], FlashAttention.apply
    monkeypatch.setattr(FlashAttention, "apply", lambda *args: calls.append(args) or original(*args))
    output, lse = flash_attention(query, key, value, is_causal=True)
    assert len(calls) == 1 and lse.dtype == torch.float32
    torch.testing.assert_close(output, F.scaled_dot_product_attention(query, key, value, is_causal=True),
                               atol=2e-3, rtol=2e-3)
