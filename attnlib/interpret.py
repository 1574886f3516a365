"""Reading attention more carefully than its weights: value-weighted norms, rollout, ablation, circuits.

A weight ``A[i, j]`` says how much of token j's value a head mixes into token i. The measurements here
go further than the raw map, each from the literature:

* ``value_weighted_norms``: ``‖A[i, j] f(x_j)‖``, the size of what token j actually adds to token i
  (Kobayashi et al. 2020): a large weight on a tiny value adds almost nothing;
* ``attention_rollout``: how attention composes through the layers (Abnar & Zuidema 2020): every
  layer's head-averaged weights, with the residual connection added as ``(A + I) / 2``, multiplied;
* ``ablate_heads`` and ``mean_ablate_heads``: a causal test: replace a head's output by zero or by its
  mean over a reference batch and measure what changes downstream; ``ablation_loss`` does it for the
  induction task of ``attnlib.induction``;
* ``patch_heads``: activation patching: a head outputs, at chosen positions, what it output on another
  input (recorded by ``head_outputs``), and the rest of the run is left alone;
* ``ov_circuit``, ``copying_score``, ``top1_copying``, ``composition_score`` and ``k_composition_circuit``:
  the circuits of an attention-only transformer read from its weights alone (Elhage et al. 2021).

The ablations take a ``transformers`` BERT or an ``AttentionOnlyTransformer``; the circuits the latter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence

import torch

from attnlib._checks import require_tensor
from attnlib.induction import AttentionOnlyTransformer, repeat_loss
from attnlib.multihead import split_heads


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


def _head_sites(model) -> tuple[list[torch.nn.Module], int]:
    """The modules whose input is concat(heads) (B, L, H*Dk), one per layer, and H, for a BERT or an attnlib model."""
    if isinstance(model, AttentionOnlyTransformer):
        return [layer.out_proj for layer in model.layers], model.layers[0].num_heads
    from attnlib.models import _check_model  # noqa: PLC0415 (transformers only where a BERT is ablated)

    try:
        _check_model(model)
    except TypeError:
        raise TypeError(f"expected a transformers BertModel or an attnlib AttentionOnlyTransformer, "
                        f"got {type(model).__qualname__}") from None
    return [layer.attention.output.dense for layer in model.encoder.layer], model.config.num_attention_heads


def _head_pairs(model, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The (layer, head) pairs, checked against the model's layers and heads."""
    sites, per_layer = _head_sites(model)
    layers = len(sites)
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


def _head_width(model) -> int:
    sites, per_layer = _head_sites(model)
    return sites[0].in_features // per_layer


def _targets(model, heads, rows, value) -> dict[int, list[tuple]]:
    """layer -> [(batch row or None for every row, the head's columns of concat(heads), replacement), ...].

    ``value(layer, head)`` is the head's replacement: None (zero), a mean ``(L_ref, Dk)`` or ``(Dk,)``, or a
    recorded output ``(B or 1, L, Dk)`` (``_Recorded``). ``rows``: one batch row per head, or None.
    """
    heads = _head_pairs(model, heads)
    if rows is not None:
        rows = list(rows)
        if len(rows) != len(heads) or any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in rows):
            raise ValueError(f"expected rows as one batch row (an int >= 0) per head, {len(heads)} of them, "
                             f"got {rows!r}")
    d_k = _head_width(model)
    per_layer: dict[int, list[tuple]] = {}
    for i, (layer, head) in enumerate(heads):
        columns = slice(head * d_k, (head + 1) * d_k)
        per_layer.setdefault(layer, []).append((None if rows is None else rows[i], columns, value(layer, head)))
    return per_layer


class _Recorded:
    """A head's output recorded in another run, (B or 1, L, Dk), to be patched in."""

    def __init__(self, output: torch.Tensor):
        self.output = output

    def fitted(self, context: torch.Tensor, row: int | None, positions) -> torch.Tensor:
        """The recorded values for ``context`` (B, L, H*Dk) at ``positions``, in batch ``row`` (None: all)."""
        batch, length = self.output.shape[:2]
        if length != context.shape[1] or batch not in (1, context.shape[0]):
            raise ValueError(f"expected an input of {(batch, length)} (batch, positions) like the recorded run "
                             f"(or of its positions, when that run was one row), got {tuple(context.shape[:2])}")
        if row is None:
            return self.output[:, positions]
        return self.output[0 if batch == 1 else row, positions]


