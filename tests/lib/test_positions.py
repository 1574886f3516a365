"""attnlib.positions: Vaswani's sinusoidal code, BERT's learned table, rotary positions (against
transformers' Llama) and ALiBi (against Press et al.'s published slopes and transformers' Bloom)."""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.models.bloom.modeling_bloom import _get_alibi_slopes, build_alibi_tensor
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

from attnlib import causal_mask
from attnlib.positions import (
    LearnedPositions,
    alibi_bias,
    alibi_slopes,
    apply_rotary,
    rotary_frequencies,
    rotary_matrix,
    rotary_permutation,
    rotate_half,
    sinusoidal_positions,
)
from tests.lib.tensors import randn


def test_sinusoidal_follows_the_formula():
    p = sinusoidal_positions(10, 6, dtype=torch.float64)
    assert p.shape == (10, 6)
    for pos in (0, 3, 9):
        for i in range(3):
            rate = 10_000 ** (-2 * i / 6)
            assert p[pos, 2 * i].item() == pytest.approx(math.sin(pos * rate), abs=1e-12)
            assert p[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos * rate), abs=1e-12)


def test_a_shift_is_a_linear_map():
    """Vaswani et al.'s reason for sines: PE(pos + k) is a fixed linear function of PE(pos)."""
    p = sinusoidal_positions(40, 8, dtype=torch.float64)
    k = 3
    shift = torch.linalg.lstsq(p[:30], p[k:30 + k]).solution  # (D, D)
    torch.testing.assert_close(p[:30] @ shift, p[k:30 + k])
    torch.testing.assert_close(p[30:37] @ shift, p[30 + k:37 + k])  # and it holds beyond the fit


def test_sinusoidal_bad_input():
    with pytest.raises(ValueError, match="length"):
        sinusoidal_positions(0, 4)
    with pytest.raises(TypeError, match="d_model"):
        sinusoidal_positions(3, 2.0)


def test_learned_positions_add_a_row_per_position():
    torch.manual_seed(0)
    layer = LearnedPositions(16, 8)
    x = torch.zeros(2, 5, 8)
    out = layer(x)
    torch.testing.assert_close(out[0], layer.table.weight[:5])
    torch.testing.assert_close(out[0], out[1])
    out.sum().backward()
    assert layer.table.weight.grad[:5].abs().sum() > 0 and layer.table.weight.grad[5:].abs().sum() == 0
    with pytest.raises(ValueError, match="max_length=16"):
        layer(torch.zeros(17, 8))


# --- rotary position embeddings: against transformers' Llama -------------------------------------------------

