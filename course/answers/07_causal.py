"""Recorded answers to chapter 7's autograded exercises, as students might hand them in (format and grading:
course/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

``wrong``: a plausible wrong answer (the visible tests or the hidden ones must fail it); ``shortcut``: one that
breaks the exercise's stated rule (None when it states none); ``alternative``: a correct answer written
differently from the reference solution, which must get full marks.
"""

ANSWERS = {
    "ex1": {
        "wrong": {
            # forgets that every token stores a key AND a value: twice the tokens that really fit
            "keys only": '''\
def longest_context(budget_bytes, num_layers, num_kv_heads, head_dim, batch_size=1, bytes_per_value=2):
    """The largest L whose KV cache (keys and values, every layer) fits in budget_bytes."""
    return budget_bytes // (num_layers * num_kv_heads * head_dim * batch_size * bytes_per_value)
''',
            # the exercise states it: batch_size sequences share the budget; this sizes the cache of one
            "ignores batch_size": '''\
def longest_context(budget_bytes, num_layers, num_kv_heads, head_dim, batch_size=1, bytes_per_value=2):
    """The largest L whose KV cache (keys and values, every layer) fits in budget_bytes."""
    return budget_bytes // (2 * num_layers * num_kv_heads * head_dim * bytes_per_value)
''',
        },
        "shortcut": None,
        # counts up with the library's own formula instead of dividing
        "alternative": '''\
from attnlib.causal import kv_cache_bytes


def longest_context(budget_bytes, num_layers, num_kv_heads, head_dim, batch_size=1, bytes_per_value=2):
    """The largest L whose KV cache (keys and values, every layer) fits in budget_bytes."""
    one = kv_cache_bytes(num_layers, num_kv_heads, head_dim, 1, batch_size, bytes_per_value)
    low, high = 0, budget_bytes // one + 1  # the answer lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if kv_cache_bytes(num_layers, num_kv_heads, head_dim, middle, batch_size, bytes_per_value) <= budget_bytes:
            low = middle
        else:
            high = middle
    return low
''',
    },
    "ex2": {
        # attends over all W slots from the first step on, so the empty (zero) slots get weight too
        "wrong": '''\
import torch


def rolling_decode(query, key, value, window):
    """Sliding-window attention, one position at a time, from a buffer of `window` slots: (B, H, L, Dv)."""
    b, h, length, dk = key.shape
    keys = torch.zeros(b, h, window, dk, dtype=key.dtype)
    values = torch.zeros(b, h, window, value.shape[-1], dtype=value.dtype)
    outputs = []
    for t in range(length):
        keys[:, :, t % window] = key[:, :, t]
        values[:, :, t % window] = value[:, :, t]
        scores = query[:, :, t:t + 1] @ keys.transpose(-2, -1) / dk**0.5
        outputs.append(torch.softmax(scores, dim=-1) @ values)
    return torch.stack(outputs, dim=2)[:, :, :, 0]
''',
        # right numbers, but all positions at once with the library's mask: no buffer at all
        "shortcut": '''\
from attnlib import scaled_dot_product_attention
from attnlib.causal import sliding_window_mask


def rolling_decode(query, key, value, window):
    """Sliding-window attention, one position at a time, from a buffer of `window` slots: (B, H, L, Dv)."""
    length = query.shape[-2]
    return scaled_dot_product_attention(query, key, value, attn_mask=sliding_window_mask(length, length, window))[0]
''',
        # attnlib's attention over the whole buffer with a mask of the slots filled so far; output preallocated
        "alternative": '''\
import torch

from attnlib import scaled_dot_product_attention


def rolling_decode(query, key, value, window):
    """Sliding-window attention, one position at a time, from a buffer of `window` slots: (B, H, L, Dv)."""
    b, h, length, dk = key.shape
    keys = key.new_zeros(b, h, window, dk)
    values = value.new_zeros(b, h, window, value.shape[-1])
    filled = torch.zeros(window, dtype=torch.bool)
    out = value.new_empty(b, h, length, value.shape[-1])
    for t in range(length):
        keys[:, :, t % window], values[:, :, t % window] = key[:, :, t], value[:, :, t]
        filled[t % window] = True
        step, _ = scaled_dot_product_attention(query[:, :, t:t + 1], keys, values, attn_mask=filled[None, :])
        out[:, :, t] = step[:, :, 0]
    return out
''',
    },
    "ex5": {
        "wrong": {
            # counts slots, not blocks: a request's last block is only partly full, but it is all taken
            "no whole blocks": '''\
def requests_that_fit(budget_bytes, lengths, bytes_per_token, block_size):
    """How many of the requests, admitted in order, fit together in a paged cache of budget_bytes."""
    free_tokens = budget_bytes // bytes_per_token
    admitted = 0
    for length in lengths:
        if length > free_tokens:
            break
        free_tokens -= length
        admitted += 1
    return admitted
''',
            # rounds the requests' total up to blocks, as if two requests could share a block
            "shared blocks": '''\
def requests_that_fit(budget_bytes, lengths, bytes_per_token, block_size):
    """How many of the requests, admitted in order, fit together in a paged cache of budget_bytes."""
    blocks = budget_bytes // (block_size * bytes_per_token)
    total, admitted = 0, 0
    for length in lengths:
        total += length
        if -(-total // block_size) > blocks:
            break
        admitted += 1
    return admitted
''',
            # skips a request that does not fit and admits later, shorter ones: not "in order"
            "skips ahead": '''\
def requests_that_fit(budget_bytes, lengths, bytes_per_token, block_size):
    """How many of the requests, admitted in order, fit together in a paged cache of budget_bytes."""
    free_blocks = budget_bytes // (block_size * bytes_per_token)
    admitted = 0
    for length in lengths:
        needed = -(-length // block_size)
        if needed <= free_blocks:
            free_blocks -= needed
            admitted += 1
    return admitted
''',
        },
        "shortcut": None,
        # running totals of whole blocks per request, then a binary search for the last prefix that fits
        "alternative": '''\
import bisect
import itertools
import math


def requests_that_fit(budget_bytes, lengths, bytes_per_token, block_size):
    """How many of the requests, admitted in order, fit together in a paged cache of budget_bytes."""
    pool = budget_bytes // (block_size * bytes_per_token)
    used = list(itertools.accumulate(math.ceil(n / block_size) for n in lengths))
    return bisect.bisect_right(used, pool)
''',
    },
}
