"""FlashAttention-2 as Triton kernels: the forward and backward passes fused, one tile at a time, on chip.

``FlashAttention.apply(query, key, value, is_causal)`` computes what ``attnlib.flash.FlashAttention`` does, but
each step runs inside one GPU *program* (a block of threads) instead of as a torch operation per tile:

* the forward pass gives each program a block of ``BLOCK_M`` queries; it walks over the keys ``BLOCK_N`` at a
  time, keeping the running maximum, sum and output of the online softmax in registers, and writes the output
  and the log-sum-exp once (``forward_kernel``, ``forward_tiles``);
* the backward pass gives each program a block of keys, which accumulates their dK and dV over every query that
  sees them (``backward_dkdv_kernel``), and each program of a second launch a block of queries for dQ
  (``backward_dq_kernel``): each gradient is written once, by one program, without atomics;
* causal attention never visits a tile wholly above the diagonal: the loops stop there (skipped, not masked).

The same source runs compiled on a CUDA GPU and, where there is none (or with ``TRITON_INTERPRET=1``), in
Triton's interpreter, which executes each program with NumPy on the CPU: slow, but every line can be
run and checked on a laptop. Triton is optional (``pip install attnlib[kernels]``); without it this module
imports, and ``FlashAttention`` says what is missing. Shapes: query (..., Hq, Lq, D), key and value
(..., Hkv, Lk, D) with Hkv dividing Hq (grouped-query attention when smaller); float16, bfloat16 or float32.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

import torch
import torch.nn.functional as F

if "triton" not in sys.modules and not torch.cuda.is_available():
    # No GPU: Triton's interpreter. Set before Triton is imported, since its own library (tl.zeros, ...) reads it then.
    os.environ.setdefault("TRITON_INTERPRET", "1")
try:
    import triton
    import triton.language as tl
except ImportError:  # attnlib[kernels] not installed: the module still imports (FlashAttention says why not)
    triton = tl = None

#: True when the kernels run in Triton's interpreter (NumPy on the CPU), decided once, at import.
INTERPRET = triton is not None and os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634  # log2(e): the kernels use exp2, so scores are kept in base-2 units
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _kernel(fn):
    """``triton.jit``: compiled for the GPU, or run by Triton's interpreter (NumPy) where ``INTERPRET``."""
    return fn if triton is None else triton.jit(fn)


