"""The book's running examples: "The cat sat on the mat", designed and random.

``running_example()`` is the designed example of chapters 1–4 (and the base of chapter 5's heads):
every number has a name. Each token's embedding row lists readable features, and W_Q, W_K, W_V are
written by hand so that a reader can say *why* each query attends where it does:

* a determiner ("the") looks for a noun (an actor or a place),
* the verb ("sat") looks for its subject, an actor ("cat"),
* the preposition ("on") looks for its object, a place ("mat"),
* nouns ask for nothing (their query is zero), so their weights are uniform.

Without positions, "The" and "the" have identical embeddings and so identical rows: they split their
attention between "cat" and "mat". With ``positions=True`` a sine–cosine position pair is added and
W_Q rotates it by one step, so every query also leans to the *next* token: each determiner then picks
its own noun.

``cat_sat_example()`` is the older seeded-random version (random word vectors and projections), kept
for the places where randomness is the point (chapter 2's statistics) and for chapter 7's trace.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from attnlib._checks import require_positive_int
from attnlib.positions import sinusoidal_positions

CAT_SENTENCE = "The cat sat on the mat"
MARK_SENTENCE = "Mark told Sam that he was leaving."

# --- the designed example ---------------------------------------------------------------------

#: Column names of the embeddings X (D = 8): six word features, then the position pair.
FEATURES = ("det", "noun", "verb", "prep", "actor", "place", "pos_sin", "pos_cos")
#: Column names of queries and keys (Dk = 4): what a query looks for / what a key offers.
QK_FEATURES = ("actor", "place", "pos_sin", "pos_cos")
#: Column names of the values (Dv = 3): what a token passes on when attended to.
VALUE_FEATURES = ("noun", "actor", "place")

#: Word features of every word the designed example knows (lower-cased; unlisted features are 0).
LEXICON = {
    "the": {"det": 1.0}, "a": {"det": 1.0},
    "cat": {"noun": 1.0, "actor": 1.0}, "dog": {"noun": 1.0, "actor": 1.0},
    "mat": {"noun": 1.0, "place": 1.0}, "rug": {"noun": 1.0, "place": 1.0},
    "sat": {"verb": 1.0}, "slept": {"verb": 1.0},
    "on": {"prep": 1.0}, "under": {"prep": 1.0},
}

#: Angle (radians) by which the position pair turns per token: period 8 tokens, longer than the
#: sentence, so no two positions of a sentence of up to 8 tokens share a code.
POSITION_FREQUENCY = math.pi / 4
#: How strongly each kind of query looks for its target (entries of W_Q; W_K's are 1).
DETERMINER_STRENGTH = 6.0
HEAD_STRENGTH = 8.0  # the verb for an actor, the preposition for a place
POSITION_STRENGTH = 3.0  # the pull towards the next token, once positions are added


def word_features(tokens: list[str]) -> np.ndarray:
    """The word part E (L, D) of the embeddings: each row holds its word's LEXICON features."""
    unknown = sorted({t for t in tokens if t.lower() not in LEXICON})
    if unknown:
        raise ValueError(f"expected words from attnlib.examples.LEXICON {sorted(LEXICON)}, got {unknown}")
    e = np.zeros((len(tokens), len(FEATURES)))
    for i, token in enumerate(tokens):
        for name, value in LEXICON[token.lower()].items():
            e[i, FEATURES.index(name)] = value
    return e


def position_features(length: int) -> np.ndarray:
    """The position part P (L, D): (sin ωi, cos ωi) in the columns pos_sin, pos_cos; zero elsewhere."""
    require_positive_int("length", length)
    angles = POSITION_FREQUENCY * np.arange(length)  # (L,)
    p = np.zeros((length, len(FEATURES)))
    p[:, FEATURES.index("pos_sin")] = np.sin(angles)
    p[:, FEATURES.index("pos_cos")] = np.cos(angles)
    return p


def position_shift(steps: int) -> np.ndarray:
    """The (2, 2) matrix R that moves a position pair by ``steps``: P[i, -2:] @ R = P[i + steps, -2:] for P (L, D).

    Put ``strength * position_shift(+1)`` in W_Q's position block (W_K's is the identity) and every
    query gains ``strength · cos ω(j − i − 1)`` on key j: a pull to the next token; ``-1`` pulls to
    the previous token (a previous-token head).
    """
    a = POSITION_FREQUENCY * steps
    return np.array([[math.cos(a), -math.sin(a)],
                     [math.sin(a), math.cos(a)]])


