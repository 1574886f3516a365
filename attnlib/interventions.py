"""Intervening on a running model: record each head's output, ablate heads, patch in another run's outputs.

Every intervention acts at one site per layer, the input of the output projection W_O, ``concat(heads)``
(B, L, H*Dk): head h owns its columns ``h*Dk .. (h+1)*Dk``. A forward pre-hook there replaces those columns by
what a *replacement* says, one small function of the hooked input (B, L, H*Dk), the batch row (None: every
row) and the positions it replaces:

* ``zero``: zero-ablation (``ablate_heads``), the head adds nothing;
* ``mean_of(mean)``: mean-ablation (``mean_ablate_heads``), its mean output over a reference batch;
* ``recorded(output)``: activation patching (``patch_heads``), what it output in another run (``head_outputs``).

``ablation_loss`` measures the induction task of ``attnlib.induction`` with heads ablated. Each public function
finds the model's sites once (``head_sites``) and hands them on. The functions take a ``transformers`` BERT or
an ``AttentionOnlyTransformer``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from attnlib._checks import require_tensor
from attnlib.induction import AttentionOnlyTransformer, repeat_loss
from attnlib.multihead import split_heads

#: What replaces a head's columns: (context (B, L, H*Dk), batch row or None, positions) -> a tensor, or 0.
Replacement = Callable[[torch.Tensor, int | None, object], torch.Tensor | float]


@dataclass(frozen=True)
class HeadSites:
    """Where a model's heads meet W_O: one module per layer whose input is concat(heads) (B, L, H*Dk)."""

    modules: list
    heads: int  # H per layer
    width: int  # Dk per head

    def columns(self, head: int) -> slice:
        """Head ``head``'s columns of concat(heads)."""
        return slice(head * self.width, (head + 1) * self.width)


def head_sites(model) -> HeadSites:
    """The W_O inputs of a BERT or an attnlib ``AttentionOnlyTransformer``, with its heads H and width Dk."""
    if isinstance(model, AttentionOnlyTransformer):
        modules, heads = [layer.out_proj for layer in model.layers], model.layers[0].num_heads
    else:
        from attnlib.models import _check_model  # noqa: PLC0415 (transformers only where a BERT is hooked)

        try:
            _check_model(model)
        except TypeError:
            raise TypeError(f"expected a transformers BertModel or an attnlib AttentionOnlyTransformer, "
                            f"got {type(model).__qualname__}") from None
        modules = [layer.attention.output.dense for layer in model.encoder.layer]
        heads = model.config.num_attention_heads
    return HeadSites(modules, heads, modules[0].in_features // heads)


def check_head_pairs(heads: Iterable, layers: int, per_layer: int) -> list[tuple[int, int]]:
    """``heads`` as a list of (layer, head) pairs of ints within ``layers`` layers of ``per_layer`` heads."""
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


def check_rows(rows, count: int) -> list:
    """One batch row (an int >= 0) per head, ``count`` of them; None: every row for every head."""
    if rows is None:
        return [None] * count
    rows = list(rows)
    if len(rows) != count or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in rows):
        raise ValueError(f"expected rows as one batch row (an int >= 0) per head, {count} of them, got {rows!r}")
    return rows


# --- the replacements -------------------------------------------------------------------------------------

def zero(context: torch.Tensor, row: int | None, positions) -> float:
    """Zero-ablation: the head's columns of context (B, L, H*Dk) become 0."""
    return 0.0


def mean_of(mean: torch.Tensor) -> Replacement:
    """Mean-ablation: the head outputs ``mean``, (L_ref, Dk) per position (cut to the input's L) or (Dk,)."""
    def replace(context: torch.Tensor, row: int | None, positions) -> torch.Tensor:
        length = context.shape[1]
        if mean.ndim == 1:
            return mean.to(context.dtype)
        if mean.shape[0] < length:
            raise ValueError(f"expected inputs of at most {mean.shape[0]} positions, the length of the reference "
                             f"batch of the per-position means, got {length}")
        return mean[:length][positions].to(context.dtype)  # (L, Dk) at the positions
    return replace


