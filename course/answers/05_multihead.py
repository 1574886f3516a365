"""Recorded answers to chapter 5's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Per exercise: a plausible wrong answer (the visible test catches it), a shortcut that breaks the stated
rule, and a correct solution written differently from the reference.
"""

ANSWERS = {
    "ex1": {
        # cuts the fused (B, L, 3D) projection per head first, as if each head's q, k, v were interleaved
        "wrong": '''import numpy as np


def fused_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):
    """(B, L, D) -> output (B, L, D), weights (B, H, L, L), from a fused (D, 3D) Q/K/V projection."""
    b, length, d = x.shape
    d_k = d // num_heads
    qkv = (x @ w_qkv + b_qkv).reshape(b, length, num_heads, 3 * d_k).transpose(0, 2, 1, 3)
    q, k, v = np.split(qkv, 3, axis=-1)  # (B, H, L, d_k) each, but from the wrong columns
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d_k)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = weights / weights.sum(axis=-1, keepdims=True)
    context = (weights @ v).transpose(0, 2, 1, 3).reshape(b, length, d)
    return context @ w_o + b_o, weights
''',
        # lets attnlib's NumPy mirror split the heads and attend: the exercise says NumPy only
        "shortcut": '''import numpy as np

from attnlib import numpy_ops


def fused_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):
    """(B, L, D) -> output (B, L, D), weights (B, H, L, L), from a fused (D, 3D) Q/K/V projection."""
    q, k, v = (numpy_ops.split_heads(t, num_heads) for t in np.split(x @ w_qkv + b_qkv, 3, axis=-1))
    context, weights = numpy_ops.scaled_dot_product_attention(q, k, v)
    return numpy_ops.merge_heads(context) @ w_o + b_o, weights
''',
        "alternative": {
            # one head at a time, cutting each head's columns straight out of the fused matrix
            "one head at a time": '''import numpy as np


def fused_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):
    """(B, L, D) -> output (B, L, D), weights (B, H, L, L), from a fused (D, 3D) Q/K/V projection."""
    d = x.shape[-1]
    d_k = d // num_heads
    outputs, all_weights = [], []
    for h in range(num_heads):
        cols = [slice(part * d + h * d_k, part * d + (h + 1) * d_k) for part in range(3)]
        q, k, v = (x @ w_qkv[:, c] + b_qkv[c] for c in cols)  # (B, L, d_k) each
        scores = np.einsum("bqd,bkd->bqk", q, k) / np.sqrt(d_k)
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights = e / e.sum(axis=-1, keepdims=True)
        outputs.append(np.einsum("bqk,bkd->bqd", weights, v))
        all_weights.append(weights)
    return np.concatenate(outputs, axis=-1) @ w_o + b_o, np.stack(all_weights, axis=1)
''',
            # the student's own helpers, named like the library's functions the rule forbids: theirs, so allowed
            "own helpers named split_heads and merge_heads": '''import numpy as np


def split_heads(t, num_heads):
    """(B, L, D) -> (B, H, L, D/H), written here."""
    b, length, d = t.shape
    return t.reshape(b, length, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def merge_heads(t):
    """(B, H, L, d) -> (B, L, H d), written here."""
    b, h, length, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, length, h * d)


def fused_self_attention(x, w_qkv, b_qkv, w_o, b_o, num_heads):
    """(B, L, D) -> output (B, L, D), weights (B, H, L, L), from a fused (D, 3D) Q/K/V projection."""
    q, k, v = (split_heads(t, num_heads) for t in np.split(x @ w_qkv + b_qkv, 3, axis=-1))
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return merge_heads(weights @ v) @ w_o + b_o, weights
''',
        },
    },
    "ex2": {
        "wrong": {
            # the formula of the chapter, 4 D^2 + 4 D, ignoring kdim and vdim
            "ignores kdim and vdim": '''def mha_parameter_count(embed_dim, num_heads, bias=True, kdim=None, vdim=None):
    """Parameters of a multi-head attention layer: Q, K, V, O projections and biases."""
    return 4 * embed_dim**2 + (4 * embed_dim if bias else 0)
''',
            # kdim and vdim right, but the four bias vectors counted whatever bias says
            "ignores bias": '''def mha_parameter_count(embed_dim, num_heads, bias=True, kdim=None, vdim=None):
    """Parameters of a multi-head attention layer: Q, K, V, O projections and biases."""
    kdim, vdim = kdim or embed_dim, vdim or embed_dim
    return embed_dim * (2 * embed_dim + kdim + vdim) + 4 * embed_dim
''',
        },
        # builds the module and counts: the exercise says from the formula
        "shortcut": '''import torch


def mha_parameter_count(embed_dim, num_heads, bias=True, kdim=None, vdim=None):
    """Parameters of a multi-head attention layer: Q, K, V, O projections and biases."""
    layer = torch.nn.MultiheadAttention(embed_dim, num_heads, bias=bias, kdim=kdim, vdim=vdim)
    return sum(p.numel() for p in layer.parameters())
''',
        "alternative": '''def mha_parameter_count(embed_dim, num_heads, bias=True, kdim=None, vdim=None):
    """Parameters of a multi-head attention layer: Q, K, V, O projections and biases."""
    widths_in = [embed_dim, kdim or embed_dim, vdim or embed_dim, embed_dim]  # inputs of W_Q, W_K, W_V, W_O
    return sum(width * embed_dim + (embed_dim if bias else 0) for width in widths_in)
''',
    },
    "ex5": {
        "wrong": {
            # interleaved groups: query head h reads key head h mod H_kv, not h // G
            "interleaved groups": '''\
def qk_circuit(layer, head):
    """W_QK^h (D, D) of a query head."""
    d_k = layer.embed_dim // layer.num_heads
    group = head % layer.num_kv_heads
    w_q = layer.q_proj.weight[head * d_k:(head + 1) * d_k].T
    w_k = layer.k_proj.weight[group * d_k:(group + 1) * d_k].T
    return (w_q @ w_k.T).detach()
''',
            # the stored weights as if they were W: rows and columns swapped, a (d_k, d_k) matrix
            "nn.Linear's weight read as W": '''\
def qk_circuit(layer, head):
    """W_QK^h (D, D) of a query head."""
    d_k = layer.embed_dim // layer.num_heads
    group = head // (layer.num_heads // layer.num_kv_heads)
    w_q = layer.q_proj.weight[:, head * d_k:(head + 1) * d_k]
    w_k = layer.k_proj.weight[:, group * d_k:(group + 1) * d_k]
    return (w_q @ w_k.T).detach()
''',
        },
        "shortcut": None,
        # every query head's keys, repeated over its group (as torch's enable_gqa does), then one einsum
        "alternative": '''\
import torch


def qk_circuit(layer, head):
    """W_QK^h = W_Q^h (W_K^g)^T from the key heads repeated for their groups."""
    heads, d_k = layer.num_heads, layer.embed_dim // layer.num_heads
    w_q = layer.q_proj.weight.detach().unflatten(0, (heads, d_k))  # (H, d_k, D): row blocks, one per head
    w_k = layer.k_proj.weight.detach().unflatten(0, (layer.num_kv_heads, d_k))  # (H_kv, d_k, D)
    w_k = w_k.repeat_interleave(heads // layer.num_kv_heads, dim=0)  # (H, d_k, D): key head of each query head
    return torch.einsum("kd,ke->de", w_q[head], w_k[head])
''',
    },
}
