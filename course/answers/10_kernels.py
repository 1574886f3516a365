"""Recorded answers to chapter 10's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Each string is the complete source of the exercise's answer cell as a student would submit it.
"""

ANSWERS = {
    "ex1": {
        "wrong": {
            # the window one key too wide: i - j <= window (chapter 7's window counts the query itself)
            "off by one": '''import triton
import triton.language as tl


@triton.jit
def first_key_block(start_m, BLOCK_N: tl.constexpr, WINDOW: tl.constexpr):
    first_key = tl.maximum(start_m - WINDOW, 0)
    return (first_key // BLOCK_N) * BLOCK_N


@triton.jit
def window_mask(rows, cols, WINDOW: tl.constexpr):
    return (rows[:, None] >= cols[None, :]) & (rows[:, None] - cols[None, :] <= WINDOW)
''',
            # only the band's width, no causality: each query also sees the next WINDOW - 1 keys
            "not causal": '''import triton
import triton.language as tl


@triton.jit
def first_key_block(start_m, BLOCK_N: tl.constexpr, WINDOW: tl.constexpr):
    first_key = tl.maximum(start_m - WINDOW + 1, 0)
    return (first_key // BLOCK_N) * BLOCK_N


@triton.jit
def window_mask(rows, cols, WINDOW: tl.constexpr):
    distance = rows[:, None] - cols[None, :]
    return (distance < WINDOW) & (distance > -WINDOW)
''',
        },
        # right output, but every program starts at key 0: the tiles outside the window are masked, not skipped
        "shortcut": '''import triton
import triton.language as tl


@triton.jit
def first_key_block(start_m, BLOCK_N: tl.constexpr, WINDOW: tl.constexpr):
    return start_m * 0


@triton.jit
def window_mask(rows, cols, WINDOW: tl.constexpr):
    return (rows[:, None] >= cols[None, :]) & (rows[:, None] - cols[None, :] < WINDOW)
''',
        # the first key rounded down with a remainder, the mask from one distance block
        "alternative": '''import triton
import triton.language as tl


@triton.jit
def first_key_block(start_m, BLOCK_N: tl.constexpr, WINDOW: tl.constexpr):
    oldest = start_m - (WINDOW - 1)
    oldest = tl.where(oldest < 0, 0, oldest)
    return oldest - oldest % BLOCK_N


@triton.jit
def window_mask(rows, cols, WINDOW: tl.constexpr):
    back = rows[:, None] - cols[None, :]  # how far back each key is
    return (back >= 0) & (back <= WINDOW - 1)
''',
    },
    "ex3": {
        "wrong": {
            # dS = P ∘ dP: forgets the softmax's Δ term
            "no delta": '''import torch


def dq_by_query_blocks(query, key, value, grad_out, output, lse, is_causal=False, block_size=16):
    scale = query.shape[-1] ** -0.5
    dq = torch.zeros_like(query)
    lq, lk = query.shape[-2], key.shape[-2]
    for q0 in range(0, lq, block_size):
        q1 = min(q0 + block_size, lq)
        for k0 in range(0, lk, block_size):
            k1 = min(k0 + block_size, lk)
            s = query[..., q0:q1, :] @ key[..., k0:k1, :].transpose(-2, -1) * scale
            if is_causal:
                s = s.masked_fill(torch.arange(k0, k1) > torch.arange(q0, q1)[:, None], float("-inf"))
            p = torch.exp(s - lse[..., q0:q1, None])
            dp = grad_out[..., q0:q1, :] @ value[..., k0:k1, :].transpose(-2, -1)
            dq[..., q0:q1, :] += scale * (p * dp) @ key[..., k0:k1, :]
    return dq
''',
            # the gradient with respect to the scaled query: the scale left out
            "no scale": '''import torch


def dq_by_query_blocks(query, key, value, grad_out, output, lse, is_causal=False, block_size=16):
    scale = query.shape[-1] ** -0.5
    delta = (grad_out * output).sum(-1)
    dq = torch.zeros_like(query)
    lq, lk = query.shape[-2], key.shape[-2]
    for q0 in range(0, lq, block_size):
        q1 = min(q0 + block_size, lq)
        for k0 in range(0, lk, block_size):
            k1 = min(k0 + block_size, lk)
            s = query[..., q0:q1, :] @ key[..., k0:k1, :].transpose(-2, -1) * scale
            if is_causal:
                s = s.masked_fill(torch.arange(k0, k1) > torch.arange(q0, q1)[:, None], float("-inf"))
            p = torch.exp(s - lse[..., q0:q1, None])
            dp = grad_out[..., q0:q1, :] @ value[..., k0:k1, :].transpose(-2, -1)
            dq[..., q0:q1, :] += (p * (dp - delta[..., q0:q1, None])) @ key[..., k0:k1, :]
    return dq
''',
        },
        # right dQ, but through the whole (Lq, Lk) matrix of weights at once: the rule the exercise states
        "shortcut": '''import torch


def dq_by_query_blocks(query, key, value, grad_out, output, lse, is_causal=False, block_size=16):
    scale = query.shape[-1] ** -0.5
    scores = query @ key.transpose(-2, -1) * scale
    if is_causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    p = torch.exp(scores - lse[..., None])
    dp = grad_out @ value.transpose(-2, -1)
    ds = p * (dp - (grad_out * output).sum(-1, keepdim=True))
    return scale * ds @ key
''',
        # a helper per tile, the causal tiles skipped by a break, Δ computed per block
        "alternative": '''import math

import torch


def _tile(q, k, v, do, lse, delta, rows, cols, causal, scale):
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        s = torch.where(cols[None, :] <= rows[:, None], s, torch.tensor(float("-inf"), dtype=s.dtype))
    p = (s - lse[..., None]).exp()
    ds = p * (do @ v.transpose(-2, -1) - delta[..., None])
    return ds @ k * scale


def dq_by_query_blocks(query, key, value, grad_out, output, lse, is_causal=False, block_size=16):
    scale = 1 / math.sqrt(query.shape[-1])
    lq, lk = query.shape[-2], key.shape[-2]
    blocks = []
    for q0 in range(0, lq, block_size):
        rows = torch.arange(q0, min(q0 + block_size, lq))
        delta = torch.einsum("...d,...d->...", grad_out[..., rows, :], output[..., rows, :])
        total = torch.zeros_like(query[..., rows, :])
        for k0 in range(0, lk, block_size):
            if is_causal and k0 > rows[-1]:
                break
            cols = torch.arange(k0, min(k0 + block_size, lk))
            total = total + _tile(query[..., rows, :], key[..., cols, :], value[..., cols, :], grad_out[..., rows, :],
                                  lse[..., rows], delta, rows, cols, is_causal, scale)
        blocks.append(total)
    return torch.cat(blocks, dim=-2)
''',
    },
    "ex4": {
        # the sinks visible to every query, also to those before them
        "wrong": '''def sinks_and_window(sinks, window):
    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx < sinks) | ((kv_idx <= q_idx) & (q_idx - kv_idx < window))
    return mask_mod
''',
        # right mask, from a dense (L, L) tensor built with attnlib's mask builders: the rule the exercise states
        "shortcut": '''import torch

from attnlib.causal import sliding_window_mask
from attnlib.softmax import causal_mask


def sinks_and_window(sinks, window, length=512):
    dense = sliding_window_mask(length, length, window) | (causal_mask(length) & (torch.arange(length) < sinks))

    def mask_mod(b, h, q_idx, kv_idx):
        return dense[q_idx, kv_idx]
    return mask_mod
''',
        # the same condition in another order, with named parts
        "alternative": '''def sinks_and_window(sinks, window):
    def mask_mod(b, h, q_idx, kv_idx):
        distance = q_idx - kv_idx
        in_window = distance < window
        is_sink = kv_idx < sinks
        return (distance >= 0) & (is_sink | in_window)
    return mask_mod
''',
    },
}
