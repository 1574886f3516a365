"""attnlib.positions: Vaswani's sinusoidal code and BERT's learned table."""

import math

import numpy as np
import pytest
import torch

from attnlib.examples import positional_encoding
from attnlib.positions import LearnedPositions, sinusoidal_positions


def test_sinusoidal_follows_the_formula():
    p = sinusoidal_positions(10, 6, dtype=torch.float64)
    assert p.shape == (10, 6)
    for pos in (0, 3, 9):
        for i in range(3):
            rate = 10_000 ** (-2 * i / 6)
            assert p[pos, 2 * i].item() == pytest.approx(math.sin(pos * rate), abs=1e-12)
            assert p[pos, 2 * i + 1].item() == pytest.approx(math.cos(pos * rate), abs=1e-12)


@pytest.mark.parametrize("length, d_model", [(1, 1), (7, 5), (50, 16)])
def test_sinusoidal_equals_numpy_twin(length, d_model):
    np.testing.assert_allclose(sinusoidal_positions(length, d_model, dtype=torch.float64).numpy(),
                               positional_encoding(length, d_model), atol=1e-12)


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
