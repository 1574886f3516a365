"""A templated pronoun set for chapter 6: "X told Y that he/she ...", scored head by head.

One sentence cannot show that a head links a pronoun to its antecedent, least of all the sentence on which
the head was picked. Clark et al. (2019) scored every head of BERT on many mentions against simple
baselines; this module builds a small, controlled version of that test:

* ``pronoun_sentences(count)``: ``count`` sentences "X told Y that he/she <ending>." with one male and one
  female name, so the pronoun's gender decides the answer; every pair of names appears in all four
  combinations (male or female first, "he" or "she"), so "always the first name" and "always the nearest
  name" score exactly one half. The names are held out from the chapter's own sentences (Mark, Sam, Anna).
* ``check_single_pieces(tokenizer)``: every name must be one WordPiece token, so that "the weight on the
  name" is one number.
* ``pronoun_name_weights(model, tokenizer, sentences)``: every head's weight from the pronoun to the first
  and to the second name; ``head_accuracy`` turns them into the fraction of sentences where the
  gender-matching name gets more weight than the other one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

#: Male and female first names, none of them in the chapter's sentences (each one WordPiece token in MiniLM).
MALE_NAMES = ("John", "David", "Paul", "Peter", "James", "Tom", "Mike", "Steve", "Jack", "Bill",
              "George", "Frank", "Henry", "Robert", "Richard", "Brian", "Kevin", "Chris", "Daniel", "Michael")
FEMALE_NAMES = ("Mary", "Sarah", "Lisa", "Emma", "Kate", "Jane", "Susan", "Laura", "Linda", "Alice",
                "Helen", "Karen", "Nancy", "Rachel", "Julia", "Emily", "Anne", "Ruth", "Amy", "Claire")
#: The names of the sentences on which chapter 6 picks its head: never in the templated set.
HELD_OUT = ("Mark", "Sam", "Anna")
#: What follows the pronoun.
ENDINGS = ("was leaving", "was tired", "had won", "would be late", "felt sick")
PRONOUNS = {"he": MALE_NAMES, "she": FEMALE_NAMES}


@dataclass(frozen=True)
class PronounSentence:
    """"<first> told <second> that <pronoun> <ending>.", with one male and one female name."""

    first: str
    second: str
    pronoun: str
    ending: str

    @property
    def text(self) -> str:
        """The sentence as the tokenizer reads it."""
        return f"{self.first} told {self.second} that {self.pronoun} {self.ending}."

    @property
    def answer_is_first(self) -> bool:
        """True when the first name has the pronoun's gender (the only reading the sentence allows)."""
        return self.first in PRONOUNS[self.pronoun]

    @property
    def answer(self) -> str:
        """The name the pronoun refers to: the one of its gender."""
        return self.first if self.answer_is_first else self.second

    @property
    def other(self) -> str:
        """The name of the other gender, which the pronoun cannot refer to."""
        return self.second if self.answer_is_first else self.first

    def alone(self, name: str) -> str:
        """The clause with ``name`` instead of the pronoun: "<name> <ending>."."""
        return f"{name} {self.ending}."


def name_pair(k: int) -> tuple[str, str]:
    """The k-th (male, female) pair: 400 distinct pairs for k = 0 … 399, each name used evenly."""
    n = len(MALE_NAMES)
    male, block = k % n, k // n
    return MALE_NAMES[male], FEMALE_NAMES[(3 * male + block) % len(FEMALE_NAMES)]  # 3 and 20 coprime


