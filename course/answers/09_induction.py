"""Recorded answers to chapter 9's autograded exercise, as students might hand them in (format and grading:
course/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

``wrong``: a plausible wrong answer (the visible tests or the hidden ones must fail it); ``shortcut``: one that
breaks the exercise's stated rule (None when it states none); ``alternative``: a correct answer written
differently from the reference solution, which must get full marks.
"""

ANSWERS = {
    "ex2": {
        "wrong": {
            # the first earlier occurrence (argmax finds the first True), right only when there is one
            "the earliest occurrence": '''\
import torch


def induction_prediction(tokens):
    """(B, L) token ids -> (B, L): the token after the most recent earlier occurrence of each token, or -1."""
    length = tokens.shape[-1]
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(length, length, dtype=torch.bool).tril(-1)
    first = earlier.int().argmax(dim=-1)  # (B, L): the first earlier occurrence
    after = tokens.gather(1, (first + 1).clamp(max=length - 1))
    return torch.where(earlier.any(dim=-1), after, torch.full_like(tokens, -1))
''',
            # predicts the earlier copy itself ([A]), not the token after it ([B])
            "the copy, not its successor": '''\
import torch


def induction_prediction(tokens):
    """(B, L) token ids -> (B, L): the token after the most recent earlier occurrence of each token, or -1."""
    length = tokens.shape[-1]
    earlier = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(length, length, dtype=torch.bool).tril(-1)
    latest = torch.where(earlier, torch.arange(length), -1).amax(dim=-1)
    return torch.where(latest >= 0, tokens.gather(1, latest.clamp(min=0)), torch.full_like(tokens, -1))
''',
        },
        "shortcut": None,
        # one pass per sequence with a dictionary of where each token was last seen
        "alternative": '''\
import torch


def induction_prediction(tokens):
    """The token after the latest earlier occurrence, in one pass per sequence with a dictionary."""
    rows = []
    for sequence in tokens.tolist():
        last_seen, row = {}, []
        for i, token in enumerate(sequence):
            row.append(sequence[last_seen[token] + 1] if token in last_seen else -1)
            last_seen[token] = i
        rows.append(row)
    return torch.tensor(rows, dtype=torch.long).reshape(tokens.shape)
''',
    },
}
