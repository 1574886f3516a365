"""Recorded answers to chapter 4's autograded exercises, as students might hand them in (format and grading:
course/variants.py; checked by strict nbval's "recorded answers" item of the chapter, book/conftest.py)."""

ANSWERS = {
    "ex1": {
        "wrong": '''def padded_attention(query, key, value, lengths):
    """Masks the padded queries instead of the padded keys."""
    scores = query @ key.transpose(0, 2, 1) / np.sqrt(query.shape[-1])
    real = np.arange(query.shape[1])[None, :, None] < np.asarray(lengths)[:, None, None]
    weights = nops.softmax(np.where(real, scores, -np.inf))
    return weights @ value, weights
''',
        "shortcut": '''def padded_attention(query, key, value, lengths):
    """Calls the library's attention, which the exercise forbids."""
    real = np.arange(key.shape[1])[None, None, :] < np.asarray(lengths)[:, None, None]
    return nops.scaled_dot_product_attention(query, key, value, attn_mask=real)
''',
        "alternative": '''def padded_attention(query, key, value, lengths):
    """One sequence at a time, slicing away the padded keys before the softmax."""
    batch, lq, _ = query.shape
    weights = np.zeros((batch, lq, key.shape[1]))
    for b, n in enumerate(lengths):
        scores = np.einsum("qd,kd->qk", query[b], key[b, :n]) / np.sqrt(query.shape[-1])
        weights[b, :, :n] = nops.softmax(scores)
    return np.einsum("bqk,bkv->bqv", weights, value), weights
''',
    },
    "ex2": {
        "wrong": '''def running_mean(value):
    """Uniform weights over all rows: the overall mean, not the running one."""
    zeros = np.zeros((value.shape[0], 1))
    output, _ = nops.scaled_dot_product_attention(zeros, zeros, value)
    return output
''',
        "shortcut": None,
        "alternative": '''def running_mean(value):
    """Equal scores from any constant query and key, with a boolean causal mask instead of is_causal."""
    ones = np.ones((value.shape[0], 3))
    output, _ = nops.scaled_dot_product_attention(ones, ones, value, attn_mask=nops.causal_mask(value.shape[0]))
    return output
''',
    },
}
