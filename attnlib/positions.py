"""Positions: attention itself has no notion of order, so transformers add a position code to X.

Two kinds, both *added* to the embeddings (L, D) before the projections:

* ``sinusoidal_positions(L, D)``: fixed sines and cosines at geometric frequencies (Vaswani et al. 2017);
* ``LearnedPositions``: one trained vector per position, as BERT does (Devlin et al. 2019).
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib._checks import require_positive_int, require_tensor


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
