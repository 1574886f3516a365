"""Fixtures of attnlib's tests (the helpers they build on are in tests/lib/tensors.py)."""

from __future__ import annotations

import pytest

from tests.lib.tensors import randn


@pytest.fixture
def qkv64():
    """query (2, 3, 4, 8), key (2, 3, 6, 8), value (2, 3, 6, 5) in float64: Lq≠Lk, Dv≠Dk."""
    return randn(2, 3, 4, 8, seed=1), randn(2, 3, 6, 8, seed=2), randn(2, 3, 6, 5, seed=3)
