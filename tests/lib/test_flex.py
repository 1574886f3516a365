"""attnlib.flex: each variant written for FlexAttention equals attnlib's own dense implementation (and torch's SDPA
with the same dense mask), in float64 on the CPU, where flex_attention runs eagerly; the BlockMask is flash's grid."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlib import causal_mask, flex, padding_mask, scaled_dot_product_attention, softmax, weighted_sum
from attnlib.causal import sliding_window_mask
from attnlib.flash import tile_grid
from attnlib.positions import alibi_bias, alibi_slopes
from attnlib.scaling import scale_scores, softcap
from attnlib.scores import dot_product_scores
from tests.lib.tensors import CUDA, randn, tol

B, H, L, D = 2, 4, 64, 16


@pytest.fixture(scope="module")
def qkv():
    return randn(B, H, L, D, seed=1), randn(B, H, L, D, seed=2), randn(B, H, L, D, seed=3)


def _same(got, *expected):
    for want in expected:
        torch.testing.assert_close(got, want, **tol(torch.float64))


def _masked(qkv, mask_mod, dense):
    """flex with a mask_mod against attnlib's SDPA and torch's with the dense mask."""
    query, key, value = qkv
    mask = flex.block_mask(mask_mod, B, None, L, L, "cpu", block_size=16)
    got = flex.attention(query, key, value, mask=mask)
    _same(got, scaled_dot_product_attention(query, key, value, attn_mask=dense)[0],
          F.scaled_dot_product_attention(query, key, value, attn_mask=dense))
    return mask


def test_causal(qkv):
    _masked(qkv, flex.causal, causal_mask(L))


@pytest.mark.parametrize("window", [1, 5, 16, 100])
def test_sliding_window(qkv, window):
    _masked(qkv, flex.sliding_window(window), sliding_window_mask(L, L, window))


def test_padding(qkv):
    lengths = torch.tensor([L, 37])
    _masked(qkv, flex.padding(lengths), padding_mask(lengths, L))


def test_documents_packed_in_one_row(qkv):
    ids = torch.tensor([[0] * 20 + [1] * 30 + [2] * 14, [0] * 50 + [1] * 14])
    expected = torch.stack([torch.tensor([[ids[b, i] == ids[b, j] and j <= i for j in range(L)] for i in range(L)])
                            for b in range(B)])[:, None]  # (B, 1, L, L), pair by pair
    assert torch.equal(flex.document_mask(ids), expected)
    _masked(qkv, flex.document(ids), flex.document_mask(ids))


def test_prefix_lm(qkv):
    prefix = torch.tensor([10, 33])
    expected = torch.stack([torch.tensor([[j < prefix[b] or j <= i for j in range(L)] for i in range(L)])
                            for b in range(B)])[:, None]
    assert torch.equal(flex.prefix_lm_mask(prefix, L), expected)
    _masked(qkv, flex.prefix_lm(prefix), flex.prefix_lm_mask(prefix, L))


def test_alibi_with_causal_mask(qkv):
    query, key, value = qkv
    slopes = alibi_slopes(H)
    mask = flex.block_mask(flex.causal, None, None, L, L, "cpu", block_size=16)
    got = flex.attention(query, key, value, score_mod=flex.alibi(slopes), mask=mask)
    bias = alibi_bias(H, L, dtype=torch.float64).masked_fill(~causal_mask(L), float("-inf"))  # (H, L, L)
    _same(got, scaled_dot_product_attention(query, key, value, attn_mask=bias)[0])


@pytest.mark.parametrize("cap", [0.5, 5.0])
def test_softcap_equals_attnlibs_steps(qkv, cap):
    query, key, value = qkv
    got = flex.attention(query, key, value, score_mod=flex.softcap(cap))
    scores = softcap(scale_scores(dot_product_scores(query, key), D), cap)  # chapter 2's steps, capped
    _same(got, weighted_sum(softmax(scores), value))


def test_no_backward_on_the_cpu(qkv):
    """torch's eager CPU path refuses gradients: the chapter trains nothing through it (the GPU test below does)."""
    leaves = [t.clone().requires_grad_() for t in qkv]
    with pytest.raises(NotImplementedError, match="backward on CPU"):
        flex.attention(*leaves, score_mod=flex.softcap(5.0))


@pytest.mark.parametrize(("length", "block"), [(64, 16), (512, 128), (96, 32)])
def test_block_mask_is_flashs_tile_grid(length, block):
    kinds = flex.tile_kinds(flex.block_mask(flex.causal, None, None, length, length, "cpu", block))
    assert kinds.shape == (1, 1, length // block, length // block)
    assert torch.equal(kinds[0, 0], tile_grid(length, length, block, is_causal=True))


def test_sliding_window_skips_the_tiles_outside_the_band():
    kinds = flex.tile_kinds(flex.block_mask(flex.sliding_window(32), None, None, 256, 256, "cpu", 32))[0, 0]
    rows, cols = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    assert torch.equal(kinds != 0, (cols <= rows) & (cols >= rows - 1))  # the diagonal and the one before it
    documents = flex.tile_kinds(flex.block_mask(flex.document(torch.tensor([[0] * 128 + [1] * 128])), 1, None,
                                                256, 256, "cpu", 32))[0, 0]
    assert (documents[4:, :4] == 0).all() and (documents[:4, :4] != 0).any()  # no tile across two documents


@CUDA
def test_gradients_through_a_score_mod_on_cuda():
    leaves = [randn(2, 4, 128, 64, seed=i, dtype=torch.float32, device="cuda").requires_grad_() for i in range(3)]
    mask = flex.block_mask(flex.causal, None, None, 128, 128, "cuda")
    out = flex.attention(*leaves, score_mod=flex.alibi(alibi_slopes(4).float().cuda()), mask=mask)
    grads = torch.autograd.grad(out.sum(), leaves)
    exact = [t.detach().double().requires_grad_() for t in leaves]
    bias = alibi_bias(4, 128, dtype=torch.float64, device="cuda").masked_fill(~causal_mask(128, device="cuda"),
                                                                             float("-inf"))
    expected = torch.autograd.grad(F.scaled_dot_product_attention(*exact, attn_mask=bias).sum(), exact)
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-3)


@CUDA
def test_compiled_on_cuda_equals_the_eager_cpu_result():
    query, key, value = (randn(2, 4, 256, 64, seed=i, dtype=torch.float16) for i in range(3))
    slopes = alibi_slopes(4).float()
    cpu = flex.attention(*(t.float() for t in (query, key, value)), score_mod=flex.alibi(slopes),
                         mask=flex.block_mask(flex.causal, None, None, 256, 256, "cpu"))
    cuda = flex.attention(*(t.cuda() for t in (query, key, value)), score_mod=flex.alibi(slopes.cuda()),
                          mask=flex.block_mask(flex.causal, None, None, 256, 256, "cuda"))
    torch.testing.assert_close(cuda.float().cpu(), cpu, atol=3e-3, rtol=3e-3)