def recorded(output: torch.Tensor) -> Replacement:
    """Patching: the head outputs what it output in another run, ``output`` (B or 1, L, Dk), at the positions."""
    def replace(context: torch.Tensor, row: int | None, positions) -> torch.Tensor:
        batch, length = output.shape[:2]
        if length != context.shape[1] or batch not in (1, context.shape[0]):
            raise ValueError(f"expected an input of {(batch, length)} (batch, positions) like the recorded run "
                             f"(or of its positions, when that run was one row), got {tuple(context.shape[:2])}")
        picked = output[:, positions] if row is None else output[0 if batch == 1 else row, positions]
        return picked.to(context.dtype)
    return replace


# --- the hook ---------------------------------------------------------------------------------------------

def _replacing_hook(targets: list[tuple], positions) -> Callable:
    """A forward pre-hook on W_O: each (row, columns, replace) of ``targets`` sets its columns of the input
    (B, L, H*Dk), at ``positions``, in batch ``row`` (None: all), to what ``replace`` gives."""
    def hook(_module, inputs):
        context = inputs[0].clone()  # (B, L, H*Dk)
        for row, columns, replace in targets:
            if row is not None and row >= context.shape[0]:
                raise ValueError(f"expected a batch of more than {row} rows (a head is replaced in row {row}), "
                                 f"got {context.shape[0]}")
            context[slice(None) if row is None else row, positions, columns] = replace(context, row, positions)
        return (context, *inputs[1:])
    return hook


@contextlib.contextmanager
def _replacing(sites: HeadSites, heads: Iterable, rows, replacement: Callable[[int, int], Replacement],
               positions=slice(None)) -> Iterator:
    """Inside the block, each (layer, head) of ``heads`` outputs ``replacement(layer, head)`` at ``positions``
    (in batch ``rows[i]`` when given); the hooks are removed when the block ends, also on an error."""
    pairs = check_head_pairs(heads, len(sites.modules), sites.heads)
    per_layer: dict[int, list[tuple]] = {}
    for (layer, head), row in zip(pairs, check_rows(rows, len(pairs)), strict=True):
        per_layer.setdefault(layer, []).append((row, sites.columns(head), replacement(layer, head)))
    handles = []
    try:
        for layer, targets in per_layer.items():
            handles.append(sites.modules[layer].register_forward_pre_hook(_replacing_hook(targets, positions)))
        yield
    finally:
        for handle in handles:
            handle.remove()


# --- the interventions --------------------------------------------------------------------------------------

@contextlib.contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]], rows: Sequence[int] | None = None) -> Iterator:
    """Inside this block, the given (layer, head) pairs output zero (zero-ablation).

    ``model``: a ``transformers`` BERT or an attnlib ``AttentionOnlyTransformer``. The head's slice of
    ``concat(heads)`` is set to 0 before the output projection ``W_O`` (a forward pre-hook), so the head
    adds nothing to the residual stream; W_O's bias stays. With ``rows`` (one batch index per head), head i
    is removed only in batch row ``rows[i]``: one forward pass of a batch of copies measures many
    single-head ablations at once. The hooks are removed when the block ends, also on an error.
    """
    with _replacing(head_sites(model), heads, rows, lambda layer, head: zero):
        yield model


def _forward(model, tokens: torch.Tensor):
    """Run a BERT (``input_ids``) or an attnlib model (``tokens``) without gradients."""
    with torch.no_grad():
        return model(tokens) if isinstance(model, AttentionOnlyTransformer) else model(input_ids=tokens)


