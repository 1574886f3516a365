"""Recorded answers to chapter 8's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; checked by strict nbval's "recorded answers" item of the chapter, the root conftest.py).

Each string is the complete source of the exercise's answer cell as a student would submit it.
"""

ANSWERS = {
    "ex1": {
        "wrong": {
            # the most common slip: adding the two states without rescaling them to a common maximum
            "no rescaling": '''import torch


def merge_states(state_a, state_b):
    (max_a, sum_a, acc_a), (max_b, sum_b, acc_b) = state_a, state_b
    return torch.maximum(max_a, max_b), sum_a + sum_b, acc_a + acc_b
''',
            # rescales right, but with no guard for -inf: two empty states give exp(-inf - (-inf)) = NaN
            "no guard for two empty states": '''import torch


def merge_states(state_a, state_b):
    (max_a, sum_a, acc_a), (max_b, sum_b, acc_b) = state_a, state_b
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
    return new_max, sum_a * scale_a + sum_b * scale_b, acc_a * scale_a[..., None] + acc_b * scale_b[..., None]
''',
        },
        "shortcut": None,  # the exercise states no rule
        # stacks the two states and weighs them in one go, instead of naming each rescaling
        "alternative": '''import torch


def merge_states(state_a, state_b):
    maxes = torch.stack([state_a[0], state_b[0]])  # (2, ..., Lq)
    new_max = maxes.amax(dim=0)
    reference = torch.nan_to_num(new_max, neginf=0.0)  # a row nobody saw: compare with 0, not -inf
    weights = torch.exp(maxes - reference)  # (2, ..., Lq)
    sums = (weights * torch.stack([state_a[1], state_b[1]])).sum(dim=0)
    accs = (weights[..., None] * torch.stack([state_a[2], state_b[2]])).sum(dim=0)
    return new_max, sums, accs
''',
    },
    "ex2": {
        # floor instead of ceiling: forgets the last, partial block
        "wrong": '''def causal_tiles(length, block_size):
    n = length // block_size
    return n * (n + 1) // 2
''',
        "shortcut": {
            # right count, but by walking the grid the exercise says not to build
            "range over the grid": '''import math


def causal_tiles(length, block_size):
    n = math.ceil(length / block_size)
    return sum(1 for row in range(n) for col in range(row + 1))
''',
            # right count, by a while loop over the rows of tiles: no forbidden name, still a loop
            "a while loop": '''def causal_tiles(length, block_size):
    tiles, row, start = 0, 0, 0
    while start < length:
        row += 1
        tiles += row
        start += block_size
    return tiles
''',
        },
        "alternative": '''import math


def causal_tiles(length, block_size):
    n = math.ceil(length / block_size)
    return (n * n + n) // 2
''',
    },
    "ex5": {
        "wrong": {
            # tiling read as "every input once": K and V loaded a single time, not once per query block
            "K and V read once": '''def swapped_loops_io(length, head_dim, block_rows, bytes_per_element=2):
    reads = 3 * length * head_dim  # Q, K, V
    writes = length * head_dim + length  # O and the log-sum-exp
    return (reads + writes) * bytes_per_element
''',
            # counts only what the loops repeat, K and V per query block: Q's read, O's and the lse's writes missing
            "K and V only": '''def swapped_loops_io(length, head_dim, block_rows, bytes_per_element=2):
    query_blocks = -(-length // block_rows)
    return query_blocks * 2 * length * head_dim * bytes_per_element
''',
            # O written, but not the log-sum-exp of its rows (which the backward pass needs)
            "no log-sum-exp": '''def swapped_loops_io(length, head_dim, block_rows, bytes_per_element=2):
    query_blocks = -(-length // block_rows)
    return (2 * length * head_dim + query_blocks * 2 * length * head_dim) * bytes_per_element
''',
            # floor instead of ceiling: forgets the last, shorter query block
            "floor of L / B_r": '''def swapped_loops_io(length, head_dim, block_rows, bytes_per_element=2):
    blocks = length // block_rows
    elements = length * head_dim + blocks * 2 * length * head_dim + length * head_dim + length
    return elements * bytes_per_element
''',
        },
        "shortcut": None,  # the exercise states no rule
        # walks the query blocks one by one instead of a closed form
        "alternative": '''def swapped_loops_io(length, head_dim, block_rows, bytes_per_element=2):
    elements = 0
    for start in range(0, length, block_rows):
        rows = min(block_rows, length - start)
        elements += rows * head_dim  # Q_i
        elements += 2 * length * head_dim  # every key and value
        elements += rows * (head_dim + 1)  # O_i and its log-sum-exp
    return elements * bytes_per_element
''',
    },
    "ex6": {
        # the most common slip: the numerator's state forgets, the denominator z keeps summing every key
        "wrong": '''import torch


def decayed_step(state, phi_q, phi_k, value, gamma):
    S, z = state
    S = gamma * S + phi_k[..., :, None] * value[..., None, :]
    z = z + phi_k
    output = (phi_q[..., None, :] @ S)[..., 0, :] / ((phi_q * z).sum(dim=-1, keepdim=True) + 1e-6)
    return (S, z), output
''',
        "shortcut": None,  # the exercise states no rule
        # einsum for the outer product and the read-out; the decay written as a separate step
        "alternative": '''import torch


def decayed_step(state, phi_q, phi_k, value, gamma):
    S, z = (gamma * part for part in state)  # forget first
    S = S + torch.einsum("...k,...v->...kv", phi_k, value)
    z = z + phi_k
    numerator = torch.einsum("...k,...kv->...v", phi_q, S)
    denominator = torch.einsum("...k,...k->...", phi_q, z)[..., None] + 1e-6
    return (S, z), numerator / denominator
''',
    },
}