def _fitted(value, context: torch.Tensor, row: int | None, positions):
    """What replaces a head in ``context`` (B, L, H*Dk): 0, its mean (L_ref, Dk) cut to L or (Dk,), or a
    recorded output at ``positions``."""
    if value is None:
        return 0
    if isinstance(value, _Recorded):
        return value.fitted(context, row, positions).to(context.dtype)
    length = context.shape[-2]
    if value.ndim == 2 and value.shape[0] < length:
        raise ValueError(f"expected inputs of at most {value.shape[0]} positions, the length of the reference "
                         f"batch of the per-position means, got {length}")
    return (value if value.ndim == 1 else value[:length]).to(context.dtype)


def _replacing_hook(targets, positions=slice(None)):
    """A forward pre-hook that sets a head's columns of W_O's input (B, L, H*Dk), at ``positions``, to zero, to
    its mean or to what it output in another run."""
    def hook(_module, inputs):
        context = inputs[0].clone()
        for row, columns, value in targets:
            if row is not None and row >= context.shape[0]:
                raise ValueError(f"expected a batch of more than {row} rows (a head is replaced in row {row}), "
                                 f"got {context.shape[0]}")
            context[slice(None) if row is None else row, positions, columns] = _fitted(value, context, row, positions)
        return (context, *inputs[1:])
    return hook


@contextlib.contextmanager
def _hooked(model, per_layer, positions=slice(None)):
    sites, _ = _head_sites(model)
    handles = []
    try:
        for layer, targets in per_layer.items():
            handles.append(sites[layer].register_forward_pre_hook(_replacing_hook(targets, positions)))
        yield model
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def ablate_heads(model, heads: Iterable[tuple[int, int]], rows: Sequence[int] | None = None) -> Iterator:
    """Inside this block, the given (layer, head) pairs output zero (zero-ablation).

    ``model``: a ``transformers`` BERT or an attnlib ``AttentionOnlyTransformer``. The head's slice of
    ``concat(heads)`` is set to 0 before the output projection ``W_O`` (a forward pre-hook), so the head
    adds nothing to the residual stream; W_O's bias stays. With ``rows`` (one batch index per head), head i
    is removed only in batch row ``rows[i]``: one forward pass of a batch of copies measures many
    single-head ablations at once. The hooks are removed when the block ends, also on an error.
    """
    with _hooked(model, _targets(model, list(heads), rows, lambda layer, head: None)):
        yield model


def _forward(model, tokens: torch.Tensor):
    """Run a BERT (``input_ids``) or an attnlib model (``tokens``) without gradients."""
    with torch.no_grad():
        return model(tokens) if isinstance(model, AttentionOnlyTransformer) else model(input_ids=tokens)


def head_outputs(model, tokens: torch.Tensor) -> torch.Tensor:
    """Every head's output before W_O, ``softmax(q kᵀ/√Dk) v``: tokens (B, L) -> (layers, B, H, L, Dk)."""
    sites, heads = _head_sites(model)
    require_tensor("tokens", tokens)
    recorded = [None] * len(sites)

    def recorder(layer):
        def hook(_module, inputs):
            recorded[layer] = inputs[0].detach().clone()  # (B, L, H*Dk)
        return hook

    handles = [site.register_forward_pre_hook(recorder(i)) for i, site in enumerate(sites)]
    try:
        _forward(model, tokens)
    finally:
        for handle in handles:
            handle.remove()
    return torch.stack([split_heads(r, heads) for r in recorded])  # (layers, B, L, H*Dk) -> (layers, B, H, L, Dk)


def head_means(model, reference: torch.Tensor, per_position: bool = True) -> torch.Tensor:
    """Each head's mean output over reference tokens (B, L): (layers, H, L, Dk); over positions too: (layers, H, Dk)."""
    outputs = head_outputs(model, reference)  # (layers, B, H, L, Dk)
    return outputs.mean(dim=1) if per_position else outputs.mean(dim=(1, 3))


