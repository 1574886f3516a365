"""Recorded answers to chapter 3's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py)."""

ANSWERS = {
    "ex1": {
        "wrong": {
            "overflows for large scores": '''def logsumexp(x):
    """The textbook formula: overflows for large scores."""
    return np.log(np.exp(x).sum(axis=-1))
''',
            # the exercise states it: an all -inf row must give -inf; shifting by its max (-inf) gives nan
            "an all -inf row gives nan": '''def logsumexp(x):
    """Shifted by the row maximum: stable for large scores, but -inf - (-inf) is nan."""
    top = x.max(axis=-1, keepdims=True)
    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]
''',
        },
        # the exercise asks for the shift identity: a library's log-sum-exp, under any name, earns nothing
        "shortcut": {
            "torch.logsumexp": '''def logsumexp(x):
    """Hands the work to torch."""
    return torch.logsumexp(torch.from_numpy(x), dim=-1).numpy()
''',
            "np.logaddexp.reduce": '''def logsumexp(x):
    """NumPy's pairwise log-add, folded along the last axis: stable, and not the exercise."""
    return np.logaddexp.reduce(x, axis=-1)
''',
            "scipy's logsumexp under an alias": '''from scipy.special import logsumexp as lse


def logsumexp(x):
    """SciPy's log-sum-exp, imported under another name."""
    return lse(x, axis=-1)
''',
            # torch's log-sum-exp reached through importlib and getattr: no name the source check can see
            "torch's logsumexp through importlib": '''import importlib


def logsumexp(x):
    """torch's log-sum-exp, found by names the source never spells."""
    library = importlib.import_module("to" + "rch")
    return getattr(library, "log" + "sum" + "exp")(library.from_numpy(x), dim=-1).numpy()
''',
            # the one library function the rule names that is no log-sum-exp by name: x_j - log_softmax(x)_j
            "torch's log_softmax": '''def logsumexp(x):
    """x_j - log_softmax(x)_j is the log-sum-exp at every j: read at each row's largest score."""
    t = torch.from_numpy(np.asarray(x, dtype=float))
    top = t.argmax(dim=-1, keepdim=True)
    lse = (t.gather(-1, top) - torch.log_softmax(t, dim=-1).gather(-1, top)).squeeze(-1).numpy()
    return np.where(np.isneginf(np.max(x, axis=-1)), -np.inf, lse)
''',
        },
        "alternative": {
            "nan_to_num for the shift": '''def logsumexp(x):
    """Shift by the row maximum, with -inf rows handled by nan_to_num instead of np.where."""
    top = np.max(x, axis=-1)
    safe = np.nan_to_num(top, neginf=0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.sum(np.exp(x - safe[..., None]), axis=-1))
''',
            # the natural answer: right everywhere, and NumPy warns about log(0) on an all -inf row
            "log(0) left to warn": '''def logsumexp(x):
    """Shift by the row maximum, or by 0 where that is -inf; there the sum is 0 and its log -inf (NumPy warns)."""
    top = x.max(axis=-1, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.exp(x - top).sum(axis=-1, keepdims=True)))[..., 0]
''',
        },
    },
    "ex2": {
        "wrong": {
            "off by one": '''def sliding_window_mask(length, window):
    """Off by one: lets each query see `window` earlier tokens plus itself."""
    offset = np.arange(length)[:, None] - np.arange(length)[None, :]
    return (offset >= 0) & (offset <= window)
''',
            # the right band as 0/1 integers: nops.apply_mask would add it to the scores instead of hiding keys
            "0/1 integers, not booleans": '''def sliding_window_mask(length, window):
    """The band between two diagonals, as integers."""
    return np.tril(np.ones((length, length), dtype=int)) - np.tril(np.ones((length, length), dtype=int), -window)
''',
        },
        "shortcut": None,
        "alternative": '''def sliding_window_mask(length, window):
    """Two loops, one entry at a time."""
    mask = np.zeros((length, length), dtype=bool)
    for i in range(length):
        for j in range(max(0, i - window + 1), i + 1):
            mask[i, j] = True
    return mask
''',
    },
}
