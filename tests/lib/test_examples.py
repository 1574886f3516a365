"""The running examples: the designed one's patterns follow from its matrices, the random one is seeded."""

import numpy as np
import pytest
import torch

from attnlib import numpy_ops as nops
from attnlib.examples import (
    FEATURES,
    LEXICON,
    QK_FEATURES,
    VALUE_FEATURES,
    cat_sat_example,
    designed_weights,
    position_features,
    position_shift,
    running_example,
    word_features,
)


def _weights(ex):
    q, k = nops.project(ex.x, ex.w_q), nops.project(ex.x, ex.w_k)
    return nops.softmax(nops.scale_scores(nops.dot_product_scores(q, k), q.shape[-1]))


def test_shapes_and_names():
    ex = running_example()
    assert ex.tokens == ["The", "cat", "sat", "on", "the", "mat"]
    assert ex.x.shape == (6, len(FEATURES)) == (6, 8)
    assert ex.w_q.shape == ex.w_k.shape == (len(FEATURES), len(QK_FEATURES)) == (8, 4)
    assert ex.w_v.shape == (len(FEATURES), len(VALUE_FEATURES)) == (8, 3)
    assert ex.features == FEATURES and ex.qk_features == QK_FEATURES and ex.value_features == VALUE_FEATURES
    assert ex.x.dtype == np.float64


def test_embeddings_are_the_lexicon_features():
    ex = running_example()
    for i, token in enumerate(ex.tokens):
        expected = {f: 0.0 for f in FEATURES} | LEXICON[token.lower()]
        assert dict(zip(FEATURES, ex.x[i], strict=True)) == expected


def test_without_positions_the_designed_pattern():
    ex = running_example(positions=False)
    a = _weights(ex)
    t = ex.tokens.index
    # the verb looks at its subject, the preposition at its object
    assert a[t("sat")].argmax() == t("cat") and a[t("sat"), t("cat")] > 0.9
    assert a[t("on")].argmax() == 5 and a[t("on"), 5] > 0.9
    # the two determiners have equal embeddings, hence equal rows, split between the nouns
    np.testing.assert_array_equal(a[0], a[4])
    assert a[0, t("cat")] == pytest.approx(a[0, 5]) and a[0, t("cat")] + a[0, 5] > 0.85
    # nouns ask for nothing: uniform weights
    np.testing.assert_allclose(a[[t("cat"), 5]], np.full((2, 6), 1 / 6))


def test_with_positions_each_determiner_finds_its_own_noun():
    ex = running_example(positions=True)
    a = _weights(ex)
    assert [int(j) for j in a.argmax(axis=-1)[[0, 2, 3, 4]]] == [1, 1, 5, 5]
    assert min(a[0, 1], a[2, 1], a[3, 5], a[4, 5]) > 0.75
    # positions only add: the word part is unchanged
    np.testing.assert_array_equal(ex.x - position_features(6), running_example().x)


@pytest.mark.parametrize("steps", [-2, -1, 1, 3])
def test_position_shift_moves_the_code(steps):
    p = position_features(20)[:, -2:]  # (L, 2)
    rows = np.arange(5, 12)
    np.testing.assert_allclose(p[rows] @ position_shift(steps), p[rows + steps], atol=1e-12)


def test_positions_are_distinct_within_a_period():
    p = position_features(8)[:, -2:]
    gaps = np.linalg.norm(p[:, None] - p[None], axis=-1) + np.eye(8)
    assert gaps.min() > 0.7


def test_other_sentences_and_unknown_words():
    ex = running_example(sentence="The dog slept under a rug")
    a = _weights(ex)
    assert a[2].argmax() == 1 and a[3].argmax() == 5
    with pytest.raises(ValueError, match="LEXICON.*'tiger'"):
        word_features(["the", "tiger"])
    with pytest.raises(TypeError, match="positions to be a bool"):
        running_example(positions="yes")


def test_designed_weights_are_fresh_arrays():
    w_q, _, _ = designed_weights()
    w_q[:] = 0
    assert running_example().w_q.any()


def test_torch_agrees():
    ex = running_example(positions=True)
    x, w_q, w_k = (torch.from_numpy(a) for a in (ex.x, ex.w_q, ex.w_k))
    ref = torch.softmax((x @ w_q) @ (x @ w_k).T / 2, dim=-1).numpy()
    np.testing.assert_allclose(_weights(ex), ref, atol=1e-12)


def test_random_example_is_seeded():
    a, b = cat_sat_example(), cat_sat_example()
    for name in ("x", "w_q", "w_k", "w_v"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(cat_sat_example(seed=1).x, a.x)


def test_a_previous_token_head_from_the_documented_parts():
    """What position_shift's docstring promises chapter 5: W_Q's position block = strength * shift(-1)."""
    ex = running_example(positions=True)
    pos = [FEATURES.index("pos_sin"), FEATURES.index("pos_cos")]
    w_q, w_k = np.zeros((8, 2)), np.zeros((8, 2))
    w_q[pos] = 6.0 * position_shift(-1)
    w_k[pos] = np.eye(2)
    a = nops.softmax(nops.dot_product_scores(ex.x @ w_q, ex.x @ w_k))
    assert [int(j) for j in a.argmax(axis=-1)[1:]] == [0, 1, 2, 3, 4]