def _llama_rotary(head_dim, base, positions, like):
    """cos, sin (B, L, D) from transformers' own LlamaRotaryEmbedding, for a config with this head width."""
    config = LlamaConfig(hidden_size=head_dim * 2, num_attention_heads=2, head_dim=head_dim,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaRotaryEmbedding(config)(like, positions)


@pytest.mark.parametrize("head_dim, base, length", [(8, 10_000.0, 12), (64, 10_000.0, 50), (16, 500_000.0, 7)])
def test_rotary_equals_transformers_llama(head_dim, base, length):
    q, k = randn(2, 3, length, head_dim, dtype=torch.float32, seed=1), randn(2, 3, length, head_dim,
                                                                             dtype=torch.float32, seed=2)
    positions = torch.arange(length)[None].expand(2, length) + torch.tensor([[0], [5]])  # (B, L): 2nd row shifted
    cos, sin = _llama_rotary(head_dim, base, positions, q)  # (B, L, D), angles in float32
    q_hf, k_hf = apply_rotary_pos_emb(q, k, cos, sin)  # unsqueeze_dim=1: (B, H, L, D)
    ours = [apply_rotary(t, positions[:, None, :], base=base) for t in (q, k)]  # positions (B, 1, L)
    torch.testing.assert_close(ours[0], q_hf, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(ours[1], k_hf, atol=2e-5, rtol=1e-5)


def test_rotary_equals_transformers_formula_in_float64():
    """The convention exactly: transformers' apply_rotary_pos_emb with cos/sin of cat(freqs, freqs) in float64."""
    q, k = randn(1, 2, 9, 10, seed=3), randn(1, 2, 9, 10, seed=4)
    inv_freq = 1.0 / (10_000.0 ** (torch.arange(0, 10, 2, dtype=torch.float64) / 10))  # (D/2,)
    freqs = torch.arange(9, dtype=torch.float64)[:, None] * inv_freq  # (L, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)[None]  # (1, L, D)
    q_hf, k_hf = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    torch.testing.assert_close(apply_rotary(q), q_hf, atol=1e-12, rtol=0)
    torch.testing.assert_close(apply_rotary(k), k_hf, atol=1e-12, rtol=0)


def test_rotary_matrix_is_the_reference_path():
    x = randn(5, 12, seed=5)
    rotated = torch.stack([rotary_matrix(p, 12) @ x[p] for p in range(5)])  # (L, D): one matrix per position
    torch.testing.assert_close(apply_rotary(x), rotated, atol=1e-12, rtol=0)
    r = rotary_matrix(7.0, 12)
    torch.testing.assert_close(r @ r.T, torch.eye(12, dtype=torch.float64), atol=1e-12, rtol=0)  # a rotation
    torch.testing.assert_close(rotary_matrix(3, 12) @ rotary_matrix(4, 12), r, atol=1e-12, rtol=0)  # angles add


def test_rotary_position_zero_is_the_identity_and_norms_are_kept():
    x = randn(3, 6, 8, seed=6)
    torch.testing.assert_close(apply_rotary(x, positions=torch.zeros(6)), x, atol=0, rtol=0)
    torch.testing.assert_close(apply_rotary(x, positions=[9, 2, 4, 1, 0, 30]).norm(dim=-1), x.norm(dim=-1))
    assert torch.equal(rotate_half(rotate_half(x)), -x)  # two quarter turns
    torch.testing.assert_close(rotary_frequencies(8), 10_000.0 ** (-torch.arange(4, dtype=torch.float64) / 4))


@settings(max_examples=60, deadline=None)
@given(half=st.integers(1, 16), m=st.integers(0, 2_000), n=st.integers(0, 2_000), shift=st.integers(-500, 500),
       seed=st.integers(0, 2**16))
def test_rotated_scores_depend_only_on_the_position_difference(half, m, n, shift, seed):
    """RoPE's point: rot(q, m) · rot(k, n) = q · R(n - m) k, the same for (m + t, n + t)."""
    q, k = randn(1, 2 * half, seed=seed), randn(1, 2 * half, seed=seed + 1)
    score = (apply_rotary(q, [m]) * apply_rotary(k, [n])).sum()
    shifted = (apply_rotary(q, [m + shift]) * apply_rotary(k, [n + shift])).sum()
    relative = q[0] @ rotary_matrix(n - m, 2 * half) @ k[0]
    assert torch.isclose(score, relative, atol=1e-9, rtol=1e-9)
    assert torch.isclose(score, shifted, atol=1e-9, rtol=1e-9)


# --- the interleaved layout (RoFormer, GPT-J, Meta's Llama): against GPT-J's code and complex numbers ----------

def _complex_rotary(x, positions, base=10_000.0):
    """Meta's reference form, written independently: pair (2i, 2i+1) as the complex number x_2i + i x_2i+1,
    multiplied by e^(i · position · θ_i)."""
    dim = x.shape[-1]
    theta = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (D/2,)
    turn = torch.polar(torch.ones(len(positions), dim // 2, dtype=torch.float64),
                       torch.as_tensor(positions, dtype=torch.float64)[:, None] * theta)  # (L, D/2) unit complex
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], dim // 2, 2).contiguous())  # (..., L, D/2)
    return torch.view_as_real(pairs * turn).flatten(-2)  # (..., L, D)


@pytest.mark.parametrize("head_dim, length", [(8, 12), (64, 50), (2, 3)])
def test_interleaved_rotary_equals_gptj(head_dim, length):
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_rotary  # noqa: PLC0415
    from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions  # noqa: PLC0415

    x = randn(2, length, 3, head_dim, dtype=torch.float32, seed=head_dim)  # GPT-J's (B, L, H, D)
    sincos = create_sinusoidal_positions(length, head_dim)[None]  # (1, L, D): sin of the D/2 angles, then cos
    theirs = gptj_rotary(x, *torch.split(sincos, head_dim // 2, dim=-1))
    ours = apply_rotary(x.transpose(1, 2), layout="interleaved").transpose(1, 2)  # ours rotates (..., L, D)
    torch.testing.assert_close(ours, theirs, atol=2e-5, rtol=1e-5)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 24), length=st.integers(1, 9), offset=st.integers(-1_000, 5_000),
       heads=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_interleaved_rotary_equals_the_complex_form(half, length, offset, heads, seed):
    x = randn(heads, length, 2 * half, seed=seed)
    positions = [offset + 3 * i for i in range(length)]
    torch.testing.assert_close(apply_rotary(x, positions, layout="interleaved"), _complex_rotary(x, positions),
                               atol=1e-9, rtol=1e-9)
    rotated = torch.stack([rotary_matrix(p, 2 * half, layout="interleaved") @ row for p, row in zip(positions, x[0],
                                                                                                     strict=True)])
    torch.testing.assert_close(rotated, _complex_rotary(x, positions)[0], atol=1e-9, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(half=st.integers(1, 16), length=st.integers(1, 8), offset=st.integers(0, 3_000), seed=st.integers(0, 2**16))
def test_the_layouts_are_one_rotation_in_two_orders(half, length, offset, seed):
    """Half layout on permuted coordinates = interleaved layout, permuted; so permuting W_Q's and W_K's output
    features (what converting Meta's Llama weights to Hugging Face's does) leaves every score unchanged."""
    dim, positions = 2 * half, list(range(offset, offset + length))
    perm = rotary_permutation(dim)
    assert sorted(perm.tolist()) == list(range(dim))
    x = randn(length, dim, seed=seed)
    torch.testing.assert_close(apply_rotary(x[:, perm], positions, layout="half"),
                               apply_rotary(x, positions, layout="interleaved")[:, perm], atol=1e-10, rtol=0)
    embeddings, w_q, w_k = randn(length, 3 * dim, seed=seed + 1), randn(dim, 3 * dim, seed=seed + 2), randn(
        dim, 3 * dim, seed=seed + 3)  # nn.Linear's (d_out, D) weights
    q, k = embeddings @ w_q.T, embeddings @ w_k.T  # (L, D) each
    meta = apply_rotary(q, positions, layout="interleaved") @ apply_rotary(k, positions, layout="interleaved").T
    q_hf, k_hf = embeddings @ w_q[perm].T, embeddings @ w_k[perm].T  # the converted weights: rows permuted
    hf = apply_rotary(q_hf, positions, layout="half") @ apply_rotary(k_hf, positions, layout="half").T
    torch.testing.assert_close(hf, meta, atol=1e-9, rtol=1e-9)
    if half > 1 and length > 1:  # (at one position, query and key turn together: their score never changes)
        wrong = apply_rotary(q, positions, layout="half") @ apply_rotary(k, positions, layout="half").T
        assert not torch.allclose(wrong, meta, atol=1e-6)  # without the permutation the layouts give other scores


def test_rotary_layout_is_checked():
    with pytest.raises(ValueError, match="expected layout 'half'.*or 'interleaved'.*got 'llama'"):
        apply_rotary(torch.zeros(3, 4), layout="llama")
    with pytest.raises(ValueError, match="expected layout"):
        rotary_matrix(1.0, 4, layout="")
    with pytest.raises(ValueError, match="even width"):
        rotary_permutation(5)
    assert rotary_permutation(6).tolist() == [0, 2, 4, 1, 3, 5]


def test_rotary_bad_input():
    with pytest.raises(ValueError, match="even width D.*got D=5"):
        apply_rotary(torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"positions of shape \(\.\.\., L\) with L=3"):
        apply_rotary(torch.zeros(3, 4), positions=[0, 1])
    with pytest.raises(TypeError, match="floating-point"):
        apply_rotary(torch.zeros(3, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="2 dims"):
        apply_rotary(torch.zeros(4))
    with pytest.raises(ValueError, match="base"):
        apply_rotary(torch.zeros(3, 4), base=-1.0)


# --- ALiBi ----------------------------------------------------------------------------------------------------

def test_alibi_slopes_for_8_heads_are_the_published_ones():
    """Press et al.: for 8 heads the slopes are 1/2, 1/4, ..., 1/256."""
    assert alibi_slopes(8).tolist() == [1 / 2**h for h in range(1, 9)]


@pytest.mark.parametrize("num_heads", [1, 2, 3, 4, 5, 6, 8, 12, 16, 20, 32, 40, 64, 96])
def test_alibi_slopes_equal_transformers_bloom(num_heads):
    expected = _get_alibi_slopes(num_heads, torch.device("cpu")).to(torch.float64)  # computed in float32
    torch.testing.assert_close(alibi_slopes(num_heads), expected, atol=0, rtol=1e-6)


@pytest.mark.parametrize("num_heads", [1, 4, 16, 32])
def test_alibi_slopes_of_a_power_of_two_are_geometric(num_heads):
    expected = torch.tensor([2.0 ** (-8.0 * h / num_heads) for h in range(1, num_heads + 1)], dtype=torch.float64)
    torch.testing.assert_close(alibi_slopes(num_heads), expected, atol=0, rtol=1e-15)


@pytest.mark.parametrize("lq, lk", [(5, 5), (1, 7), (3, 8)])
def test_alibi_bias_follows_its_definition_end_aligned(lq, lk):
    bias = alibi_bias(4, lq, lk, dtype=torch.float64)
    assert bias.shape == (4, lq, lk)
    slopes = alibi_slopes(4)
    for h in range(4):
        for i in range(lq):
            for j in range(lk):
                assert bias[h, i, j].item() == pytest.approx(-slopes[h].item() * ((lk - lq + i) - j), abs=1e-15)
    assert bias[:, torch.arange(lq), torch.arange(lk - lq, lk)].eq(0).all()  # each query's own position
    assert (bias <= 0).eq(causal_mask(lq, lk, align="lower_right")).all()  # <= 0 exactly on the past and present


def test_alibi_attention_equals_bloom_bias_under_the_causal_mask():
    """Bloom adds m·j (the key's position) instead of −m·(i − j): a constant per row, which softmax ignores."""
    q, k, v = randn(1, 6, 10, 8, seed=1), randn(1, 6, 10, 8, seed=2), randn(1, 6, 10, 4, seed=3)
    causal = torch.zeros(10, 10, dtype=torch.float64).masked_fill(~causal_mask(10), float("-inf"))
    bloom = build_alibi_tensor(torch.ones(1, 10), 6, torch.float64).reshape(1, 6, 1, 10)  # (B, H, 1, Lk)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bloom + causal)
    ours = F.scaled_dot_product_attention(q, k, v, attn_mask=alibi_bias(6, 10, dtype=torch.float64) + causal)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-6)  # Bloom's slopes are float32


def test_alibi_bad_input():
    with pytest.raises(ValueError, match="num_heads"):
        alibi_bias(0, 3, 3)
    with pytest.raises(TypeError, match="Lk"):
        alibi_bias(2, 3, 2.5)
