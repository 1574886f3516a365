"""Recorded answers to chapter 7's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

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
        "wrong": {
            # attends over all W slots from the first step on, so the stale slots not yet written get weight too
            "stale slots attended": '''\
import torch


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    keys[:, :, position % keys.shape[-2]], values[:, :, position % keys.shape[-2]] = key, value
    scores = (keys @ query[..., None])[..., 0] / query.shape[-1] ** 0.5  # (B, H, W)
    return (torch.softmax(scores, dim=-1)[..., None, :] @ values)[..., 0, :], keys, values
''',
            # a buffer that shifts left and appends at the end: right window, but not the layout the exercise
            # states (position i in slot i mod W), and the stale slots at the front get weight
            "shifting buffer": '''\
import torch


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    keys = torch.roll(keys, -1, dims=2)
    values = torch.roll(values, -1, dims=2)
    keys[:, :, -1], values[:, :, -1] = key, value
    scores = (keys @ query[..., None])[..., 0] / query.shape[-1] ** 0.5
    return (torch.softmax(scores, dim=-1)[..., None, :] @ values)[..., 0, :], keys, values
''',
        },
        "shortcut": {
            # right numbers, but from a history of every key it keeps itself: the buffers are written, never read
            "a history of its own": '''\
import torch

HISTORY = {"keys": [], "values": []}


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    window = keys.shape[-2]
    if position == 0:
        HISTORY["keys"], HISTORY["values"] = [], []
    HISTORY["keys"].append(key)
    HISTORY["values"].append(value)
    keys[:, :, position % window], values[:, :, position % window] = key, value
    recent_k = torch.stack(HISTORY["keys"][-window:], dim=2)  # (B, H, <= W, Dk)
    recent_v = torch.stack(HISTORY["values"][-window:], dim=2)
    weights = torch.softmax((recent_k @ query[..., None])[..., 0] / query.shape[-1] ** 0.5, dim=-1)
    return (weights[..., None, :] @ recent_v)[..., 0, :], keys, values
''',
            # a buffer that grows by one slot every step (torch.cat): no window on the memory at all
            "a growing buffer": '''\
import torch

WINDOW = {}


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    if position == 0:  # the first call gets the W-slot buffers: remember W, start a buffer of its own instead
        WINDOW["W"] = keys.shape[-2]
        keys = key.new_zeros(*key.shape[:2], 0, key.shape[-1])
        values = value.new_zeros(*value.shape[:2], 0, value.shape[-1])
    keys, values = torch.cat([keys, key[:, :, None]], dim=2), torch.cat([values, value[:, :, None]], dim=2)
    recent_k, recent_v = keys[:, :, -WINDOW["W"]:], values[:, :, -WINDOW["W"]:]
    weights = torch.softmax((recent_k @ query[..., None])[..., 0] / query.shape[-1] ** 0.5, dim=-1)
    return (weights[..., None, :] @ recent_v)[..., 0, :], keys, values
''',
        },
        "alternative": {
            # attnlib's attention over the whole buffer, with a mask of the slots that hold a position; copies
            "a mask of the written slots": '''\
import torch

from attnlib import scaled_dot_product_attention


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    window = keys.shape[-2]
    keys, values = keys.clone(), values.clone()
    keys[:, :, position % window] = key
    values[:, :, position % window] = value
    written = torch.arange(window) <= position  # (W,): slot s holds a position once s <= position
    out, _ = scaled_dot_product_attention(query[:, :, None], keys, values, attn_mask=written[None, :])
    return out[:, :, 0], keys, values
''',
            # reads the buffer back in time order (oldest first) before attending, with einsum
            "in time order": '''\
import torch


def rolling_step(query, key, value, keys, values, position):
    """One sliding-window decoding step from rolling buffers of W slots: output (B, H, Dv), keys, values."""
    window = keys.shape[-2]
    keys[:, :, position % window] = key
    values[:, :, position % window] = value
    slots = [p % window for p in range(max(0, position - window + 1), position + 1)]  # oldest to newest
    k, v = keys[:, :, slots], values[:, :, slots]
    weights = torch.einsum("bhd,bhsd->bhs", query, k).div(query.shape[-1] ** 0.5).softmax(dim=-1)
    return torch.einsum("bhs,bhsd->bhd", weights, v), keys, values
''',
        },
    },
    "ex4": {
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
    "ex5": {
        "wrong": {
            # one rolling buffer of sinks + W slots for every position: the sinks are overwritten like the rest
            "the sinks roll too": '''\
import torch


def streaming_step(query, key, value, keys, values, position, sinks):
    """One decoding step from buffers of sinks + W slots: output (B, H, Dv), keys, values."""
    slots = keys.shape[-2]
    keys[:, :, position % slots], values[:, :, position % slots] = key, value
    filled = min(position + 1, slots)
    weights = torch.softmax((keys[:, :, :filled] @ query[..., None])[..., 0] / query.shape[-1] ** 0.5, dim=-1)
    return (weights[..., None, :] @ values[:, :, :filled])[..., 0, :], keys, values
''',
        },
        "shortcut": {
            # right numbers from a history of its own: the buffers are written, never read
            "a history of its own": '''\
import torch

HISTORY = {"keys": [], "values": []}


def streaming_step(query, key, value, keys, values, position, sinks):
    """One decoding step from buffers of sinks + W slots: output (B, H, Dv), keys, values."""
    window = keys.shape[-2] - sinks
    if position == 0:
        HISTORY["keys"], HISTORY["values"] = [], []
    HISTORY["keys"].append(key)
    HISTORY["values"].append(value)
    slot = position if position < sinks else sinks + (position - sinks) % window
    keys[:, :, slot], values[:, :, slot] = key, value
    kept = sorted(set(range(min(sinks, position + 1))) | set(range(max(0, position - window + 1), position + 1)))
    k = torch.stack([HISTORY["keys"][i] for i in kept], dim=2)
    v = torch.stack([HISTORY["values"][i] for i in kept], dim=2)
    weights = torch.softmax((k @ query[..., None])[..., 0] / query.shape[-1] ** 0.5, dim=-1)
    return (weights[..., None, :] @ v)[..., 0, :], keys, values
''',
        },
        # attnlib's attention over the whole buffers, with a mask of the slots written so far; copies the buffers
        "alternative": '''\
import torch

from attnlib import scaled_dot_product_attention


def streaming_step(query, key, value, keys, values, position, sinks):
    """One decoding step from buffers of sinks + W slots: output (B, H, Dv), keys, values."""
    keys, values = keys.clone(), values.clone()
    window = keys.shape[-2] - sinks
    slot = position if position < sinks else sinks + (position - sinks) % window
    keys[:, :, slot], values[:, :, slot] = key, value
    written = torch.arange(keys.shape[-2]) <= position  # slot s holds a position once s <= position
    out, _ = scaled_dot_product_attention(query[:, :, None], keys, values, attn_mask=written[None, :])
    return out[:, :, 0], keys, values
''',
    },
}