@_kernel
def forward_tiles(acc, l_i, m_i, q, k_head, v_head, offs_m, offs_n, offs_d, lo, hi, Lk, qk_scale,
                  HEAD_D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, IS_CAUSAL: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Fold the key blocks [lo, hi) into one query block's online softmax; returns (acc, l_i, m_i).

    acc (BLOCK_M, D) float32 is the running output, l_i and m_i (BLOCK_M,) the running sum and maximum (in
    base 2), q (BLOCK_M, D) the queries; ``k_head``, ``v_head`` point at this head's keys and values (Lk, D).
    ``MASKED``: blocks cut by the causal diagonal or by the end of the keys, whose scores get a mask.
    """
    for start_n in range(lo, hi, BLOCK_N):
        cols = tl.multiple_of(start_n, BLOCK_N) + offs_n  # (BLOCK_N,) the key positions of this tile
        rows = cols[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_N, D) element offsets of their rows
        if MASKED:
            k = tl.load(k_head + rows, mask=cols[:, None] < Lk, other=0.0)
            v = tl.load(v_head + rows, mask=cols[:, None] < Lk, other=0.0)
        else:
            k = tl.load(k_head + rows)
            v = tl.load(v_head + rows)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BLOCK_M, D) @ (D, BLOCK_N), base 2
        if MASKED:
            visible = cols[None, :] < Lk
            if IS_CAUSAL:
                visible = visible & (offs_m[:, None] >= cols[None, :])  # query i sees the keys j <= i
            s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))  # (BLOCK_M,) the running maximum
        p = tl.math.exp2(s - m_new[:, None])  # (BLOCK_M, BLOCK_N) the tile's weights, not yet normalised
        alpha = tl.math.exp2(m_i - m_new)  # (BLOCK_M,) corrects what was summed under the old maximum
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)  # acc·alpha + P V
        m_i = m_new
    return acc, l_i, m_i


@_kernel
def forward_kernel(Q, K, V, OUT, LSE, Lq, Lk, qk_scale, GROUPS: tl.constexpr, HEAD_D: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """One program: the output OUT (BLOCK_M, D) and log-sum-exp (BLOCK_M,) of one query block of one head.

    Q, OUT (Z*Hq, Lq, D), K, V (Z*Hkv, Lk, D), LSE (Z*Hq, Lq) are contiguous; the grid is
    (⌈Lq / BLOCK_M⌉, Z*Hq). Query head h reads key/value head h // GROUPS.
    """
    block = tl.program_id(0)
    if IS_CAUSAL:  # the last query blocks see the most keys: start them first, so no long one is left for the end
        block = tl.num_programs(0) - 1 - block
    start_m = block * BLOCK_M  # this program's first query
    head = tl.program_id(1).to(tl.int64)  # which (batch, query head); int64: offsets can pass 2**31
    offs_m = start_m + tl.arange(0, BLOCK_M)  # (BLOCK_M,) its query positions
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    q_rows = head * Lq * HEAD_D + offs_m[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_M, D) element offsets
    q = tl.load(Q + q_rows, mask=offs_m[:, None] < Lq, other=0.0)  # loaded once, kept in registers
    k_head = K + (head // GROUPS) * Lk * HEAD_D
    v_head = V + (head // GROUPS) * Lk * HEAD_D
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    if IS_CAUSAL:  # keys before the block's first query: seen by all of it; up to its last query: masked
        full_end = tl.minimum(start_m, (Lk // BLOCK_N) * BLOCK_N)
        end = tl.minimum(start_m + BLOCK_M, Lk)  # keys after that are never visited
    else:
        full_end = (Lk // BLOCK_N) * BLOCK_N
        end = Lk
    acc, l_i, m_i = forward_tiles(acc, l_i, m_i, q, k_head, v_head, offs_m, offs_n, offs_d, 0, full_end, Lk,
                                  qk_scale, HEAD_D, BLOCK_N, False, IS_CAUSAL, PRECISION)
    acc, l_i, m_i = forward_tiles(acc, l_i, m_i, q, k_head, v_head, offs_m, offs_n, offs_d, full_end, end, Lk,
                                  qk_scale, HEAD_D, BLOCK_N, True, IS_CAUSAL, PRECISION)
    lse = (m_i + tl.math.log2(l_i)) / 1.4426950408889634  # back to base e: log Σ_j exp(s_j)
    tl.store(OUT + q_rows, (acc / l_i[:, None]).to(OUT.dtype.element_ty), mask=offs_m[:, None] < Lq)
    tl.store(LSE + head * Lq + offs_m, lse, mask=offs_m < Lq)


@_kernel
def backward_dkdv_tiles(dk, dv, k, v, q_head, do_head, lse_head, delta_head, offs_n, offs_m, offs_d, lo, hi, Lq,
                        qk_scale, HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, MASKED: tl.constexpr,
                        PRECISION: tl.constexpr):
    """Add to dk, dv (BLOCK_N, D) the share of the query blocks [lo, hi) of one query head; returns (dk, dv).

    k, v (BLOCK_N, D) are this program's keys and values, at the positions ``offs_n`` (BLOCK_N,);
    ``q_head``, ``do_head`` point at the head's queries and output gradients (Lq, D), ``lse_head`` and
    ``delta_head`` at its log-sum-exps and rowsum(dO ∘ O) (Lq,). ``MASKED``: blocks cut by the causal diagonal.
    """
    for start_m in range(lo, hi, BLOCK_M):
        rows = tl.multiple_of(start_m, BLOCK_M) + offs_m  # (BLOCK_M,) the query positions of this tile
        inside = rows < Lq  # rows past the end load zeros: their dO = 0 adds nothing
        offsets = rows[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_M, D)
        q = tl.load(q_head + offsets, mask=inside[:, None], other=0.0)
        do = tl.load(do_head + offsets, mask=inside[:, None], other=0.0)
        lse = tl.load(lse_head + rows, mask=inside, other=0.0) * 1.4426950408889634  # (BLOCK_M,) in base 2
        delta = tl.load(delta_head + rows, mask=inside, other=0.0)  # (BLOCK_M,)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale  # Sᵀ (BLOCK_N, BLOCK_M), base 2
        p_t = tl.math.exp2(s_t - lse[None, :])  # Pᵀ: the forward's weights, recomputed from the lse
        if MASKED:
            p_t = tl.where(rows[None, :] >= offs_n[:, None], p_t, 0.0)  # query i sees the keys j <= i
        dv += tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)  # dV += Pᵀ dO, (BLOCK_N, D)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)  # dPᵀ = V dOᵀ, (BLOCK_N, BLOCK_M)
        ds_t = p_t * (dp_t - delta[None, :])  # dSᵀ = Pᵀ ∘ (dPᵀ − Δ)
        dk += tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)  # dK += dSᵀ Q, (BLOCK_N, D)
    return dk, dv


@_kernel
def backward_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, Lq, Lk, qk_scale, scale, GROUPS: tl.constexpr,
                         HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
                         PRECISION: tl.constexpr):
    """One program: dK and dV (BLOCK_N, D) of one key block of one key/value head, over every query that sees it.

    Q, DO (Z*Hq, Lq, D), K, V, DK, DV (Z*Hkv, Lk, D), LSE, DELTA (Z*Hq, Lq) are contiguous; the grid is
    (⌈Lk / BLOCK_N⌉, Z*Hkv). A key/value head serves the GROUPS query heads that read it.
    """
    start_n = tl.program_id(0) * BLOCK_N  # this program's first key
    kv_head = tl.program_id(1).to(tl.int64)
    offs_n = start_n + tl.arange(0, BLOCK_N)  # (BLOCK_N,) its key positions
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_D)
    kv_rows = kv_head * Lk * HEAD_D + offs_n[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_N, D)
    k = tl.load(K + kv_rows, mask=offs_n[:, None] < Lk, other=0.0)  # loaded once, kept in registers
    v = tl.load(V + kv_rows, mask=offs_n[:, None] < Lk, other=0.0)
    dk = tl.zeros([BLOCK_N, HEAD_D], tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_D], tl.float32)
    for group in range(GROUPS):  # the query heads that share this key/value head
        head = kv_head * GROUPS + group
        q_head, do_head = Q + head * Lq * HEAD_D, DO + head * Lq * HEAD_D
        lse_head, delta_head = LSE + head * Lq, DELTA + head * Lq
        if IS_CAUSAL:  # queries before start_n never see these keys: skipped; the diagonal: masked
            diagonal_end = tl.minimum(start_n + BLOCK_N, Lq)
            dk, dv = backward_dkdv_tiles(dk, dv, k, v, q_head, do_head, lse_head, delta_head, offs_n, offs_m, offs_d,
                                         start_n, diagonal_end, Lq, qk_scale, HEAD_D, BLOCK_M, True, PRECISION)
            first_full = start_n + BLOCK_N
        else:
            first_full = 0
        dk, dv = backward_dkdv_tiles(dk, dv, k, v, q_head, do_head, lse_head, delta_head, offs_n, offs_m, offs_d,
                                     first_full, Lq, Lq, qk_scale, HEAD_D, BLOCK_M, False, PRECISION)
    tl.store(DK + kv_rows, (dk * scale).to(DK.dtype.element_ty), mask=offs_n[:, None] < Lk)  # S = scale·Q Kᵀ
    tl.store(DV + kv_rows, dv.to(DV.dtype.element_ty), mask=offs_n[:, None] < Lk)


@_kernel
def backward_dq_tiles(dq, q, do, lse, delta, k_head, v_head, offs_m, offs_n, offs_d, lo, hi, Lk, qk_scale,
                      HEAD_D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, PRECISION: tl.constexpr):
    """Add to dq (BLOCK_M, D) the share of the key blocks [lo, hi); returns dq.

    q, do (BLOCK_M, D), lse (base 2) and delta (BLOCK_M,) belong to the queries at ``offs_m``;
    ``k_head``, ``v_head`` point at their head's keys and values (Lk, D). Keys past the end load zeros,
    so they add nothing to dq = dS K. ``MASKED``: blocks cut by the causal diagonal.
    """
    for start_n in range(lo, hi, BLOCK_N):
        cols = tl.multiple_of(start_n, BLOCK_N) + offs_n  # (BLOCK_N,)
        rows = cols[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_N, D)
        k = tl.load(k_head + rows, mask=cols[:, None] < Lk, other=0.0)
        v = tl.load(v_head + rows, mask=cols[:, None] < Lk, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale  # (BLOCK_M, BLOCK_N), base 2
        p = tl.math.exp2(s - lse[:, None])  # P, the forward's weights
        if MASKED:
            p = tl.where(offs_m[:, None] >= cols[None, :], p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)  # dP = dO Vᵀ, (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])  # dS = P ∘ (dP − Δ)
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)  # dQ += dS K, (BLOCK_M, D)
    return dq


@_kernel
def backward_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, Lq, Lk, qk_scale, scale, GROUPS: tl.constexpr,
                       HEAD_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
                       PRECISION: tl.constexpr):
    """One program: dQ (BLOCK_M, D) of one query block of one head, over every key it sees.

    Shapes as in ``backward_dkdv_kernel``, DQ like Q; the grid is (⌈Lq / BLOCK_M⌉, Z*Hq).
    """
    block = tl.program_id(0)
    if IS_CAUSAL:  # the longest rows first, as in the forward
        block = tl.num_programs(0) - 1 - block
    start_m = block * BLOCK_M
    head = tl.program_id(1).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_D)
    q_rows = head * Lq * HEAD_D + offs_m[:, None] * HEAD_D + offs_d[None, :]  # (BLOCK_M, D)
    q = tl.load(Q + q_rows, mask=offs_m[:, None] < Lq, other=0.0)
    do = tl.load(DO + q_rows, mask=offs_m[:, None] < Lq, other=0.0)
    lse = tl.load(LSE + head * Lq + offs_m, mask=offs_m < Lq, other=0.0) * 1.4426950408889634
    delta = tl.load(DELTA + head * Lq + offs_m, mask=offs_m < Lq, other=0.0)
    k_head = K + (head // GROUPS) * Lk * HEAD_D
    v_head = V + (head // GROUPS) * Lk * HEAD_D
    dq = tl.zeros([BLOCK_M, HEAD_D], tl.float32)
    if IS_CAUSAL:  # keys before the first query: no mask; up to the last query: masked; after: skipped
        full_end = tl.minimum(start_m, Lk)
        dq = backward_dq_tiles(dq, q, do, lse, delta, k_head, v_head, offs_m, offs_n, offs_d, full_end,
                               tl.minimum(start_m + BLOCK_M, Lk), Lk, qk_scale, HEAD_D, BLOCK_N, True, PRECISION)
    else:
        full_end = Lk
    dq = backward_dq_tiles(dq, q, do, lse, delta, k_head, v_head, offs_m, offs_n, offs_d, 0, full_end, Lk,
                           qk_scale, HEAD_D, BLOCK_N, False, PRECISION)
    tl.store(DQ + q_rows, (dq * scale).to(DQ.dtype.element_ty), mask=offs_m[:, None] < Lq)


@dataclass(frozen=True)
class Config:
    """One kernel's launch: tiles of ``block_m`` queries by ``block_n`` keys, warps per program, pipeline stages."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2


#: Tile sizes by head width, the fastest of ``python -m attnlib.bench --tune`` on an H200 (docs/perf.md; 256 is a
#: guess, not measured). The forward and dQ need block_m % block_n == 0, dK/dV block_n % block_m == 0: the causal
#: diagonal then falls on block boundaries.
FORWARD = {64: Config(128, 64, 8, 3), 128: Config(128, 64, 8, 3), 256: Config(64, 32, 4, 2)}
BACKWARD_DKDV = {64: Config(64, 64, 4, 3), 128: Config(64, 128, 8, 2), 256: Config(16, 64, 4, 2)}
BACKWARD_DQ = {64: Config(64, 64, 4, 3), 128: Config(128, 64, 8, 2), 256: Config(64, 16, 4, 2)}
#: In the interpreter every program runs in turn on the CPU: small tiles keep a test's arrays small.
INTERPRETED = Config(16, 16, 1, 1)
MAX_HEAD_D = 256


def _config(table: dict, head_d: int) -> Config:
    """The table's launch for the smallest width it lists that is at least ``head_d`` (the interpreter's if any)."""
    if INTERPRET:
        return INTERPRETED
    return table[min(width for width in table if width >= head_d)]


def _precision(dtype: torch.dtype) -> str:
    """tl.dot's precision: exact float32 products for float32 (as torch's matmul), the tensor cores' for 16 bits."""
    return "ieee" if dtype == torch.float32 else "tf32"


def forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, groups: int, is_causal: bool, scale: float,
            config: Config | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``forward_kernel``: output (N*G, Lq, D) and float32 lse (N*G, Lq) of q (N*G, Lq, D), k, v (N, Lk, D).

    The three are contiguous, D a power of two >= 16; query head n reads key/value head n // G.
    """
    config = config or _config(FORWARD, q.shape[-1])
    output = torch.empty_like(q)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(q.shape[1], config.block_m), q.shape[0])  # (query blocks, heads): one program each
    forward_kernel[grid](q, k, v, output, lse, q.shape[1], k.shape[1], scale * LOG2E, groups, q.shape[-1],
                         config.block_m, config.block_n, is_causal, _precision(q.dtype),
                         num_warps=config.num_warps, num_stages=config.num_stages)
    return output, lse


def backward_dkdv(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
                  delta: torch.Tensor, groups: int, is_causal: bool, scale: float,
                  config: Config | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``backward_dkdv_kernel``: dk, dv (N, Lk, D) from do, q (N*G, Lq, D), k, v (N, Lk, D).

    All contiguous; lse (N*G, Lq) from ``forward``; delta (N*G, Lq) float32 is rowsum(dO ∘ O) less dL/d(lse).
    """
    config = config or _config(BACKWARD_DKDV, q.shape[-1])
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    grid = (triton.cdiv(k.shape[1], config.block_n), k.shape[0])  # (key blocks, key/value heads): one program each
    backward_dkdv_kernel[grid](q, k, v, do, lse, delta, dk, dv, q.shape[1], k.shape[1], scale * LOG2E, scale, groups,
                               q.shape[-1], config.block_m, config.block_n, is_causal, _precision(q.dtype),
                               num_warps=config.num_warps, num_stages=config.num_stages)
    return dk, dv


def backward_dq(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
                delta: torch.Tensor, groups: int, is_causal: bool, scale: float,
                config: Config | None = None) -> torch.Tensor:
    """Launch ``backward_dq_kernel``: dq (N*G, Lq, D), from the inputs of ``backward_dkdv``."""
    config = config or _config(BACKWARD_DQ, q.shape[-1])
    dq = torch.empty_like(q)
    grid = (triton.cdiv(q.shape[1], config.block_m), q.shape[0])  # (query blocks, query heads)
    backward_dq_kernel[grid](q, k, v, do, lse, delta, dq, q.shape[1], k.shape[1], scale * LOG2E, scale, groups,
                             q.shape[-1], config.block_m, config.block_n, is_causal, _precision(q.dtype),
                             num_warps=config.num_warps, num_stages=config.num_stages)
    return dq


def backward(do: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lse: torch.Tensor,
             delta: torch.Tensor, groups: int, is_causal: bool, scale: float,
             configs: tuple[Config, Config] | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Both backward launches: dq (N*G, Lq, D), dk, dv (N, Lk, D); ``configs`` = (dK/dV's, dQ's) or the tables'."""
    dkdv_config, dq_config = configs or (None, None)
    dk, dv = backward_dkdv(do, q, k, v, lse, delta, groups, is_causal, scale, dkdv_config)
    return backward_dq(do, q, k, v, lse, delta, groups, is_causal, scale, dq_config), dk, dv


def _heads(t: torch.Tensor, width: int) -> torch.Tensor:
    """(..., L, D) as one contiguous (N, L, width) tensor, D zero-padded to ``width``."""
    t = t.reshape(-1, *t.shape[-2:])
    if t.shape[-1] != width:
        t = F.pad(t, (0, width - t.shape[-1]))  # zero columns change no dot product
    return t.contiguous()


def _layout(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> tuple[int, int]:
    """(G, the padded width): query heads per key/value head, and D rounded up to a power of two >= 16."""
    heads = [t.shape[-3] if t.ndim >= 3 else 1 for t in (query, key)]
    if key.shape[:-1] != value.shape[:-1] or query.shape[:-3] != key.shape[:-3] or heads[0] % heads[1]:
        raise ValueError(f"expected query (..., Hq, Lq, Dk), key (..., Hkv, Lk, Dk) and value (..., Hkv, Lk, Dv) "
                         f"with the same leading dims and Hkv dividing Hq, got {tuple(query.shape)}, "
                         f"{tuple(key.shape)}, {tuple(value.shape)}")
    widest = max(query.shape[-1], value.shape[-1])
    if query.shape[-1] != key.shape[-1] or min(query.shape[-2:] + key.shape[-2:]) < 1 or widest > MAX_HEAD_D:
        raise ValueError(f"expected query and key of one width Dk, Dk and Dv at most {MAX_HEAD_D}, and Lq, Lk >= 1, "
                         f"got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    return heads[0] // heads[1], max(16, triton.next_power_of_2(widest))


def _require_runnable(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
    """Raise unless Triton is installed and the inputs are on a device and of a dtype the kernels run on."""
    if triton is None:
        raise ImportError("attnlib.flash_triton needs Triton: pip install 'attnlib[kernels]' (or triton)")
    if not (query.dtype == key.dtype == value.dtype) or query.dtype not in _DTYPES:
        raise TypeError(f"expected query, key and value of one dtype among float16, bfloat16, float32, got "
                        f"{query.dtype}, {key.dtype}, {value.dtype}")
    if INTERPRET and query.dtype == torch.bfloat16:
        raise TypeError("expected float16 or float32 in Triton's interpreter, got bfloat16 (the interpreter's tl.dot "
                        "multiplies bfloat16 as raw bits; on a GPU bfloat16 is fine)")
    devices = {query.device, key.device, value.device}
    if len(devices) > 1 or (not INTERPRET and query.device.type != "cuda"):
        raise ValueError(f"expected query, key and value on one CUDA device (or TRITON_INTERPRET=1 set before "
                         f"importing attnlib.flash_triton, to run on the CPU), got {sorted(map(str, devices))}")


class FlashAttention(torch.autograd.Function):
    """The Triton kernels as an autograd Function: ``FlashAttention.apply(query, key, value, is_causal, scale)``.

    query (..., Hq, Lq, Dk), key (..., Hkv, Lk, Dk), value (..., Hkv, Lk, Dv) -> ``(output (..., Hq, Lq, Dv),
    lse (..., Hq, Lq))``, as ``attnlib.flash.FlashAttention`` (both differentiable; lse float32). Causal is
    top-left aligned (query i sees keys 0..i); ``scale=None`` means 1/√Dk.
    """

    @staticmethod
    def forward(ctx, query, key, value, is_causal=False, scale=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(output (..., Lq, Dv), lse (..., Lq)) by ``forward_kernel``; saves the inputs, the output and the lse."""
        _require_runnable(query, key, value)
        groups, width = _layout(query, key, value)
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
        out, lse = forward(_heads(query, width), _heads(key, width), _heads(value, width), groups, is_causal, scale)
        output = out[..., :value.shape[-1]].reshape(*query.shape[:-1], value.shape[-1])
        lse = lse.reshape(query.shape[:-1])
        ctx.save_for_backward(query, key, value, output, lse)
        ctx.options = (groups, width, is_causal, scale)
        ctx.set_materialize_grads(False)
        return output, lse

    @staticmethod
    def backward(ctx, grad_out, grad_lse) -> tuple:
        """Run the backward kernels on dO; Δ = rowsum(dO ∘ O) − dL/d(lse) is computed first, by torch."""
        query, key, value, output, lse = ctx.saved_tensors
        groups, width, is_causal, scale = ctx.options
        grad_out = torch.zeros_like(output) if grad_out is None else grad_out
        delta = (grad_out.float() * output.float()).sum(dim=-1)  # (..., Lq)
        if grad_lse is not None:
            delta = delta - grad_lse
        q, k, v, do = (_heads(t, width) for t in (query, key, value, grad_out))
        dq, dk, dv = backward(do, q, k, v, lse.reshape(q.shape[:-1]).contiguous(), delta.reshape(q.shape[:-1]),
                              groups, is_causal, scale)
        grads = (g[..., :t.shape[-1]].reshape(t.shape) for g, t in ((dq, query), (dk, key), (dv, value)))
        return (*grads, None, None)
