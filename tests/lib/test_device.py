"""attnlib.device: the order CUDA, MPS, CPU, the ATTNLIB_DEVICE override, and device/dtype preservation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib import device as dev
from attnlib.attention import attention_dropout
from attnlib.induction import control_tokens, repeated_tokens
from tests.lib.tensors import CUDA, randn


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(dev.ENV_VAR, raising=False)
    return monkeypatch


def _machine(monkeypatch, cuda: int = 0, mps: bool = False) -> None:
    """Pretend this machine has ``cuda`` CUDA devices and maybe MPS."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    monkeypatch.setattr(dev, "_mps_available", lambda: mps)


@pytest.mark.parametrize(
    "cuda, mps, expected", [(1, True, "cuda"), (2, False, "cuda"), (0, True, "mps"), (0, False, "cpu")]
)
def test_order_is_cuda_then_mps_then_cpu(no_env, cuda, mps, expected):
    _machine(no_env, cuda, mps)
    assert dev.get_device() == torch.device(expected)


@pytest.mark.parametrize("text, expected", [("cpu", "cpu"), ("CPU", "cpu"), (" cuda ", "cuda"),
                                            ("cuda:1", "cuda:1"), ("mps", "mps"), ("", "cuda")])
def test_environment_variable_overrides(no_env, text, expected):
    _machine(no_env, cuda=2, mps=True)
    no_env.setenv(dev.ENV_VAR, text)
    assert dev.get_device() == torch.device(expected)


def test_real_machine_default_is_an_available_device(no_env):
    assert str(dev.get_device()) in {"cpu", "cuda", "mps"}
    assert dev.available_devices()[0] == "cpu"
    no_env.setenv(dev.ENV_VAR, "cpu")
    assert dev.get_device() == torch.device("cpu")


@pytest.mark.parametrize("text", ["tpu", "meta", "xla", "cuda:x", "cuda:-1", "gpu"])
def test_unknown_device_names_raise_a_clear_error(no_env, text):
    no_env.setenv(dev.ENV_VAR, text)
    with pytest.raises(ValueError, match=r"expected ATTNLIB_DEVICE to be one of cpu, cuda, cuda:N, mps") as info:
        dev.get_device()
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text, cuda, mps", [("cuda", 0, False), ("cuda:2", 2, False), ("mps", 1, False)])
def test_unavailable_devices_raise_a_clear_error(no_env, text, cuda, mps):
    _machine(no_env, cuda, mps)
    no_env.setenv(dev.ENV_VAR, text)
    with pytest.raises(ValueError, match=r"does not have \(available: cpu") as info:
        dev.get_device()
    assert f"ATTNLIB_DEVICE={text!r}" in str(info.value)


def test_available_devices_lists_every_device(no_env):
    _machine(no_env, cuda=2, mps=True)
    assert dev.available_devices() == ["cpu", "cuda:0", "cuda:1", "mps"]
    _machine(no_env)
    assert dev.available_devices() == ["cpu"]


def test_describe_device(no_env):
    assert dev.describe_device("cpu") == "cpu"
    _machine(no_env)
    assert dev.describe_device() == "cpu"


def test_exact_dtype_is_float64_except_on_mps(no_env):
    assert dev.exact_dtype("cpu") == dev.exact_dtype(torch.device("cuda:1")) == torch.float64
    assert dev.exact_dtype("mps") == torch.float32  # Apple's MPS has no float64
    _machine(no_env, mps=True)
    assert dev.exact_dtype() == torch.float32  # default: get_device(), here MPS
    with pytest.raises(ValueError, match=r"expected a device such as 'cpu', 'cuda:0' or 'mps', got 'gpu0'"):
        dev.exact_dtype("gpu0")


def _calls(device, dtype):
    """Every public tensor function of attnlib on inputs of one device and dtype: name -> outputs."""
    x, q, k, v = (randn(*s, dtype=dtype, seed=i, device=device)
                  for i, s in enumerate([(2, 5, 8), (2, 2, 5, 4), (2, 2, 6, 4), (2, 2, 6, 3)]))
    keep = attnlib.padding_mask(torch.tensor([6, 3], device=device), 6)
    torch.manual_seed(0)
    mha = attnlib.MultiHeadAttention(8, 2, kdim=4, vdim=4).to(device=device, dtype=dtype)
    qkv = attnlib.QKVProjection(8, 4).to(device=device, dtype=dtype)
    scores = attnlib.dot_product_scores(q, k)
    return {
        "project": [attnlib.project(x, x[0, :4].T.contiguous(), x[0, 0, :4])],
        "dot_product_scores": [scores],
        "scale_scores": [attnlib.scale_scores(scores, 4)],
        "softmax": [attnlib.softmax(scores, temperature=2.0)],
        "apply_mask": [attnlib.apply_mask(scores, keep), attnlib.apply_mask(scores, is_causal=True)],
        "weighted_sum": [attnlib.weighted_sum(attnlib.softmax(scores), v)],
        "sdpa": list(attnlib.scaled_dot_product_attention(q, k, v, attn_mask=keep)),
        "sdpa_fast": attnlib.scaled_dot_product_attention(q, k, v, is_causal=True, need_weights=False)[:1],
        "split_merge": [attnlib.split_heads(x, 2), attnlib.merge_heads(q)],
        "MultiHeadAttention": list(mha(x, k[:, 0], k[:, 0])),
        "QKVProjection": list(qkv(x)),
    }


