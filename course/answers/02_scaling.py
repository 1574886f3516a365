"""Recorded answers to chapter 2's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Each string is the complete source of the exercise's answer cell as a student would submit it.
"""

ANSWERS = {
    "ex1": {
        # the most common slip: the softmax sees scale · Q Kᵀ, but the chain rule's factor scale is dropped
        "wrong": '''import numpy as np

from attnlib import numpy_ops


def score_backward(query, key, upstream, scale=None):
    scale = 1 / np.sqrt(query.shape[-1]) if scale is None else scale
    p = numpy_ops.softmax(scale * (query @ key.T))
    d_scores = p * (upstream - (p * upstream).sum(axis=-1, keepdims=True))
    return d_scores @ key, d_scores.T @ query
''',
        "shortcut": {
            # right numbers, by asking torch's autograd: the exercise says NumPy only, no autograd
            "torch's autograd": '''import numpy as np
import torch


def score_backward(query, key, upstream, scale=None):
    scale = 1 / np.sqrt(query.shape[-1]) if scale is None else scale
    q = torch.tensor(query, requires_grad=True)
    k = torch.tensor(key, requires_grad=True)
    (torch.softmax(scale * q @ k.T, dim=-1) * torch.tensor(upstream)).sum().backward()
    return q.grad.numpy(), k.grad.numpy()
''',
            # right numbers through one Jacobian per row, built by functions found with getattr: the run sees them
            "a Jacobian per row, its functions found by getattr": '''import numpy as np

from attnlib import numpy_ops


def score_backward(query, key, upstream, scale=None):
    """One Jacobian diag(p) - p pᵀ per query row (symmetric, so Jᵀ g = J g)."""
    scale = 1 / np.sqrt(query.shape[-1]) if scale is None else scale
    p = numpy_ops.softmax(scale * (query @ key.T))
    outer, diag = getattr(np, "out" + "er"), getattr(np, "di" + "ag")
    d_scores = scale * np.stack([(diag(row) - outer(row, row)) @ g for row, g in zip(p, upstream)])
    return d_scores @ key, d_scores.T @ query
''',
        },
        # its own stable softmax and einsum, one line per step of the chain rule
        "alternative": '''import numpy as np


def score_backward(query, key, upstream, scale=None):
    if scale is None:
        scale = query.shape[-1] ** -0.5
    z = scale * np.einsum("qd,kd->qk", query, key)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    mean_g = np.einsum("qk,qk->q", p, upstream)[:, None]
    d_raw = scale * p * (upstream - mean_g)
    return np.einsum("qk,kd->qd", d_raw, key), np.einsum("qk,qd->kd", d_raw, query)
''',
    },
    "ex2": {
        "wrong": {
            # the chapter's factor carried over: treats q·q as if it were q·k, Var = d_k sigma⁴ instead of 2 d_k sigma⁴
            "the chapter's 1/sqrt(d_k), as if q·q were q·k": '''import math


def self_score_factor(d_k, sigma):
    return 1.0 / (math.sqrt(d_k) * sigma**2)
''',
            # the right fourth moment, but the standard deviation where its square belongs
            "sigma where sigma squared belongs": '''import math


def self_score_factor(d_k, sigma):
    return 1.0 / (sigma * math.sqrt(2 * d_k))
''',
        },
        "shortcut": None,  # the exercise states no rule
        # from the variance directly: Var(q·q) = d_k Var(a_m²) = d_k (3 sigma⁴ - sigma⁴), and c = Var^(-1/2)
        "alternative": '''def self_score_factor(d_k, sigma):
    fourth, second = 3 * sigma**4, sigma**2
    variance = d_k * (fourth - second**2)
    return variance ** -0.5
''',
    },
}
