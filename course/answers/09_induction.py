"""Recorded answers to chapter 9's autograded exercises, as students might hand them in (format and grading:
attncourse/variants.py; graded by the chapter's "recorded answers" item, tests/book/recorded_answers.py).

``wrong``: a plausible wrong answer (the visible tests must fail it); ``shortcut``: one that breaks the exercise's
stated rule (None when it states none); ``alternative``: a correct answer written differently from the reference
solution, which must get full marks.
"""

ANSWERS = {
    "ex2": {
        "wrong": {
            # removes the head at every position: the positions are ignored
            "everywhere": '''\
import torch


def ablate_at(model, tokens, heads, positions):
    """Logits (B, L, vocab) of ``model`` on tokens (B, L), each (layer, head) of ``heads`` zero-ablated."""
    handles = []
    for layer, head in heads:
        attention = model.layers[layer]
        d_k = attention.embed_dim // attention.num_heads

        def hook(_module, inputs, columns=slice(head * d_k, (head + 1) * d_k)):
            context = inputs[0].clone()
            context[..., columns] = 0
            return (context,)

        handles.append(attention.out_proj.register_forward_pre_hook(hook))
    try:
        with torch.no_grad():
            return model(tokens)[0]
    finally:
        for handle in handles:
            handle.remove()
''',
            # zeroes the whole layer's output at those positions (every head of the layer, after W_O)
            "the whole layer": '''\
import torch


def ablate_at(model, tokens, heads, positions):
    """Logits (B, L, vocab) on tokens (B, L), each (layer, head) of ``heads`` zero-ablated at ``positions``."""
    positions = list(positions)

    def hook(_module, _inputs, output):
        output = output.clone()
        output[:, positions] = 0
        return output

    handles = [model.layers[layer].out_proj.register_forward_hook(hook) for layer, _ in heads]
    try:
        with torch.no_grad():
            return model(tokens)[0]
    finally:
        for handle in handles:
            handle.remove()
''',
        },
        "shortcut": None,
        # patching a head with zeros at some positions is zero-ablation there: attnlib's patch_heads does it
        "alternative": '''\
import torch

from attnlib.interpret import head_outputs, patch_heads


def ablate_at(model, tokens, heads, positions):
    """Zero-ablation at some positions = patching in a recorded output of zeros there."""
    zeros = torch.zeros_like(head_outputs(model, tokens))  # (layers, B, H, L, Dk)
    with patch_heads(model, list(heads), zeros, positions=list(positions)), torch.no_grad():
        logits, _ = model(tokens)
    return logits
''',
    },
    "ex3": {
        "wrong": {
            # the change of the logit when the head is removed: its total effect, which for a layer-1 head includes
            # what it changes in layer 2's attention, not what it writes into the logits directly
            "ablation differences": '''\
import torch

from attnlib.interpret import ablate_heads


def head_logit_contributions(model, tokens):
    """(layers, H, B, L - 1): the next token's logit with every head, minus without that head."""
    inputs, targets = tokens[:, :-1], tokens[:, 1:, None]
    with torch.no_grad():
        full = model(inputs)[0].gather(-1, targets)[..., 0]
        rows = []
        for layer, attention in enumerate(model.layers):
            row = []
            for head in range(attention.num_heads):
                with ablate_heads(model, [(layer, head)]):
                    row.append(full - model(inputs)[0].gather(-1, targets)[..., 0])
            rows.append(torch.stack(row))
    return torch.stack(rows)
''',
            # W_O's rows instead of its columns: nn.Linear stores (out, in), so head h is a block of columns
            "W_O's rows": '''\
import torch

from attnlib.interpret import head_outputs


def head_logit_contributions(model, tokens):
    """(layers, H, B, L - 1) direct logit attribution."""
    outputs = head_outputs(model, tokens[:, :-1])
    d_k = outputs.shape[-1]
    result = torch.empty(outputs.shape[0], outputs.shape[2], tokens.shape[0], tokens.shape[1] - 1)
    for layer, attention in enumerate(model.layers):
        w = attention.out_proj.weight.detach()
        for head in range(outputs.shape[2]):
            written = outputs[layer, :, head] @ w[head * d_k:(head + 1) * d_k]  # (B, L - 1, D)
            result[layer, head] = model.unembed(written).gather(-1, tokens[:, 1:, None])[..., 0].detach()
    return result
''',
        },
        "shortcut": None,
        # records W_O's input with a hook and splits it with one einsum per layer, instead of head_outputs
        "alternative": '''\
import torch


def head_logit_contributions(model, tokens):
    """Each head's direct contribution to the next token's logit, from W_O's input recorded by a hook."""
    recorded = []
    handles = [a.out_proj.register_forward_pre_hook(lambda _m, inputs: recorded.append(inputs[0]))
               for a in model.layers]
    try:
        with torch.no_grad():
            model(tokens[:, :-1])
    finally:
        for handle in handles:
            handle.remove()
    answer_rows = model.unembed.weight[tokens[:, 1:]]  # (B, L - 1, D): W_U's column of each next token
    per_layer = []
    for attention, context in zip(model.layers, recorded):
        heads = attention.num_heads
        d_k = context.shape[-1] // heads
        split = context.unflatten(-1, (heads, d_k))  # (B, L - 1, H, Dk)
        w_o = attention.out_proj.weight.unflatten(1, (heads, d_k))  # (D, H, Dk)
        per_layer.append(torch.einsum("blhk,dhk,bld->hbl", split, w_o, answer_rows))
    return torch.stack(per_layer).detach()
''',
    },
    "ex4": {
        "wrong": {
            # the probability of the token at the query itself, not of the next one
            "the current token": '''\
import torch

from attnlib.interpret import head_outputs, patch_heads


def patched_answer_probability(model, clean, corrupt, heads, query):
    """(B,) probability of the clean token at ``query``."""
    with patch_heads(model, heads, head_outputs(model, clean), positions=[query]), torch.no_grad():
        logits, _ = model(corrupt)
    return logits[:, query].softmax(-1).gather(-1, clean[:, query, None])[:, 0]
''',
            # the clean run's own probability: no patch at all, so it is high whatever the heads
            "the clean run": '''\
import torch


def patched_answer_probability(model, clean, corrupt, heads, query):
    """(B,) the clean run's probability of its next token at ``query``."""
    with torch.no_grad():
        logits, _ = model(clean)
    return logits[:, query].softmax(-1).gather(-1, clean[:, query + 1, None])[:, 0]
''',
        },
        "shortcut": None,
        # its own two hooks, a recorder and a patcher, on W_O's input, instead of attnlib.interpret
        "alternative": '''\
import torch


def patched_answer_probability(model, clean, corrupt, heads, query):
    """Record the heads' clean outputs at ``query`` with a hook, write them into the corrupted run with another."""
    d_k = model.layers[0].embed_dim // model.layers[0].num_heads
    saved = {}

    def record(layer):
        def hook(_module, inputs):
            saved[layer] = inputs[0].detach().clone()
        return hook

    def patch(layer, columns):
        def hook(_module, inputs):
            context = inputs[0].clone()
            for c in columns:
                context[:, query, c] = saved[layer][:, query, c]
            return (context,)
        return hook

    handles = [a.out_proj.register_forward_pre_hook(record(i)) for i, a in enumerate(model.layers)]
    with torch.no_grad():
        model(clean)
    for handle in handles:
        handle.remove()
    by_layer = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(slice(head * d_k, (head + 1) * d_k))
    handles = [model.layers[layer].out_proj.register_forward_pre_hook(patch(layer, cols))
               for layer, cols in by_layer.items()]
    try:
        with torch.no_grad():
            logits, _ = model(corrupt)
    finally:
        for handle in handles:
            handle.remove()
    return torch.softmax(logits[:, query], dim=-1)[torch.arange(len(clean)), clean[:, query + 1]]
''',
    },
}
