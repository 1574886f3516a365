"""Reading attention more carefully than its weights: value-weighted norms and rollout.

A weight ``A[i, j]`` says how much of token j's value a head mixes into token i. The measurements here
go further than the raw map, each from the literature:

* ``value_weighted_norms``: ``‖A[i, j] f(x_j)‖``, the size of what token j actually adds to token i
  (Kobayashi et al. 2020): a large weight on a tiny value adds almost nothing;
* ``attention_rollout``: how attention composes through the layers (Abnar & Zuidema 2020): every
  layer's head-averaged weights, with the residual connection added as ``(A + I) / 2``, multiplied.

Two neighbours go further still, and their names are importable from here too, as the chapters import them:
``attnlib.interventions`` changes a running model (``ablate_heads``, ``mean_ablate_heads``, ``patch_heads``
with ``head_outputs``, ``ablation_loss``: a causal test of what a head does), and ``attnlib.circuits`` reads an
attention-only transformer's weights alone (``ov_circuit``, ``copying_score``, ``composition_score``,
``k_composition_circuit``, ...; Elhage et al. 2021).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlib._checks import require_tensor
from attnlib.circuits import (
    composition_score,
    copying_score,
    k_composition_circuit,
    ov_circuit,
    ov_matrix,
    qk_matrix,
    top1_copying,
)
from attnlib.interventions import (
    ablate_heads,
    ablation_loss,
    head_means,
    head_outputs,
    mean_ablate_heads,
    patch_heads,
)

__all__ = [
    "ablate_heads",
    "ablation_loss",
    "attention_rollout",
    "composition_score",
    "copying_score",
    "head_means",
    "head_outputs",
    "k_composition_circuit",
    "mean_ablate_heads",
    "ov_circuit",
    "ov_matrix",
    "patch_heads",
    "qk_matrix",
    "top1_copying",
    "value_weighted_norms",
]


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