def pronoun_sentences(count: int = 100) -> list[PronounSentence]:
    """``count`` sentences (a multiple of 4, at most 1600): for pair k, male–female and female–male, "he" and "she"."""
    most = 4 * len(MALE_NAMES) * len(FEMALE_NAMES)
    if isinstance(count, bool) or not isinstance(count, int) or count <= 0 or count % 4 or count > most:
        raise ValueError(f"expected count to be a positive multiple of 4 up to {most}, got {count!r}")
    sentences = []
    for k in range(count // 4):
        male, female = name_pair(k)
        ending = ENDINGS[k % len(ENDINGS)]
        for first, second in ((male, female), (female, male)):
            for pronoun in ("he", "she"):
                sentences.append(PronounSentence(first, second, pronoun, ending))
    return sentences


def check_single_pieces(tokenizer, names: Sequence[str] = MALE_NAMES + FEMALE_NAMES) -> None:
    """Raise ValueError naming every name that ``tokenizer`` splits into more than one WordPiece token."""
    split = {name: pieces for name in names if len(pieces := tokenizer.tokenize(name)) != 1}
    if split:
        raise ValueError(f"expected every name to be one token, got these split: {split}")


def positions(tokenizer, sentence: PronounSentence) -> tuple[int, int, int]:
    """Token positions of the first name, the second name and the pronoun (with [CLS] at 0)."""
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(sentence.text)["input_ids"])
    try:
        return tuple(tokens.index(word.lower()) for word in (sentence.first, sentence.second, sentence.pronoun))
    except ValueError:
        raise ValueError(f"expected the names and the pronoun as single tokens, got {tokens}") from None


def pronoun_name_weights(model, tokenizer, sentences: Sequence[PronounSentence]) -> torch.Tensor:
    """Every head's weight from the pronoun to the first and the second name: (S, N, H, 2), on the CPU.

    One padded batch through ``attnlib.models.attention_from_weights`` (padding masked).
    """
    from attnlib.models import attention_from_weights  # noqa: PLC0415 (transformers only when a model is scored)

    if len(sentences) == 0 or not all(isinstance(s, PronounSentence) for s in sentences):
        raise TypeError("expected a non-empty list of PronounSentence, e.g. from pronoun_sentences()")
    device = next(model.parameters()).device
    batch = tokenizer([s.text for s in sentences], return_tensors="pt", padding=True).to(device)
    weights = torch.stack(attention_from_weights(model, batch["input_ids"], batch["attention_mask"]), dim=1)
    where = torch.tensor([positions(tokenizer, s) for s in sentences])  # (S, 3): first, second, pronoun
    rows = torch.arange(len(sentences))
    weights = weights.cpu()  # (S, N, H, L, L)
    pronoun_rows = weights[rows, :, :, where[:, 2]]  # (S, N, H, L): the pronoun's query
    return torch.stack([pronoun_rows[rows, :, :, where[:, 0]], pronoun_rows[rows, :, :, where[:, 1]]], dim=-1)


def head_accuracy(weights: torch.Tensor, sentences: Sequence[PronounSentence]) -> torch.Tensor:
    """(N, H): the fraction of sentences where the pronoun gives the right name more weight than the other.

    ``weights`` (S, N, H, 2) from ``pronoun_name_weights``; a tie counts as wrong.
    """
    if weights.ndim != 4 or weights.shape[0] != len(sentences) or weights.shape[-1] != 2:
        raise ValueError(f"expected weights of shape (S, N, H, 2) with S = {len(sentences)}, "
                         f"got {tuple(weights.shape)}")
    first = torch.tensor([s.answer_is_first for s in sentences])[:, None, None]  # (S, 1, 1)
    right = torch.where(first, weights[..., 0], weights[..., 1])
    wrong = torch.where(first, weights[..., 1], weights[..., 0])
    return (right > wrong).float().mean(dim=0)


def baseline_accuracy(sentences: Sequence[PronounSentence]) -> dict[str, float]:
    """Accuracy of three rules that ignore the model: the first name, the nearest name (the second), the gender."""
    count = len(sentences)
    first = sum(s.answer_is_first for s in sentences) / count
    gender = sum((s.first if s.first in PRONOUNS[s.pronoun] else s.second) == s.answer for s in sentences) / count
    return {"first name": first, "nearest name": 1 - first, "gender": gender}
