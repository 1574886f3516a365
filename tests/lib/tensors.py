"""Helpers for attnlib's tests: seeded random inputs, per-dtype tolerances, and an independent torch reference
for the attention weights (plain torch ops, no attnlib code)."""

from __future__ import annotations

import pytest
import torch

# Tolerances per dtype for comparing attnlib with torch (bfloat16 has 8 bits of mantissa: ~0.4% per rounding).
TOLERANCES = {
    torch.float64: {"atol": 1e-12, "rtol": 1e-10},
    torch.float32: {"atol": 1e-5, "rtol": 1e-4},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 2e-2, "rtol": 2e-2},
}

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def tol(dtype: torch.dtype) -> dict:
    """The atol/rtol pair for ``dtype`` (for torch.testing.assert_close)."""
    return TOLERANCES[dtype]


def randn(*shape, dtype=torch.float64, seed=0, device="cpu") -> torch.Tensor:
    """A seeded standard-normal tensor (generated in float64 on the CPU, then converted)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype)


def random_bool_mask(*shape, seed=0, p=0.6) -> torch.Tensor:
    """A seeded bool mask (True = may attend) in which every row keeps at least one True (its first key)."""
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, generator=generator) < p
    mask[..., 0] = True
    return mask


def random_float_mask(*shape, seed=0, dtype=torch.float64) -> torch.Tensor:
    """A seeded additive mask: normal values with some ``-inf`` entries, never a whole row of them."""
    values = randn(*shape, dtype=dtype, seed=seed)
    hidden = ~random_bool_mask(*shape, seed=seed + 1)
    return values.masked_fill(hidden, float("-inf"))


def expected_weights(query, key, attn_mask=None, is_causal=False, scale=None) -> torch.Tensor:
    """softmax(Q Kᵀ · scale + mask) with plain torch ops: the weights attnlib must reproduce."""
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = torch.matmul(query, key.transpose(-1, -2)) * scale
    if is_causal:
        attn_mask = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool).tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    elif attn_mask is not None:
        scores = scores + attn_mask
    return torch.softmax(scores, dim=-1)
