"""The IO cost of attention: bytes moved between slow HBM and fast on-chip SRAM, and the roofline.

A GPU computes far faster than it reads its main memory (HBM), so attention's speed is set by how many
bytes it moves, not by its FLOPs (Dao et al. 2022). This module counts those bytes for one head of
length L = N and width D = d, following the paper's two algorithms step by step:

* ``standard_attention_io``: Algorithm 0, which writes the (N, N) scores S and weights P to HBM and
  reads them back: Θ(Nd + N²) elements;
* ``flash_attention_io``: Algorithm 1 (FlashAttention), tiles that fit an SRAM of M elements, with
  S and P never leaving the chip: Θ(N²d²/M) elements. ``flash_attention_io_by_loops`` walks the
  algorithm's loops and adds up each load and store: the readable reference the closed form is tested
  against.

``decode_attention_io`` counts one decoding step (one new query against a cache of L keys and values).
``attention_flops`` counts the matrix-multiply FLOPs both share; ``roofline`` turns FLOPs and bytes into
the time a GPU with a given bandwidth and peak FLOP/s needs at least.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attnlib._checks import require_positive, require_positive_int


@dataclass(frozen=True)
class HBMTraffic:
    """Bytes read from and written to HBM by one attention head's forward pass."""

    reads: int
    writes: int

    @property
    def total(self) -> int:
        """Bytes moved in either direction."""
        return self.reads + self.writes


@dataclass(frozen=True)
class GPU:
    """A GPU's published HBM bandwidth (bytes/s) and dense half-precision tensor-core peak (FLOP/s)."""

    name: str
    bandwidth: float
    peak_flops: float

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte above which the compute units, not HBM, set the pace: peak_flops / bandwidth."""
        return self.peak_flops / self.bandwidth


# NVIDIA's data sheets: A100 SXM4 40 GB, 1,555 GB/s HBM2 and 312 TFLOP/s FP16/BF16 tensor (dense; the sheet's
# 624 counts 2:4 sparsity); H100 SXM5, 3.35 TB/s HBM3 and 989 TFLOP/s BF16 tensor (dense; the sheet's 1,979
# counts 2:4 sparsity). Attention's matrices are dense, so the dense numbers are the roof.
A100_SXM4_40GB = GPU("NVIDIA A100 SXM4 40GB", 1.555e12, 312e12)
H100_SXM5 = GPU("NVIDIA H100 SXM5 80GB", 3.35e12, 989e12)


def _check_sizes(length: int, head_dim: int, bytes_per_element: int) -> None:
    require_positive_int("length", length)
    require_positive_int("head_dim", head_dim)
    require_positive_int("bytes_per_element", bytes_per_element)


def standard_attention_io(length: int, head_dim: int, bytes_per_element: int = 2) -> HBMTraffic:
    """HBM traffic of Algorithm 0 for Q, K, V of shape (L, D): reads 3LD + 2L², writes 2L² + LD elements.

    Step 1 reads Q, K and writes S; step 2 reads S and writes P; step 3 reads P, V and writes O.
    """
    _check_sizes(length, head_dim, bytes_per_element)
    n, d = length, head_dim
    reads = 2 * n * d + n * n + n * n + n * d  # Q, K; S; P, V
    writes = n * n + n * n + n * d  # S; P; O
    return HBMTraffic(reads * bytes_per_element, writes * bytes_per_element)


def flash_block_sizes(head_dim: int, sram_elements: int) -> tuple[int, int]:
    """Algorithm 1's block sizes (B_r, B_c) for an SRAM of M elements: B_c = ⌈M/4d⌉, B_r = min(B_c, d)."""
    require_positive_int("head_dim", head_dim)
    require_positive_int("sram_elements", sram_elements)
    block_cols = math.ceil(sram_elements / (4 * head_dim))
    return min(block_cols, head_dim), block_cols


def _blocks(length: int, block: int) -> list[int]:
    """The sizes of the blocks that cover ``length`` rows; the last may be shorter."""
    return [min(block, length - start) for start in range(0, length, block)]


