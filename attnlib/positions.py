"""Positions: attention itself has no notion of order, so transformers give it one.

Two kinds are *added* to the embeddings (L, D) before the projections:

* ``sinusoidal_positions(L, D)``: fixed sines and cosines at geometric frequencies (Vaswani et al. 2017);
* ``LearnedPositions``: one trained vector per position, as BERT does (Devlin et al. 2019).

Two act inside attention, on the scores, so that they depend only on the distance between positions:

* ``apply_rotary``: rotary position embeddings (RoPE, Su et al. 2021) rotate each query and key by an
  angle proportional to its position, in either layout models use: ``"half"`` (coordinate i pairs with i + D/2:
  Hugging Face, GPT-NeoX) or ``"interleaved"`` (2i with 2i + 1: RoFormer, GPT-J, Meta's Llama), equal up to the
  order of coordinates ``rotary_permutation``; ``rotary_matrix`` is the same rotation as an explicit (D, D)
  matrix, the readable reference path;
* ``alibi_bias``: ALiBi (Press et al. 2022) adds ``-m_h · distance`` to head h's scores, with the head
  slopes m_h of ``alibi_slopes``.
"""

from __future__ import annotations

import math
from numbers import Real

import torch
from torch import nn

from attnlib._checks import require_float, require_positive, require_positive_int, require_rank, require_tensor