def _assert_kept(device, dtype):
    for name, outputs in _calls(device, dtype).items():
        for out in outputs:
            assert out.device.type == torch.device(device).type, name
            assert out.dtype == dtype, name
            assert torch.isfinite(out).any(), name


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
def test_every_function_keeps_device_and_dtype_on_cpu(dtype):
    _assert_kept("cpu", dtype)
    assert attnlib.padding_mask([2, 1], 3).device.type == "cpu"


@CUDA
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_every_function_keeps_device_and_dtype_on_cuda(dtype):
    _assert_kept("cuda", dtype)
    assert attnlib.causal_mask(3, device="cuda").device.type == "cuda"


@CUDA
def test_cuda_results_equal_cpu_results():
    cpu = _calls("cpu", torch.float64)
    cuda = _calls("cuda", torch.float64)
    for name in cpu:
        for a, b in zip(cpu[name], cuda[name], strict=True):
            torch.testing.assert_close(b.cpu(), a, atol=1e-10, rtol=1e-8, equal_nan=True, msg=name)


# The checks run before any computation, so the meta device (shapes without data) stands in for a GPU on a CPU.
OTHER_DEVICES = ["meta", pytest.param("cuda", marks=CUDA)]


@pytest.mark.parametrize("other", OTHER_DEVICES)
def test_mixed_devices_raise_clear_errors(other):
    q, k, v = randn(4, 8), randn(6, 8), randn(6, 3)
    there = q.to(other).device  # cuda:0 for "cuda"
    with pytest.raises(ValueError, match="on one device") as info:
        attnlib.scaled_dot_product_attention(q.to(other), k, v)
    assert f"got {there}, cpu, cpu" in str(info.value)
    with pytest.raises(ValueError, match=f"expected attn_mask on {there} like the query, got cpu"):
        attnlib.scaled_dot_product_attention(q.to(other), k.to(other), v.to(other),
                                             attn_mask=torch.ones(4, 6, dtype=bool))
    with pytest.raises(ValueError, match=f"expected attn_mask on {there} like the scores, got cpu"):
        attnlib.apply_mask(q.to(other) @ k.to(other).T, torch.ones(4, 6, dtype=bool))
    with pytest.raises(ValueError, match=f"expected weight on {there} like x, got cpu"):
        attnlib.project(q.to(other), randn(8, 2))


# --- the same numbers on every device: attnlib draws its random numbers on the CPU and moves them -------------

def _dropout(device, generator):
    return attention_dropout(torch.ones(3, 4, 5, dtype=torch.float64, device=device), 0.4)


def _control(device, generator):
    return control_tokens(repeated_tokens(4, 5, 12, generator=generator).to(device), 12, generator=generator)


DRAWS = {"attention_dropout": _dropout, "control_tokens": _control,
         "repeated_tokens": lambda device, generator: repeated_tokens(4, 5, 12, generator=generator, device=device)}


def _drawn(name, device):
    """DRAWS[name] on ``device`` from seed 0: its result, then the states of torch's CPU generator and of its own."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    result = DRAWS[name](device, generator)
    return result, torch.get_rng_state(), generator.get_state()


@pytest.mark.parametrize("other", OTHER_DEVICES)
@pytest.mark.parametrize("name", DRAWS)
def test_random_draws_are_made_on_the_cpu_whatever_the_device(name, other):
    """The CPU generators advance exactly as for a CPU result (meta: the draws were made there, not on the device);
    on a GPU the numbers are the CPU's."""
    on_cpu, cpu_state, cpu_generator = _drawn(name, "cpu")
    there, state, generator = _drawn(name, other)
    assert there.device.type == other and there.shape == on_cpu.shape
    assert torch.equal(state, cpu_state) and torch.equal(generator, cpu_generator)
    if other != "meta":
        assert torch.equal(there.cpu(), on_cpu)


def test_the_draws_change_with_the_seed():
    torch.manual_seed(1)
    assert not torch.equal(DRAWS["attention_dropout"]("cpu", None), _drawn("attention_dropout", "cpu")[0])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
def test_on_the_cpu_attention_dropout_drops_what_torch_drops(dtype, p):
    """The chapters' CPU numbers are those of F.dropout, the transposed (non-contiguous) weights' included."""
    weights = torch.rand(3, 6, 7, generator=torch.Generator().manual_seed(2)).to(dtype)
    for w in (weights, weights.transpose(-1, -2)):
        torch.manual_seed(5)
        ours = attention_dropout(w, p)
        torch.manual_seed(5)
        assert torch.equal(ours, F.dropout(w, p, training=True))


@CUDA
def test_sdpa_with_dropout_gives_the_cpus_numbers_on_cuda():
    """The readable path's dropout (need_weights=True); the fused path is torch's kernel, which draws on the device."""
    q, k, v = randn(2, 4, 8), randn(2, 6, 8, seed=1), randn(2, 6, 3, seed=2)
    torch.manual_seed(3)
    expected = attnlib.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(3)
    got = attnlib.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), dropout_p=0.5)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a.cpu(), b, rtol=0, atol=1e-12)