def flash_attention_io_by_loops(length: int, head_dim: int, sram_elements: int,
                                bytes_per_element: int = 2) -> HBMTraffic:
    """Algorithm 1's HBM traffic for Q, K, V (L, D), counted by walking its loops load by load.

    The reference path for ``flash_attention_io``: step 2 writes O (L, D), ℓ and m (L,) initialised; the
    outer loop loads each key/value block once; the inner loop loads Q_i, O_i, ℓ_i, m_i and stores O_i, ℓ_i, m_i.
    """
    _check_sizes(length, head_dim, bytes_per_element)
    block_rows, block_cols = flash_block_sizes(head_dim, sram_elements)
    d, reads, writes = head_dim, 0, length * head_dim + 2 * length  # step 2: O, ℓ, m initialised in HBM
    for cols in _blocks(length, block_cols):
        reads += 2 * cols * d  # step 6: K_j, V_j
        for rows in _blocks(length, block_rows):
            reads += 2 * rows * d + 2 * rows  # step 8: Q_i, O_i, ℓ_i, m_i
            writes += rows * d + 2 * rows  # steps 12-13: O_i, ℓ_i, m_i
    return HBMTraffic(reads * bytes_per_element, writes * bytes_per_element)


def flash_attention_io(length: int, head_dim: int, sram_elements: int, bytes_per_element: int = 2) -> HBMTraffic:
    """Algorithm 1's HBM traffic for Q, K, V (L, D) in closed form, T_c = ⌈L/B_c⌉ key/value blocks.

    Reads 2LD + T_c·L(2D + 2), writes LD + 2L + T_c·L(D + 2) elements: Θ(L²D²/M), since T_c ≈ 4LD/M.
    """
    _check_sizes(length, head_dim, bytes_per_element)
    _, block_cols = flash_block_sizes(head_dim, sram_elements)
    n, d, passes = length, head_dim, math.ceil(length / block_cols)  # T_c: how often Q, O, ℓ, m are swept
    reads = 2 * n * d + passes * n * (2 * d + 2)
    writes = n * d + 2 * n + passes * n * (d + 2)
    return HBMTraffic(reads * bytes_per_element, writes * bytes_per_element)


def decode_attention_io(length: int, head_dim: int, bytes_per_element: int = 2) -> HBMTraffic:
    """HBM traffic of one decoding step of one head: a query (1, D) against a cache K, V of shape (L, D).

    A fused kernel reads q, K and V (2LD + D elements) and writes the output o (D); the L scores stay on chip.
    """
    _check_sizes(length, head_dim, bytes_per_element)
    reads = 2 * length * head_dim + head_dim  # K, V; q
    return HBMTraffic(reads * bytes_per_element, head_dim * bytes_per_element)


def attention_flops(length: int, head_dim: int, *, query_length: int | None = None) -> int:
    """FLOPs of the two matrix products of one head, Q Kᵀ (Lq, D)·(D, L) and P V (Lq, L)·(L, D): 4·Lq·L·D.

    ``query_length`` Lq defaults to L (self-attention: 4L²D); 1 is a decoding step. A multiply-add counts
    as 2 FLOPs; the softmax's O(Lq·L) exponentials and sums are left out.
    """
    require_positive_int("length", length)
    require_positive_int("head_dim", head_dim)
    queries = length if query_length is None else query_length
    require_positive_int("query_length", queries)
    return 4 * queries * length * head_dim


def arithmetic_intensity(flops: float, bytes_moved: float) -> float:
    """FLOPs per byte moved to or from HBM."""
    require_positive("flops", flops)
    require_positive("bytes_moved", bytes_moved)
    return flops / bytes_moved


def roofline(flops: float, bytes_moved: float, bandwidth: float, peak_flops: float) -> tuple[float, str]:
    """The least time (s) and what bounds it: max(FLOPs / peak, bytes / bandwidth), "memory" or "compute".

    The attainable FLOP/s is min(peak, intensity · bandwidth); the ridge point peak / bandwidth is the
    intensity above which the compute units, not HBM, set the pace.
    """
    for name, value in (("flops", flops), ("bytes_moved", bytes_moved), ("bandwidth", bandwidth),
                        ("peak_flops", peak_flops)):
        require_positive(name, value)
    compute, memory = flops / peak_flops, bytes_moved / bandwidth
    return (memory, "memory") if memory >= compute else (compute, "compute")
