"""Reading attention more carefully than its weights: value-weighted norms, rollout, head ablation.

A weight ``A[i, j]`` says how much of token j's value a head mixes into token i. Three measurements
go further than the raw map, each from the literature:

* ``value_weighted_norms``: ``‖A[i, j] f(x_j)‖``, the size of what token j actually adds to token i
  (Kobayashi et al. 2020): a large weight on a tiny value adds almost nothing;
* ``attention_rollout``: how attention composes through the layers (Abnar & Zuidema 2020): every
  layer's head-averaged weights, with the residual connection added as ``(A + I) / 2``, multiplied;
* ``ablate_heads``: a causal test: zero a head's output and measure what changes downstream.

Only ``ablate_heads`` needs a ``transformers`` BERT; the other two take tensors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence

import torch

from attnlib._checks import require_tensor


def value_weighted_norms(weights: torch.Tensor, values: torch.Tensor,
                         out_proj: torch.Tensor | None = None) -> torch.Tensor:
    """``‖A[..., h, i, j] f_h(v_j)‖`` for every head, query and key: (..., H, Lq, Lk).

    ``weights`` (..., H, Lq, Lk) attention probabilities; ``values`` (..., H, Lk, Dv) each head's
    values. Without ``out_proj`` ``f_h`` is the identity; with the output projection ``out_proj``
    (H*Dv, D) (``concat(heads) @ out_proj``) ``f_h(v) = v @ out_proj[h*Dv:(h+1)*Dv]``, the part of the
    layer's output that head h's value of token j contributes (Kobayashi et al. 2020's ``‖αf(x)‖``).
    """
    require_tensor("weights", weights)
    require_tensor("values", values)
    if weights.ndim < 3 or values.ndim != weights.ndim:
        raise ValueError(f"expected weights (..., H, Lq, Lk) and values (..., H, Lk, Dv) of the same rank >= 3, "
                         f"got {tuple(weights.shape)} and {tuple(values.shape)}")
    heads, length = weights.shape[-3], weights.shape[-1]
    if values.shape[-3] != heads or values.shape[-2] != length:
        raise ValueError(f"expected values of shape (..., H, Lk, Dv) with H={heads}, Lk={length} like weights "
                         f"{tuple(weights.shape)}, got {tuple(values.shape)}")
    if out_proj is not None:
        require_tensor("out_proj", out_proj)
        d_v = values.shape[-1]
        if out_proj.ndim != 2 or out_proj.shape[0] != heads * d_v:
            raise ValueError(f"expected out_proj of shape (H*Dv, D) = ({heads * d_v}, D), got {tuple(out_proj.shape)}")
        per_head = out_proj.reshape(heads, d_v, out_proj.shape[-1]).to(values.dtype)  # (H, Dv, D)
        values = values @ per_head  # (..., H, Lk, Dv) @ (H, Dv, D) -> (..., H, Lk, D)
    sizes = torch.linalg.vector_norm(values, dim=-1)  # (..., H, Lk): ‖f(v_j)‖
    return weights * sizes[..., None, :]  # ‖a v‖ = |a| ‖v‖ with a >= 0: (..., H, Lq, Lk)


def _stack_layers(attentions: Sequence[torch.Tensor]) -> torch.Tensor:
    if isinstance(attentions, torch.Tensor) or not isinstance(attentions, Sequence) or len(attentions) == 0:
        kind = "an empty list" if isinstance(attentions, Sequence) and len(attentions) == 0 \
            else type(attentions).__qualname__
        raise TypeError(f"expected a non-empty list with one (..., H, L, L) tensor per layer, got {kind}")
    for i, a in enumerate(attentions):
        require_tensor(f"attentions[{i}]", a)
        if a.ndim < 3 or a.shape[-1] != a.shape[-2] or a.shape != attentions[0].shape:
            raise ValueError(f"expected every layer of shape (..., H, L, L) = {tuple(attentions[0].shape)} "
                             f"like layer 0, got {tuple(a.shape)} at layer {i}")
    return torch.stack(list(attentions))  # (N, ..., H, L, L)


def attention_rollout(attentions: Sequence[torch.Tensor], residual: bool = True) -> torch.Tensor:
    """Attention rollout through every layer (Abnar & Zuidema 2020): (..., L, L).

    ``attentions``: one (..., H, L, L) tensor per layer, first layer first. Each layer's heads are
    averaged; with ``residual`` the identity is added for the skip connection and rows renormalised,
    ``Â = (A + I) / 2``; then ``rollout = Â_N ⋯ Â_2 Â_1``. Row i says how much of each input token
    reaches position i at the top, if attention were the only way information moved.
    """
    stacked = _stack_layers(attentions).mean(dim=-3)  # (N, ..., L, L): average over heads
    if residual:
        eye = torch.eye(stacked.shape[-1], dtype=stacked.dtype, device=stacked.device)
        stacked = 0.5 * stacked + 0.5 * eye
        stacked = stacked / stacked.sum(dim=-1, keepdim=True)
    rollout = stacked[0]
    for layer in stacked[1:]:
        rollout = layer @ rollout  # (..., L, L) @ (..., L, L): the later layer mixes what the earlier ones mixed
    return rollout


def _head_pairs(model, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (layer, head) pairs, checked against the model's layers and heads."""
    layers, per_layer = len(model.encoder.layer), model.config.num_attention_heads
    pairs = []
    for pair in heads:
        if not (isinstance(pair, Sequence) and len(pair) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)):
            raise TypeError(f"expected heads as (layer, head) pairs of ints, got {pair!r}")
        layer, head = pair
        if not (0 <= layer < layers and 0 <= head < per_layer):
            raise ValueError(f"expected (layer, head) with layer in [0, {layers - 1}] and head in "
                             f"[0, {per_layer - 1}], got {tuple(pair)}")
        pairs.append((layer, head))
    return pairs