def _head_outputs(model, sites: HeadSites, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's output at ``sites`` for tokens (B, L): (layers, B, H, L, Dk)."""
    require_tensor("tokens", tokens)
    inputs = [None] * len(sites.modules)

    def recorder(layer):
        def hook(_module, hooked):
            inputs[layer] = hooked[0].detach().clone()  # (B, L, H*Dk)
        return hook

    handles = [site.register_forward_pre_hook(recorder(i)) for i, site in enumerate(sites.modules)]
    try:
        _forward(model, tokens)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack([split_heads(x, sites.heads) for x in inputs])  # (layers, B, L, H*Dk) -> (layers, B, H, L, Dk)


def head_outputs(model, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's output before W_O, ``softmax(q kᵀ/√Dk) v``: tokens (B, L) -> (layers, B, H, L, Dk)."""
    return _head_outputs(model, head_sites(model), tokens)


def _means(outputs: torch.Tensor, per_position: bool) -> torch.Tensor:
    """Head outputs (layers, B, H, L, Dk) averaged over B: (layers, H, L, Dk); over positions too: (layers, H, Dk)."""
    return outputs.mean(dim=1) if per_position else outputs.mean(dim=(1, 3))


def head_means(model, reference: torch.Tensor, per_position: bool = True) -> torch.Tensor:
    """Each head's mean output over reference tokens (B, L): (layers, H, L, Dk); over positions too: (layers, H, Dk)."""
    return _means(head_outputs(model, reference), per_position)


@contextlib.contextmanager
def mean_ablate_heads(model, heads: Iterable[tuple[int, int]], reference: torch.Tensor,
                      per_position: bool = True, rows: Sequence[int] | None = None) -> Iterator:
    """Inside this block, the given heads output their mean over ``reference`` token ids (B, L).

    Zero-ablation moves the residual stream somewhere it never is; mean-ablation removes only what the head
    says about *this* input and keeps what it says on average. With ``per_position`` the mean is taken at
    each position (inputs may then have at most L positions, position i gets the mean at i), else over
    positions too. ``rows`` as in ``ablate_heads``.
    """
    sites = head_sites(model)
    means = _means(_head_outputs(model, sites, reference), per_position)  # (layers, H, L, Dk) or (layers, H, Dk)
    with _replacing(sites, heads, rows, lambda layer, head: mean_of(means[layer, head])):
        yield model


def _check_source(source: torch.Tensor, sites: HeadSites, positions) -> list[int]:
    """``source`` from head_outputs (layers, B, H, L, Dk) for ``sites``; returns the positions (None: all L)."""
    require_tensor("source", source)
    layers = len(sites.modules)
    if source.ndim != 5 or source.shape[0] != layers or source.shape[2] != sites.heads \
            or source.shape[4] != sites.width:
        raise ValueError(f"expected source from head_outputs, shaped (layers, B, H, L, Dk) = ({layers}, B, "
                         f"{sites.heads}, L, {sites.width}), got {tuple(source.shape)}")
    length = source.shape[3]
    where = list(range(length)) if positions is None else list(positions)
    if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < length for p in where):
        raise ValueError(f"expected positions as ints in [0, {length - 1}], got {positions!r}")
    return where


@contextlib.contextmanager
def patch_heads(model, heads: Iterable[tuple[int, int]], source: torch.Tensor,
                positions: Sequence[int] | None = None, rows: Sequence[int] | None = None) -> Iterator:
    """Inside this block, the given heads output, at ``positions``, what they output in another run.

    Activation patching (Meng et al. 2022; Wang et al. 2023): ``source`` is ``head_outputs(model, other)``,
    (layers, B, H, L, Dk); the model must then be run on inputs of the same L and the same B, or of any B when
    the recorded run was one row (it is then patched into every row). Head h's slice of ``concat(heads)`` at the
    given positions (all when None) is replaced by ``source``'s before ``W_O``; every other head and position keeps
    what this run computes, so later layers see the patched output. ``rows`` as in ``ablate_heads``: head i is
    patched only in batch row ``rows[i]`` (many heads tried in one batch). The hooks are removed when the block
    ends. Works on a ``transformers`` BERT and an ``AttentionOnlyTransformer`` alike.
    """
    sites = head_sites(model)
    where = _check_source(source, sites, positions)
    with _replacing(sites, heads, rows, lambda layer, head: recorded(source[layer, :, head]), where):
        yield model


def ablation_loss(model, tokens: torch.Tensor, half: int, heads: Iterable[tuple[int, int]] = (),
                  reference: torch.Tensor | None = None) -> float:
    """``repeat_loss`` of an ``AttentionOnlyTransformer`` on repeated tokens (B, 2*half) with ``heads`` ablated.

    The mean cross-entropy of predicting the repeat's copies (see ``attnlib.induction.repeat_loss``), with the
    heads set to zero, or to their per-position mean over ``reference`` (B_ref, >= 2*half - 1) when given.
    """
    if not isinstance(model, AttentionOnlyTransformer):
        raise TypeError(f"expected an attnlib AttentionOnlyTransformer, got {type(model).__qualname__}")
    require_tensor("tokens", tokens)
    if tokens.ndim != 2 or tokens.shape[1] != 2 * half:
        raise ValueError(f"expected repeated tokens of shape (B, 2 * half) = (B, {2 * half}), "
                         f"got {tuple(tokens.shape)}")
    heads = list(heads)
    block = ablate_heads(model, heads) if reference is None else mean_ablate_heads(model, heads, reference)
    with block:
        logits, _ = _forward(model, tokens[:, :-1])
    return repeat_loss(logits, tokens, half).item()
