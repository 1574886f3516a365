"""The book's running example: the tokens of "The cat sat on the mat", embedded and projected.

Everything is seeded, so every chapter sees the same numbers. Embeddings are a vector per word
(lower-cased, so "The" and "the" share one) plus a sinusoidal position code, as in a transformer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnlib._checks import require_positive_int

CAT_SENTENCE = "The cat sat on the mat"
MARK_SENTENCE = "Mark told Sam that he was leaving."


def positional_encoding(length: int, d_model: int) -> np.ndarray:
    """Sinusoidal position codes (L, D): sin on even features, cos on odd ones (Vaswani et al. 2017)."""
    require_positive_int("length", length)
    require_positive_int("d_model", d_model)
    positions = np.arange(length)[:, None]  # (L, 1)
    rates = 1.0 / 10_000 ** (2 * (np.arange(d_model) // 2) / d_model)  # (D,)
    angles = positions * rates  # (L, D)
    return np.where(np.arange(d_model) % 2 == 0, np.sin(angles), np.cos(angles))


def word_vectors(words: list[str], d_model: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One seeded standard-normal vector (D,) per distinct lower-cased word, in first-seen order."""
    require_positive_int("d_model", d_model)
    rng = np.random.default_rng(seed)
    vocab = list(dict.fromkeys(w.lower() for w in words))
    return {w: rng.standard_normal(d_model) for w in vocab}


@dataclass(frozen=True)
class Example:
    """A sentence's tokens (L,), embeddings X (L, D) and projections W_Q, W_K (D, Dk), W_V (D, Dv)."""

    tokens: list[str]
    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray


def cat_sat_example(d_model: int = 8, d_k: int = 4, d_v: int = 4, seed: int = 0,
                    sentence: str = CAT_SENTENCE) -> Example:
    """The running example as float64 NumPy arrays: X (L, D) and W_Q, W_K (D, Dk), W_V (D, Dv).

    Weights are seeded normal with standard deviation 1/√D, so Q, K, V rows have unit-scale entries.
    """
    for name, value in (("d_k", d_k), ("d_v", d_v)):
        require_positive_int(name, value)
    tokens = sentence.split()
    vectors = word_vectors(tokens, d_model, seed)
    x = np.stack([vectors[t.lower()] for t in tokens]) + positional_encoding(len(tokens), d_model)
    rng = np.random.default_rng(seed + 1)
    w_q, w_k, w_v = (rng.standard_normal((d_model, n)) / np.sqrt(d_model) for n in (d_k, d_k, d_v))
    return Example(tokens, x, w_q, w_k, w_v)