def _targets(model, heads, rows) -> dict[int, list[tuple[int | None, list[int]]]]:
    """layer -> [(batch row or None for every row, the head's columns of concat(heads)), ...]."""
    heads = _head_pairs(model, heads)
    if rows is not None:
        rows = list(rows)
        if len(rows) != len(heads) or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in rows):
            raise ValueError(f"expected rows as {len(heads)} batch indices >= 0 (one per head), got {rows!r}")
    d_k = model.config.hidden_size // model.config.num_attention_heads
    per_layer: dict[int, list[tuple[int | None, list[int]]]] = {}
    for i, (layer, head) in enumerate(heads):
        columns = list(range(head * d_k, (head + 1) * d_k))
        per_layer.setdefault(layer, []).append((None if rows is None else rows[i], columns))
    return per_layer


def _zeroing_hook(targets):
    """A forward pre-hook that zeroes the given columns of W_O's input (B, L, H*Dk), in all or one row."""
    def hook(_module, inputs):
        context = inputs[0].clone()
        for row, columns in targets:
            if row is None:
                context[..., columns] = 0
            else:
                context[row, ..., columns] = 0
        return (context, *inputs[1:])
    return hook


@contextlib.contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]], rows: Sequence[int] | None = None):
    """Inside this block, the given (layer, head) pairs of a ``transformers`` BERT output zero.

    The head's slice of ``concat(heads)`` is set to 0 before the output projection ``W_O`` (a forward
    pre-hook on ``attention.output.dense``), so the head adds nothing to the residual stream; W_O's
    bias stays. With ``rows`` (one batch index per head), head i is removed only in batch row
    ``rows[i]``: one forward pass of a batch of copies measures many single-head ablations at once.
    The hooks are removed when the block ends, also on an error.
    """
    from attnlib.models import _check_model  # noqa: PLC0415 (transformers only where a model is ablated)

    _check_model(model)
    per_layer = _targets(model, list(heads), rows)
    handles = []
    try:
        for layer, targets in per_layer.items():
            dense = model.encoder.layer[layer].attention.output.dense
            handles.append(dense.register_forward_pre_hook(_zeroing_hook(targets)))
        yield model
    finally:
        for handle in handles:
            handle.remove()
