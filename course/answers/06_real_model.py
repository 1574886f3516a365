"""Recorded answers to chapter 6's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Per exercise: a plausible wrong answer (the visible test catches it), a shortcut that breaks the stated
rule (None where the exercise states none that can be checked) and a correct solution written
differently from the reference.
"""

ANSWERS = {
    "ex1": {
        # averages over the chosen keys instead of adding them: right for one key, wrong for [CLS] + [SEP]
        "wrong": '''import torch


def attention_share(weights, positions):
    """(H, L, L) weights, list of key positions -> (H,) mean over queries of the weight on those keys."""
    positions = torch.as_tensor(list(positions), dtype=torch.long, device=weights.device)
    return weights[..., positions].mean(dim=-1).mean(dim=-1)
''',
        "shortcut": None,
        "alternative": '''import torch


def attention_share(weights, positions):
    """(H, L, L) weights, list of key positions -> (H,) mean over queries of the weight on those keys."""
    chosen = torch.zeros(weights.shape[-1], dtype=weights.dtype, device=weights.device)
    for p in positions:
        chosen[p] = 1
    per_query = torch.einsum("hqk,k->hq", weights, chosen)  # weight each query gives the chosen keys
    return per_query.sum(dim=-1) / weights.shape[-2]
''',
    },
    "ex2": {
        # forgets the 1/sqrt(d_k) scaling of chapter 2
        "wrong": '''import torch


def one_head(self_attention, hidden_states, head):
    """Attention weights (B, L, L) of one head, from that head's slice of the query/key weights."""
    d_k = self_attention.attention_head_size
    rows = slice(head * d_k, (head + 1) * d_k)
    q = hidden_states @ self_attention.query.weight[rows].T + self_attention.query.bias[rows]
    k = hidden_states @ self_attention.key.weight[rows].T + self_attention.key.bias[rows]
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)
''',
        "shortcut": {
            # computes every head with attnlib and keeps one: the exercise says plain torch, not attnlib
            "attnlib's layer_attention": '''import torch

from attnlib.models import layer_attention


def one_head(self_attention, hidden_states, head):
    """Attention weights (B, L, L) of one head, from that head's slice of the query/key weights."""
    return layer_attention(self_attention, hidden_states)[:, head]
''',
            # the layer's own forward pass over all heads, then one head: there is no module to call
            "the module's own forward": '''import torch


def one_head(self_attention, hidden_states, head):
    """Attention weights (B, L, L) of one head, from the layer's own forward pass."""
    return self_attention(hidden_states, output_attentions=True)[1][:, head]
''',
        },
        "alternative": {
            # projects every head with the full weights, then keeps the head's columns: the same numbers
            "all heads projected, one kept": '''import torch


def one_head(self_attention, hidden_states, head):
    """Attention weights (B, L, L) of one head: all heads projected, then this head's columns."""
    d_k = self_attention.attention_head_size
    q_all = hidden_states @ self_attention.query.weight.T + self_attention.query.bias  # (B, L, H * d_k)
    k_all = hidden_states @ self_attention.key.weight.T + self_attention.key.bias
    q = q_all.unflatten(-1, (-1, d_k))[..., head, :]  # (B, L, d_k)
    k = k_all.unflatten(-1, (-1, d_k))[..., head, :]
    return torch.softmax(q @ k.transpose(-2, -1) / d_k**0.5, dim=-1)
''',
            "F.linear and einsum": '''import math

import torch


def one_head(self_attention, hidden_states, head):
    """Attention weights (B, L, L) of one head, from that head's slice of the query/key weights."""
    d_k = self_attention.attention_head_size
    start, stop = head * d_k, (head + 1) * d_k
    w_q, b_q = self_attention.query.weight[start:stop], self_attention.query.bias[start:stop]
    w_k, b_k = self_attention.key.weight[start:stop], self_attention.key.bias[start:stop]
    q = torch.nn.functional.linear(hidden_states, w_q, b_q)  # (B, L, d_k)
    k = torch.nn.functional.linear(hidden_states, w_k, b_k)
    scores = torch.einsum("bqd,bkd->bqk", q, k) / math.sqrt(d_k)
    return scores.softmax(dim=-1)
''',
        },
    },
}