@contextlib.contextmanager
def mean_ablate_heads(model, heads: Iterable[tuple[int, int]], reference: torch.Tensor,
                      per_position: bool = True, rows: Sequence[int] | None = None) -> Iterator:
    """Inside this block, the given heads output their mean over ``reference`` token ids (B, L).

    Zero-ablation moves the residual stream somewhere it never is; mean-ablation removes only what the head
    says about *this* input and keeps what it says on average. With ``per_position`` the mean is taken at
    each position (inputs may then have at most L positions, position i gets the mean at i), else over
    positions too. ``rows`` as in ``ablate_heads``.
    """
    means = head_means(model, reference, per_position)
    with _hooked(model, _targets(model, list(heads), rows, lambda layer, head: means[layer, head])):
        yield model


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
    require_tensor("source", source)
    sites, per_layer = _head_sites(model)
    d_k = _head_width(model)
    if source.ndim != 5 or source.shape[0] != len(sites) or source.shape[2] != per_layer or source.shape[4] != d_k:
        raise ValueError(f"expected source from head_outputs, shaped (layers, B, H, L, Dk) = ({len(sites)}, B, "
                         f"{per_layer}, L, {d_k}), got {tuple(source.shape)}")
    length = source.shape[3]
    where = list(range(length)) if positions is None else list(positions)
    if any(isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < length for p in where):
        raise ValueError(f"expected positions as ints in [0, {length - 1}], got {positions!r}")
    targets = _targets(model, list(heads), rows, lambda layer, head: _Recorded(source[layer, :, head]))
    with _hooked(model, targets, where):
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


# --- circuits of an attention-only transformer (Elhage et al. 2021) ---------------------------------------
# Row-vector convention, as attnlib computes: a head's score is x_q W_Q W_Kᵀ x_kᵀ and its output x W_V W_O,
# so W_QK = W_Q W_Kᵀ (D, D) and W_OV = W_V W_O (D, D). Elhage et al. write column vectors: their W_QK is this
# one, their W_OV this one transposed; each composed matrix below is theirs transposed, its Frobenius norm the same.


def _head_weights(model: AttentionOnlyTransformer, layer: int, head: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K, W_V (D, Dk) and W_O (Dk, D) of one head, detached; grouped heads read their shared K/V head."""
    if not isinstance(model, AttentionOnlyTransformer):
        raise TypeError(f"expected an attnlib AttentionOnlyTransformer, got {type(model).__qualname__}")
    _head_pairs(model, [(layer, head)])
    attn = model.layers[layer]
    d_k = attn.embed_dim // attn.num_heads
    group = head // (attn.num_heads // attn.num_kv_heads)  # the key/value head this query head reads
    rows, kv_rows = slice(head * d_k, (head + 1) * d_k), slice(group * d_k, (group + 1) * d_k)
    w_q, w_k, w_v = (p.weight.detach()[r].T for p, r in ((attn.q_proj, rows), (attn.k_proj, kv_rows),
                                                          (attn.v_proj, kv_rows)))  # nn.Linear keeps (out, in)
    return w_q, w_k, w_v, attn.out_proj.weight.detach()[:, rows].T


def qk_matrix(model: AttentionOnlyTransformer, layer: int, head: int) -> torch.Tensor:
    """W_QK = W_Q W_Kᵀ (D, D): the head's score between residual vectors is x_q W_QK x_kᵀ / √Dk."""
    w_q, w_k, _, _ = _head_weights(model, layer, head)
    return w_q @ w_k.T  # (D, Dk) @ (Dk, D) -> (D, D)


def ov_matrix(model: AttentionOnlyTransformer, layer: int, head: int) -> torch.Tensor:
    """W_OV = W_V W_O (D, D): what the head writes to the residual stream for each unit of weight on x."""
    _, _, w_v, w_o = _head_weights(model, layer, head)
    return w_v @ w_o  # (D, Dk) @ (Dk, D) -> (D, D)


def ov_circuit(model: AttentionOnlyTransformer, layer: int, head: int) -> torch.Tensor:
    """W_E W_V W_O W_U: (vocab, D) (D, Dk) (Dk, D) (D, vocab) -> (vocab, vocab).

    Entry [a, b]: how much the head raises the logit of token b when all its weight is on token a's embedding.
    """
    w_e, w_u = model.embed.weight.detach(), model.unembed.weight.detach().T  # (vocab, D), (D, vocab)
    return w_e @ ov_matrix(model, layer, head) @ w_u  # (vocab, D) @ (D, D) @ (D, vocab) -> (vocab, vocab)


def _require_square(name: str, matrix) -> None:
    require_tensor(name, matrix)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"expected {name} of shape (N, N), got {tuple(matrix.shape)}")