def designed_weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W_Q (D, Dk), W_K (D, Dk), W_V (D, Dv) of the running example; rows FEATURES, columns QK/VALUE_FEATURES."""
    w_q = np.zeros((len(FEATURES), len(QK_FEATURES)))
    w_k = np.zeros_like(w_q)
    w_v = np.zeros((len(FEATURES), len(VALUE_FEATURES)))

    def put(w, row, col, names, value):
        w[FEATURES.index(row), names.index(col)] = value

    put(w_q, "det", "actor", QK_FEATURES, DETERMINER_STRENGTH)  # a determiner looks for a noun:
    put(w_q, "det", "place", QK_FEATURES, DETERMINER_STRENGTH)  # an actor or a place
    put(w_q, "verb", "actor", QK_FEATURES, HEAD_STRENGTH)  # the verb looks for its subject
    put(w_q, "prep", "place", QK_FEATURES, HEAD_STRENGTH)  # the preposition looks for its object
    for name in ("actor", "place"):  # a key offers what the token is
        put(w_k, name, name, QK_FEATURES, 1.0)
    pos = [FEATURES.index("pos_sin"), FEATURES.index("pos_cos")]
    w_q[np.ix_(pos, [2, 3])] = POSITION_STRENGTH * position_shift(+1)  # queries ask for position i + 1
    w_k[np.ix_(pos, [2, 3])] = np.eye(2)  # keys offer their own position
    for name in VALUE_FEATURES:  # a value passes on what kind of thing the token is
        put(w_v, name, name, VALUE_FEATURES, 1.0)
    return w_q, w_k, w_v


# --- shared container -------------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    """A sentence's tokens (L,), embeddings X (L, D) and projections W_Q, W_K (D, Dk), W_V (D, Dv)."""

    tokens: list[str]
    x: np.ndarray
    w_q: np.ndarray
    w_k: np.ndarray
    w_v: np.ndarray


@dataclass(frozen=True)
class DesignedExample(Example):
    """An Example whose columns have names: ``features`` (X's D columns, W's rows),
    ``qk_features`` (the Dk columns of Q and K) and ``value_features`` (the Dv columns of V)."""

    features: tuple[str, ...] = FEATURES
    qk_features: tuple[str, ...] = QK_FEATURES
    value_features: tuple[str, ...] = VALUE_FEATURES
    positions: bool = False


def running_example(positions: bool = False, sentence: str = CAT_SENTENCE) -> DesignedExample:
    """The designed running example as float64 NumPy arrays: X = E (+ P) (L, 8), W_Q, W_K (8, 4), W_V (8, 3).

    ``positions=False`` (chapters 1–3): X = E, the words only, so equal words get equal rows.
    ``positions=True`` (chapter 4 on): X = E + P, the sine–cosine position pair added in its own columns.
    ``sentence`` may use any LEXICON words (e.g. "The dog slept under a rug").
    """
    if not isinstance(positions, bool):
        raise TypeError(f"expected positions to be a bool, got {type(positions).__name__}")
    tokens = sentence.split()
    x = word_features(tokens)
    if positions:
        x = x + position_features(len(tokens))
    return DesignedExample(tokens, x, *designed_weights(), positions=positions)


# --- the seeded-random example ----------------------------------------------------------------

def word_vectors(words: list[str], d_model: int, seed: int = 0) -> dict[str, np.ndarray]:
    """One seeded standard-normal vector (D,) per distinct lower-cased word, in first-seen order."""
    require_positive_int("d_model", d_model)
    rng = np.random.default_rng(seed)
    vocab = list(dict.fromkeys(w.lower() for w in words))
    return {w: rng.standard_normal(d_model) for w in vocab}


def cat_sat_example(d_model: int = 8, d_k: int = 4, d_v: int = 4, seed: int = 0,
                    sentence: str = CAT_SENTENCE) -> Example:
    """The seeded-random example as float64 NumPy arrays: X (L, D) and W_Q, W_K (D, Dk), W_V (D, Dv).

    Random word vectors plus ``sinusoidal_positions``; weights seeded normal with standard deviation
    1/√D. Use it where randomness is the point; ``running_example()`` is the designed one.
    """
    for name, value in (("d_k", d_k), ("d_v", d_v)):
        require_positive_int(name, value)
    tokens = sentence.split()
    vectors = word_vectors(tokens, d_model, seed)
    x = np.stack([vectors[t.lower()] for t in tokens]) + _sinusoidal(len(tokens), d_model)
    rng = np.random.default_rng(seed + 1)
    w_q, w_k, w_v = (rng.standard_normal((d_model, n)) / np.sqrt(d_model) for n in (d_k, d_k, d_v))
    return Example(tokens, x, w_q, w_k, w_v)


def _sinusoidal(length: int, d_model: int) -> np.ndarray:
    """``attnlib.positions.sinusoidal_positions`` (L, D) as a float64 NumPy array."""
    return sinusoidal_positions(length, d_model, dtype=torch.float64).numpy()