def sinusoidal_positions(length: int, d_model: int, *, device=None,
                         dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Position codes (L, D): feature 2i is sin(pos · ωᵢ), feature 2i+1 is cos(pos · ωᵢ), ωᵢ = 10000^(−2i/D)."""
    require_positive_int("length", length)
    require_positive_int("d_model", d_model)
    pos = torch.arange(length, device=device, dtype=torch.float64)[:, None]  # (L, 1)
    pair = torch.arange(d_model, device=device) // 2  # (D,): 0, 0, 1, 1, ...
    rates = 10_000.0 ** (-2.0 * pair.to(torch.float64) / d_model)  # (D,)
    angles = pos * rates  # (L, D)
    even = torch.arange(d_model, device=device) % 2 == 0
    return torch.where(even, torch.sin(angles), torch.cos(angles)).to(dtype)


class LearnedPositions(nn.Module):
    """BERT's position embeddings: a trained (max_length, D) table; row i is added to token i."""

    def __init__(self, max_length: int, d_model: int):
        super().__init__()
        require_positive_int("max_length", max_length)
        require_positive_int("d_model", d_model)
        self.table = nn.Embedding(max_length, d_model)
        nn.init.normal_(self.table.weight, std=0.02)  # BERT's initialiser range

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(..., L, D) -> (..., L, D): x plus the first L rows of the table."""
        require_tensor("x", x)
        length, max_length = x.shape[-2], self.table.num_embeddings
        if length > max_length:
            raise ValueError(f"expected at most max_length={max_length} positions, got L={length}")
        positions = torch.arange(length, device=x.device)  # (L,)
        return x + self.table(positions).to(x.dtype)  # (..., L, D) + (L, D)


# --- rotary position embeddings (RoPE) --------------------------------------------------------------------

def rotary_frequencies(dim: int, base: float = 10_000.0, *, device=None) -> torch.Tensor:
    """The D/2 angular frequencies (D/2,) θ_i = base^(−2i/D) of RoPE, in float64; pair i turns θ_i per position."""
    require_positive_int("dim", dim)
    require_positive("base", base)
    if dim % 2:
        raise ValueError(f"expected an even width D (coordinates are rotated in pairs), got D={dim}")
    pair = torch.arange(dim // 2, device=device, dtype=_angle_dtype(device))  # (D/2,)
    return float(base) ** (-2.0 * pair / dim)


def _angle_dtype(device) -> torch.dtype:
    """float64 for angles, except on Apple's MPS, which has no float64."""
    return torch.float32 if torch.device(device or "cpu").type == "mps" else torch.float64


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., D) -> (..., D): the halves (x1, x2) become (−x2, x1), each pair (i, i + D/2) turned by 90°."""
    first, second = x.chunk(2, dim=-1)  # (..., D/2) each
    return torch.cat((-second, first), dim=-1)


def _positions(positions, length: int, device) -> torch.Tensor:
    """Positions as a float tensor (..., L): 0..L-1 when None, else ``positions`` checked against L."""
    if positions is None:
        return torch.arange(length, device=device, dtype=_angle_dtype(device))
    try:
        positions = torch.as_tensor(positions, device=device)
    except (RuntimeError, TypeError, ValueError):
        raise TypeError(f"expected positions as numbers of shape (..., L), got {type(positions).__name__}") from None
    if positions.ndim == 0 or positions.shape[-1] != length or positions.dtype == torch.bool:
        raise ValueError(f"expected positions of shape (..., L) with L={length} (one per row of x), "
                         f"got shape {tuple(positions.shape)} dtype {positions.dtype}")
    positions = positions.to(_angle_dtype(device))
    if not torch.isfinite(positions).all():
        raise ValueError(f"expected finite positions, got {positions.tolist()}")
    return positions


LAYOUTS = ("half", "interleaved")  # which coordinates RoPE pairs: (i, i + D/2) or (2i, 2i + 1)


def _require_layout(layout) -> str:
    if layout not in LAYOUTS:
        raise ValueError(f"expected layout 'half' (pairs i, i + D/2: Hugging Face, GPT-NeoX) or 'interleaved' "
                         f"(pairs 2i, 2i + 1: RoFormer, GPT-J, Meta's Llama), got {layout!r}")
    return layout


def apply_rotary(x: torch.Tensor, positions=None, base: float = 10_000.0, *, layout: str = "half") -> torch.Tensor:
    """Rotate each row of x (..., L, D) by its position: pair i turns by angle position · θ_i.

    ``positions`` (..., L) broadcasts against x's leading dims; None means 0..L-1. D must be even.
    ``layout`` says which coordinates form pair i: ``"half"`` pairs (i, i + D/2), Hugging Face's Llama and
    GPT-NeoX (``x cos + rotate_half(x) sin``); ``"interleaved"`` pairs (2i, 2i + 1), RoFormer's paper, GPT-J and
    Meta's reference Llama. The two are one rotation in two orders of coordinates:
    ``apply_rotary(x[..., p], layout="half") == apply_rotary(x, layout="interleaved")[..., p]`` with
    ``p = rotary_permutation(D)``. Angles are computed in float64 (float32 on MPS), then cast to x's dtype.
    """
    require_tensor("x", x)
    require_float("x", x)
    require_rank("x", x, 2, "(..., L, D)")
    _require_layout(layout)
    freqs = rotary_frequencies(x.shape[-1], base, device=x.device)  # (D/2,)
    angles = _positions(positions, x.shape[-2], x.device)[..., None] * freqs  # (..., L, 1) * (D/2,) -> (..., L, D/2)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)  # (..., L, D/2) each
    if layout == "half":
        return x * torch.cat((cos, cos), dim=-1) + rotate_half(x) * torch.cat((sin, sin), dim=-1)
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., L, D/2) each: pair i is (2i, 2i + 1)
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)  # (..., L, D)


def rotary_permutation(dim: int) -> torch.Tensor:
    """The order of coordinates (D,) int64 that turns the interleaved layout into the half one:
    ``[0, 2, ..., D-2, 1, 3, ..., D-1]``, so that pair (2i, 2i + 1) lands at (i, i + D/2).

    Converting Meta's Llama weights to Hugging Face's layout permutes W_Q's and W_K's output features this
    way (within each head); the attention scores are then the same.
    """
    require_positive_int("dim", dim)
    if dim % 2:
        raise ValueError(f"expected an even width D (coordinates are rotated in pairs), got D={dim}")
    return torch.cat((torch.arange(0, dim, 2), torch.arange(1, dim, 2)))


def rotary_matrix(position: float, dim: int, base: float = 10_000.0, *, layout: str = "half") -> torch.Tensor:
    """The rotation (D, D) float64 that ``apply_rotary`` applies at one position: ``x_rot = R @ x``.

    A 2×2 rotation by position · θ_i for each pair: (i, i + D/2) with ``layout="half"``, block-diagonal
    (2i, 2i + 1) with ``layout="interleaved"``.
    """
    if isinstance(position, bool) or not isinstance(position, Real):
        raise TypeError(f"expected position to be a number, got {type(position).__name__}")
    if not math.isfinite(position):
        raise ValueError(f"expected a finite position, got {position}")
    _require_layout(layout)
    freqs = rotary_frequencies(dim, base)  # (D/2,)
    half = dim // 2
    angles = float(position) * freqs
    matrix = torch.zeros(dim, dim, dtype=torch.float64)
    if layout == "half":
        pair, other = torch.arange(half), torch.arange(half) + half
    else:
        pair, other = torch.arange(0, dim, 2), torch.arange(1, dim, 2)
    matrix[pair, pair], matrix[other, other] = angles.cos(), angles.cos()
    matrix[pair, other], matrix[other, pair] = -angles.sin(), angles.sin()
    return matrix


# --- ALiBi --------------------------------------------------------------------------------------------------

def _power_of_two_slopes(n: int) -> list[float]:
    """The geometric sequence 2^(−8/n), 2^(−16/n), ..., 2^(−8) for n a power of two."""
    return [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's head slopes (H,) float64, following Press et al.'s reference code.

    For H a power of two, 2^(−8h/H) for h = 1..H. Otherwise the slopes of the closest lower power of
    two P, then every other slope of 2P (the 1st, 3rd, ...) until there are H.
    """
    require_positive_int("num_heads", num_heads)
    lower = 2 ** (num_heads.bit_length() - 1)  # the largest power of two <= H
    slopes = _power_of_two_slopes(lower)
    if lower < num_heads:
        slopes += _power_of_two_slopes(2 * lower)[0::2][: num_heads - lower]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(num_heads: int, lq: int, lk: int | None = None, *, device=None,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """ALiBi's float mask (H, Lq, Lk): ``−m_h · ((Lk − Lq + i) − j)`` for query i, key j, head h.

    Queries are the last Lq of Lk positions, as in ``causal_mask(Lq, Lk, align="lower_right")``: the
    bias is 0 on a query's own position and falls by m_h per step into the past. Keys after the query
    get a positive bias: combine it with that causal mask, as ALiBi's decoders do.
    """
    lk = lq if lk is None else lk
    require_positive_int("Lq", lq)
    require_positive_int("Lk", lk)
    query_at = torch.arange(lk - lq, lk, device=device, dtype=torch.float64)[:, None]  # (Lq, 1)
    distance = query_at - torch.arange(lk, device=device, dtype=torch.float64)  # (Lq, Lk)
    slopes = alibi_slopes(num_heads).to(device)[:, None, None]  # (H, 1, 1)
    return (-slopes * distance).to(dtype)  # (H, 1, 1) * (Lq, Lk) -> (H, Lq, Lk)