def copying_score(circuit: torch.Tensor) -> float:
    """Elhage et al.'s eigenvalue summary of an OV circuit (N, N): ``Σ λ_i / Σ |λ_i|``, in [-1, 1].

    1 when every eigenvalue is positive (the identity: each token raises its own logit), -1 when every one
    is negative, 0 for a cyclic permutation (each token raises another's). ``Σ λ_i`` is the trace, so real.
    """
    _require_square("circuit", circuit)
    eigenvalues = torch.linalg.eigvals(circuit.to(torch.float64))  # complex: the circuit is not symmetric
    total = float(eigenvalues.abs().sum())
    if total == 0:
        raise ValueError("expected a circuit with a non-zero eigenvalue, got one whose eigenvalues are all 0")
    return float(eigenvalues.sum().real) / total


def top1_copying(circuit: torch.Tensor) -> float:
    """Fraction of tokens a whose own logit is the one that attending to a raises most: circuit (N, N)."""
    _require_square("circuit", circuit)
    own = torch.arange(circuit.shape[0], device=circuit.device)
    return float((circuit.argmax(dim=-1) == own).float().mean())


def _composed(kind: str, w_qk: torch.Tensor, w_ov_later: torch.Tensor, w_ov: torch.Tensor):
    """The (D, D) bilinear map through which the later head reads W_OV of the earlier one, and its other factor."""
    if kind == "k":  # keys read the earlier head's output: x_q W_QK (x W_OV)ᵀ
        return w_qk @ w_ov.T, w_qk
    if kind == "q":  # queries read it: (x W_OV) W_QK x_kᵀ
        return w_ov @ w_qk, w_qk
    if kind == "v":  # values read it: x W_OV W_OV'
        return w_ov @ w_ov_later, w_ov_later
    raise ValueError(f"expected kind 'q', 'k' or 'v', got {kind!r}")


def composition_score(model: AttentionOnlyTransformer, earlier: tuple[int, int], later: tuple[int, int],
                      kind: str = "k") -> float:
    """``‖M W_OV‖_F / (‖M‖_F ‖W_OV‖_F)`` (Elhage et al. 2021): how much the later head reads the earlier one.

    ``earlier``, ``later``: (layer, head) with the earlier in a lower layer. ``M`` is the later head's W_QK
    for K- and Q-composition (its keys or queries read the earlier head's output), its W_OV for
    V-composition. In [0, 1]: 0 when the later head reads only directions the earlier one never writes.
    """
    (layer1, head1), (layer2, head2) = _head_pairs(model, [earlier, later])
    if layer1 >= layer2:
        raise ValueError(f"expected the earlier head in a lower layer than the later one, got {earlier} and {later}")
    w_ov = ov_matrix(model, layer1, head1)
    composed, other = _composed(kind, qk_matrix(model, layer2, head2), ov_matrix(model, layer2, head2), w_ov)
    norm = torch.linalg.matrix_norm  # Frobenius
    return float(norm(composed) / (norm(other) * norm(w_ov)))


def k_composition_circuit(model: AttentionOnlyTransformer, earlier: tuple[int, int],
                          later: tuple[int, int]) -> torch.Tensor:
    """The later head's attention score through the earlier head's output, token by token: (N, N) for a
    vocabulary of N tokens.

    Entry [a, b] = ``e_a W_Q (e_b W_V' W_O' W_K)ᵀ / √Dk`` (primes: the earlier head): the score a query whose
    stream holds token a's embedding gives a key whose stream holds what the earlier head writes when all its
    weight is on token b's embedding. For an earlier previous-token head, b is the key's previous token, and a
    K-composing induction head has its largest entries where b = a. Left out: the position embeddings, the
    keys' and queries' own tokens, and every other head's output (the score's other terms).
    """
    (layer1, head1), (layer2, head2) = _head_pairs(model, [earlier, later])
    if layer1 >= layer2:
        raise ValueError(f"expected the earlier head in a lower layer than the later one, got {earlier} and {later}")
    w_e = model.embed.weight.detach()  # (N, D): one row per token of the vocabulary
    w_q, w_k, _, _ = _head_weights(model, layer2, head2)
    queries = w_e @ w_q  # (N, D) @ (D, Dk) -> (N, Dk)
    keys = w_e @ ov_matrix(model, layer1, head1) @ w_k  # (N, D) @ (D, D) @ (D, Dk) -> (N, Dk)
    return queries @ keys.T / w_q.shape[1] ** 0.5  # (N, Dk) @ (Dk, N) -> (N, N)
