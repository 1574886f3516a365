"""attnlib.io_cost: HBM traffic of standard attention and FlashAttention against Dao et al.'s closed forms."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnlib.io_cost import (
    A100_SXM4_40GB,
    H100_SXM5,
    arithmetic_intensity,
    attention_flops,
    decode_attention_io,
    flash_attention_io,
    flash_attention_io_by_loops,
    flash_block_sizes,
    roofline,
    standard_attention_io,
)


@settings(max_examples=60, deadline=None)
@given(length=st.integers(1, 300), head_dim=st.integers(1, 256), sram=st.integers(1, 200_000),
       itemsize=st.sampled_from([1, 2, 4]))
def test_closed_form_equals_walking_algorithm_1(length, head_dim, sram, itemsize):
    assert flash_attention_io(length, head_dim, sram, itemsize) == flash_attention_io_by_loops(
        length, head_dim, sram, itemsize)


@pytest.mark.parametrize("length, head_dim, sram", [(4096, 64, 49_152), (5000, 128, 98_304), (1000, 80, 30_000)])
def test_closed_form_equals_walking_algorithm_1_at_real_sizes(length, head_dim, sram):
    assert flash_attention_io(length, head_dim, sram) == flash_attention_io_by_loops(length, head_dim, sram)


def test_standard_attention_moves_4ld_plus_4l2_elements():
    for n, d in ((1, 1), (7, 3), (1024, 64)):
        traffic = standard_attention_io(n, d, bytes_per_element=1)
        assert traffic.reads == 3 * n * d + 2 * n * n and traffic.writes == 2 * n * n + n * d
        assert standard_attention_io(n, d, 2).total == 2 * (4 * n * d + 4 * n * n)


def _ratios(counts, bound, lengths):
    return [counts(n) / bound(n) for n in lengths]


def test_standard_attention_is_theta_ld_plus_l2():
    """Dao et al., Theorem 2: Θ(Nd + N²). Algorithm 0 moves exactly 4(Nd + N²) elements."""
    for d in (16, 64, 128):
        ratios = _ratios(lambda n, d=d: standard_attention_io(n, d, 1).total, lambda n, d=d: n * d + n * n,
                         [2**k for k in range(6, 16)])
        assert ratios == [4.0] * len(ratios)


@pytest.mark.parametrize("head_dim, sram", [(64, 49_152), (128, 98_304), (32, 8_192)])
def test_flash_attention_is_theta_l2_d2_over_m(head_dim, sram):
    """Theorem 2: Θ(N²d²/M). With B_c = M/4d exactly, the ratio tends to 4(3d + 4)/d as N grows."""
    assert sram % (4 * head_dim) == 0
    limit = 4 * (3 * head_dim + 4) / head_dim
    lengths = [2**k for k in range(10, 18)]
    ratios = _ratios(lambda n: flash_attention_io(n, head_dim, sram, 1).total,
                     lambda n: n * n * head_dim**2 / sram, lengths)
    gaps = [abs(r / limit - 1) for r in ratios]
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.01  # shrinking, within 1% at N = 131072


def test_flash_moves_fewer_bytes_than_standard_by_about_m_over_3d2():
    """The two leading terms: 4N² against ~12N²d²/M, a ratio ~M/(3d²) (for M well above d²)."""
    n, d, m = 65_536, 64, 98_304
    ratio = standard_attention_io(n, d).total / flash_attention_io(n, d, m).total
    assert ratio == pytest.approx(m / (3 * d * d) * 3 * d / (3 * d + 4), rel=0.01)
    assert ratio > 1


def test_block_sizes_follow_algorithm_1():
    assert flash_block_sizes(64, 100_000) == (64, math.ceil(100_000 / 256))
    assert flash_block_sizes(128, 1_000) == (2, 2)  # B_r = min(⌈M/4d⌉, d)


def test_flops_intensity_and_roofline():
    n, d = 4096, 64
    flops = attention_flops(n, d)
    assert flops == 2 * n * d * n + 2 * n * n * d  # Q Kᵀ then P V, multiply-adds counted as 2
    standard, flash = standard_attention_io(n, d), flash_attention_io(n, d, 98_304)
    low, high = arithmetic_intensity(flops, standard.total), arithmetic_intensity(flops, flash.total)
    assert low == flops / standard.total and high > low
    gpu = A100_SXM4_40GB
    seconds, bound = roofline(flops, standard.total, gpu.bandwidth, gpu.peak_flops)
    assert bound == "memory" and seconds == standard.total / gpu.bandwidth  # below the ridge point
    assert low < gpu.peak_flops / gpu.bandwidth
    seconds, bound = roofline(flops, 1, gpu.bandwidth, gpu.peak_flops)
    assert bound == "compute" and seconds == flops / gpu.peak_flops


def test_bad_input():
    with pytest.raises(ValueError, match="length"):
        standard_attention_io(0, 4)
    with pytest.raises(TypeError, match="sram_elements"):
        flash_attention_io(8, 4, 2.5)
    with pytest.raises(ValueError, match="bandwidth"):
        roofline(1.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="query_length"):
        attention_flops(8, 4, query_length=0)
    with pytest.raises(ValueError, match="length"):
        decode_attention_io(0, 4)


@settings(max_examples=200, deadline=None)
@given(length=st.integers(1, 4096), head_dim=st.integers(1, 256), data=st.data())
def test_flash_attention_stays_within_constant_multiples_of_l2_d2_over_m(length, head_dim, data):
    """Theorem 2's Θ(N²d²/M) for every d ≤ M ≤ Nd, with explicit constants from Algorithm 1's block sizes.

    Upper: T_c ≤ 4Nd/M + 1 and M ≤ Nd give at most 4(3 + 4/d) + (3 + 4/d) + (3 + 2/d) ≤ 40 times N²d²/M.
    Lower: M ≥ 4d gives B_c ≤ M/2d, so T_c ≥ 2Nd/M and at least 6N²d²/M; M < 4d gives B_c = 1, T_c = N and
    at least 3N²d ≥ 3N²d²/M.
    """
    sram = data.draw(st.integers(head_dim, length * head_dim))
    ratio = flash_attention_io(length, head_dim, sram, 1).total / (length**2 * head_dim**2 / sram)
    assert 3 <= ratio <= 40


def test_gpu_constants_are_the_datasheets_dense_tensor_numbers():
    """NVIDIA's data sheets; the sparse headline (A100 624, H100 1,979 TFLOP/s) is twice the dense number."""
    assert (A100_SXM4_40GB.bandwidth, A100_SXM4_40GB.peak_flops) == (1_555e9, 312e12)
    assert (H100_SXM5.bandwidth, H100_SXM5.peak_flops) == (3.35e12, 989e12)
    assert 2 * A100_SXM4_40GB.peak_flops == 624e12 and abs(2 * H100_SXM5.peak_flops - 1_979e12) <= 1e12  # 989.4 rounded
    assert H100_SXM5.ridge_point == H100_SXM5.peak_flops / H100_SXM5.bandwidth
    assert 290 < H100_SXM5.ridge_point < 300 and 200 < A100_SXM4_40GB.ridge_point < 201


def test_decoding_step_reads_the_cache_once_at_about_one_flop_per_byte():
    """One query against L cached keys and values: 2LD + D elements in, D out; 4LD FLOPs; intensity → 1 in 16 bits."""
    for n, d in ((1, 1), (4096, 128), (100, 64)):
        traffic = decode_attention_io(n, d, bytes_per_element=1)
        assert (traffic.reads, traffic.writes) == (2 * n * d + d, d)
        assert attention_flops(n, d, query_length=1) == 2 * n * d + 2 * n * d  # q Kᵀ, then p V
    intensities = [arithmetic_intensity(attention_flops(n, 128, query_length=1), decode_attention_io(n, 128).total)
                   for n in (64, 1024, 65_536)]
    assert intensities == sorted(intensities) and 0.99 < intensities[-1] < 1
    assert attention_flops(300, 16, query_length=300) == attention_flops(300, 16)
