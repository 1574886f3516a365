"""Recorded answers to chapter 1's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Each string is the complete source of the exercise's answer cell as a student would submit it.
"""

ANSWERS = {
    "ex1": {
        "wrong": '''import numpy as np


def bahdanau_scores(query, key, w_q, w_k, w):
    """Forgets the tanh: the score becomes linear in q and k."""
    hidden = (query @ w_q)[:, None, :] + (key @ w_k)[None, :, :]
    return hidden @ w
''',
        "shortcut": {
            "calls additive_scores": '''import torch

from attnlib.alternatives import additive_scores


def bahdanau_scores(query, key, w_q, w_k, w):
    """Calls the library function the exercise says not to call."""
    args = (torch.from_numpy(a) for a in (query, key, w_q, w_k, w))
    return additive_scores(*args).numpy()
''',
            # the same call under another name, imported outside the function: the check follows the name
            "calls it under an alias": '''import torch

from attnlib.alternatives import additive_scores as addsc


def bahdanau_scores(query, key, w_q, w_k, w):
    """Calls the library function the exercise says not to call, renamed."""
    return addsc(*(torch.from_numpy(a) for a in (query, key, w_q, w_k, w))).numpy()
''',
            # the reference itself, reached through sys.modules: no name the source check can see, the run sees it
            "the reference through sys.modules": '''import sys


def bahdanau_scores(query, key, w_q, w_k, w):
    """The reference itself, fetched from sys.modules by names the source never spells."""
    reference = sys.modules["attn" + "lib.altern" + "atives"].additive_scores
    library = sys.modules["tor" + "ch"]
    return reference(*(library.from_numpy(a) for a in (query, key, w_q, w_k, w))).numpy()
''',
            # the right formula in torch reached through importlib: breaks "NumPy only", so it loses that point
            "torch through importlib": '''import importlib


def bahdanau_scores(query, key, w_q, w_k, w):
    """The formula right, computed by torch found through importlib."""
    library = importlib.import_module("tor" + "ch")
    q, k, wq, wk, v = (library.from_numpy(a) for a in (query, key, w_q, w_k, w))
    return (library.tanh((q @ wq)[:, None, :] + (k @ wk)[None, :, :]) @ v).numpy()
''',
            # the right formula in torch: breaks "NumPy only", so it loses that rule's point
            "writes it in torch": '''import numpy as np
import torch


def bahdanau_scores(query, key, w_q, w_k, w):
    """The additive scores computed with torch instead of NumPy."""
    q, k, wq, wk, v = (torch.from_numpy(a) for a in (query, key, w_q, w_k, w))
    return (torch.tanh((q @ wq)[:, None, :] + (k @ wk)[None, :, :]) @ v).numpy()
''',
        },
        "alternative": {
            "loops over the pairs": '''import numpy as np


def bahdanau_scores(query, key, w_q, w_k, w):
    """Loops over the pairs, one hidden vector each."""
    scores = np.empty((query.shape[0], key.shape[0]))
    for i, q in enumerate(query):
        for j, k in enumerate(key):
            scores[i, j] = w @ np.tanh(q @ w_q + k @ w_k)
    return scores
''',
            "np.newaxis and einsum": '''import numpy as np


def bahdanau_scores(query, key, w_q, w_k, w):
    """Broadcast with np.newaxis, then contract the hidden axis with einsum."""
    hidden = np.einsum("qd,dh->qh", query, w_q)[:, np.newaxis] + np.einsum("kd,dh->kh", key, w_k)[np.newaxis]
    return np.einsum("qkh,h->qk", np.tanh(hidden), w)
''',
        },
    },
    "ex2": {
        "wrong": {
            "one norm for the whole matrix": '''import numpy as np


def cosine_scores(query, key):
    """Divides by one norm for the whole matrix instead of each vector's own length."""
    return (query @ key.T) / (np.linalg.norm(query) * np.linalg.norm(key))
''',
            # a stub that returns the right shape, and 1 wherever a vector meets itself
            "all ones": '''import numpy as np


def cosine_scores(query, key):
    """Every entry 1: right on the diagonal of a vector against itself, nowhere else."""
    return np.ones((query.shape[0], key.shape[0]))
''',
            # keeps the signs and lies in [-1, 1], but drops every length *and* every angle
            "the sign of the scores": '''import numpy as np


def cosine_scores(query, key):
    """Only the sign of each score survives: -1, 0 or 1."""
    return np.sign(query @ key.T)
''',
        },
        "shortcut": None,
        "alternative": '''import numpy as np


def cosine_scores(query, key):
    """Scores first, then divide by the outer product of the lengths."""
    lengths = np.sqrt((query**2).sum(1))[:, None] * np.sqrt((key**2).sum(1))[None, :]
    return np.einsum("qd,kd->qk", query, key) / lengths
''',
    },
}
