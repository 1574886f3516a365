"""attnlib.multihead against torch.nn.MultiheadAttention and a per-head loop in plain torch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from attnlib import MultiHeadAttention, merge_heads, split_heads
from tests.lib.tensors import randn, random_bool_mask, tol

D, H, B, LQ, LK = 12, 3, 2, 4, 6
TOL64 = tol(torch.float64)


def _torch_mha(batch_first, bias=True, kdim=None, vdim=None, seed=0):
    torch.manual_seed(seed)
    module = nn.MultiheadAttention(D, H, dropout=0.25, bias=bias, kdim=kdim, vdim=vdim,
                                   batch_first=batch_first, dtype=torch.float64)
    if bias:  # torch initialises the biases to zero: make them count
        with torch.no_grad():
            module.in_proj_bias.normal_()
            module.out_proj.bias.normal_()
    return module.eval()  # eval: no dropout, the only mode in which the two can agree


def _masks(kind, lq, seed=0):
    """(torch attn_mask, torch key_padding_mask, attnlib attn_mask) for one kind of masking."""
    keep = random_bool_mask(lq, LK, seed=seed)  # (Lq, Lk) True = may attend (attnlib's convention)
    pad = torch.arange(LK)[None, :] >= torch.tensor([LK, LK - 2])[:, None]  # (B, Lk) True = padding (torch's)
    additive = randn(lq, LK, seed=seed + 1)
    table = {
        "none": (None, None, None),
        "attn_bool": (~keep, None, keep),
        "attn_float": (additive, None, additive),
        "key_padding": (None, pad, (~pad)[:, None, None, :]),  # (B, Lk) -> (B, 1, 1, Lk)
        "both": (~keep, pad, keep & (~pad)[:, None, None, :]),  # a key must pass both masks
    }
    return table[kind]


def _inputs(cross, kdim, vdim):
    query = randn(B, LQ if cross else LK, D, seed=11)  # self-attention: L = Lq = Lk = LK
    if not cross:
        return query, query, query
    return query, randn(B, LK, kdim or D, seed=12), randn(B, LK, vdim or D, seed=13)


def _run_torch(module, query, key, value, attn_mask, key_padding_mask):
    if not module.batch_first:  # torch's layout is then (L, B, D)
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    out, weights = module(query, key, value, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                          need_weights=True, average_attn_weights=True)
    return (out if module.batch_first else out.transpose(0, 1)), weights


CASES = [  # (cross, kdim, vdim)
    (False, None, None),
    (True, None, None),
    (True, 5, 7),
]


@pytest.mark.parametrize("mask_kind", ["none", "attn_bool", "attn_float", "key_padding", "both"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("cross, kdim, vdim", CASES, ids=["self", "cross", "cross-kdim-vdim"])
def test_from_torch_matches_torch(cross, kdim, vdim, batch_first, bias, mask_kind):
    module = _torch_mha(batch_first, bias, kdim, vdim)
    query, key, value = _inputs(cross, kdim, vdim)
    torch_mask, torch_padding, ours_mask = _masks(mask_kind, query.shape[1])
    expected_out, expected_weights = _run_torch(module, query, key, value, torch_mask, torch_padding)
    ours = MultiHeadAttention.from_torch(module)
    out, weights = ours(query, key, value, attn_mask=ours_mask)
    torch.testing.assert_close(out, expected_out, **TOL64)
    torch.testing.assert_close(weights.mean(dim=1), expected_weights, **TOL64)  # head-averaged like torch


def test_per_head_torch_mask_of_shape_b_times_h():
    module = _torch_mha(batch_first=True)
    query, key, value = _inputs(True, None, None)
    keep = random_bool_mask(B, H, LQ, LK, seed=8)
    expected_out, expected_weights = _run_torch(module, query, key, value, ~keep.reshape(B * H, LQ, LK), None)
    out, weights = MultiHeadAttention.from_torch(module)(query, key, value, attn_mask=keep)
    torch.testing.assert_close(out, expected_out, **TOL64)
    torch.testing.assert_close(weights.mean(dim=1), expected_weights, **TOL64)


def test_is_causal_matches_torch_with_its_causal_mask():
    module = _torch_mha(batch_first=True)
    x = randn(B, LK, D, seed=9)
    causal = nn.Transformer.generate_square_subsequent_mask(LK, dtype=torch.float64)  # torch's own: -inf above
    expected_out, expected_weights = _run_torch(module, x, x, x, causal, None)
    for need_weights in (True, False):
        out, weights = MultiHeadAttention.from_torch(module)(x, is_causal=True, need_weights=need_weights)
        torch.testing.assert_close(out, expected_out, **TOL64)
    torch.testing.assert_close(MultiHeadAttention.from_torch(module)(x, is_causal=True)[1].mean(1),
                               expected_weights, **TOL64)


def test_forward_equals_a_loop_over_heads_in_plain_torch():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).double()
    query, key, value = _inputs(True, None, None)
    out, weights = mha(query, key, value)
    q, k, v = mha.q_proj(query), mha.k_proj(key), mha.v_proj(value)
    dk = D // H
    heads = []
    for h in range(H):
        cols = slice(h * dk, (h + 1) * dk)
        w = torch.softmax(q[..., cols] @ k[..., cols].transpose(1, 2) / dk**0.5, dim=-1)  # (B, Lq, Lk)
        torch.testing.assert_close(weights[:, h], w, **TOL64)
        heads.append(w @ v[..., cols])  # (B, Lq, Dk)
    torch.testing.assert_close(out, mha.out_proj(torch.cat(heads, dim=-1)), **TOL64)


def test_defaults_key_and_value_to_query_and_fast_path_agrees():
    torch.manual_seed(0)
    mha = MultiHeadAttention(D, H).double()
    x = randn(B, LK, D, seed=1)
    out, weights = mha(x)
    explicit, _ = mha(x, x, x)
    fast, none = mha(x, need_weights=False)
    assert none is None and weights.shape == (B, H, LK, LK)
    torch.testing.assert_close(out, explicit, rtol=0, atol=0)
    torch.testing.assert_close(out, fast, **TOL64)


@pytest.mark.parametrize("batch_first", [True, False])
def test_from_torch_keeps_dtype_and_copies(batch_first):
    module = _torch_mha(batch_first, kdim=5, vdim=7)
    ours = MultiHeadAttention.from_torch(module)
    assert ours.out_proj.weight.dtype == torch.float64 and (ours.kdim, ours.vdim) == (5, 7)
    with torch.no_grad():
        ours.q_proj.weight.zero_()
    assert module.q_proj_weight.abs().sum() > 0  # a copy, not shared storage


@pytest.mark.parametrize("flag", ["add_bias_kv", "add_zero_attn"])
def test_from_torch_refuses_what_it_cannot_copy(flag):
    module = nn.MultiheadAttention(D, H, **{flag: True})
    with pytest.raises(ValueError, match="without add_bias_kv/add_zero_attn"):
        MultiHeadAttention.from_torch(module)


def test_split_heads_gives_each_head_its_slice_of_features():
    x = randn(B, LK, D, seed=2)
    heads = split_heads(x, H)
    dk = D // H
    assert heads.shape == (B, H, LK, dk)
    for h in range(H):
        torch.testing.assert_close(heads[:, h], x[..., h * dk:(h + 1) * dk], rtol=0, atol=0)


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 6, 12])
def test_merge_heads_undoes_split_heads(num_heads):
    x = randn(B, LK, D, seed=3)
    torch.testing.assert_close(merge_heads(split_heads(x, num_heads)), x, rtol=0, atol=0)


def test_split_heads_accepts_non_contiguous_input():
    x = randn(LK, B, D, seed=4).transpose(0, 1)  # (B, L, D) view with swapped batch/length strides
    y = randn(B, D, LK, seed=5).transpose(1, 2)  # (B, L, D) whose feature dim is not contiguous
    assert not x.is_contiguous() and not y.is_contiguous()
    for t in (x, y):
        torch.testing.assert_close(merge_heads(split_heads(t, H)), t, rtol=0, atol=0)


# --- grouped-query and multi-query attention (num_kv_heads) --------------------------------------------

@pytest.mark.parametrize("num_heads, num_kv_heads", [(6, 6), (6, 3), (6, 2), (6, 1), (4, 2)])
@pytest.mark.parametrize("is_causal", [False, True])
def test_num_kv_heads_equals_a_hand_built_reference(num_heads, num_kv_heads, is_causal):
    torch.manual_seed(num_heads + num_kv_heads)
    d = 24
    mha = MultiHeadAttention(d, num_heads, num_kv_heads=num_kv_heads).double()
    dk, group = d // num_heads, num_heads // num_kv_heads
    assert mha.k_proj.weight.shape == (num_kv_heads * dk, d) == mha.v_proj.weight.shape
    x = randn(B, LK, d, seed=1)
    out, weights = mha(x, is_causal=is_causal)
    q, k, v = mha.q_proj(x), mha.k_proj(x), mha.v_proj(x)  # (B, L, H*dk), (B, L, Hkv*dk) x 2
    allowed = torch.ones(LK, LK, dtype=torch.bool).tril() if is_causal else torch.ones(LK, LK, dtype=torch.bool)
    heads = []
    for h in range(num_heads):
        g = h // group  # the key/value head this query head reads
        scores = q[..., h * dk:(h + 1) * dk] @ k[..., g * dk:(g + 1) * dk].transpose(1, 2) / dk**0.5
        w = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)  # (B, L, L)
        torch.testing.assert_close(weights[:, h], w, **TOL64)
        heads.append(w @ v[..., g * dk:(g + 1) * dk])
    torch.testing.assert_close(out, mha.out_proj(torch.cat(heads, dim=-1)), **TOL64)
    fast, _ = mha(x, is_causal=is_causal, need_weights=False)
    torch.testing.assert_close(fast, out, **TOL64)


def test_num_kv_heads_shrinks_the_key_and_value_projections():
    full = MultiHeadAttention(32, 8, bias=False)
    mqa = MultiHeadAttention(32, 8, bias=False, num_kv_heads=1)
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(full) == 4 * 32 * 32
    assert count(mqa) == 2 * 32 * 32 + 2 * 32 * 4  # W_Q, W_O full; W_K, W_V one head of 4
    assert full.num_kv_heads == 8 and mqa.num_kv_heads == 1


@pytest.mark.parametrize("num_kv_heads, error", [(4, ValueError), (0, ValueError), (2.0, TypeError)])
def test_bad_num_kv_heads_is_a_clear_error(num_kv_heads, error):
    with pytest.raises(error, match="num_kv_heads"):
        MultiHeadAttention(12, 6, num_kv_heads=num_kv_heads)
