"""A tiny attention-only causal transformer, the repeated-tokens task, and the scores that find induction heads.

An **induction head** completes ``[A][B] ... [A] -> [B]``: at a repeated token it attends to the position
*one past* that token's earlier occurrence and copies what it finds (Elhage et al. 2021; Olsson et al.
2022). It needs two layers: a layer-1 head that attends to the previous token writes "my previous
token was A" into each position, and a layer-2 head then looks for the position whose previous token is
the current one. ``train_induction`` grows one on sequences whose second half repeats the first.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib._checks import require_positive_int, require_rank, require_tensor
from attnlib.causal import KVCache, cached_attention, sliding_window_mask
from attnlib.multihead import MultiHeadAttention, merge_heads, split_heads


class AttentionOnlyTransformer(nn.Module):
    """Token and position embeddings, ``num_layers`` causal ``MultiHeadAttention`` layers added to the
    residual stream, and an unembedding to next-token logits. No MLPs, no layer norm.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, num_layers: int = 2,
                 max_length: int = 64, num_kv_heads: int | None = None):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("max_length", max_length), ("num_layers", num_layers)):
            require_positive_int(name, value)
        self.max_length = max_length
        self.embed = nn.Embedding(vocab_size, d_model)
        self.position = nn.Embedding(max_length, d_model)
        self.layers = nn.ModuleList(MultiHeadAttention(d_model, num_heads, bias=False, num_kv_heads=num_kv_heads)
                                    for _ in range(num_layers))
        self.unembed = nn.Linear(d_model, vocab_size, bias=False)

    def new_cache(self, batch_size: int = 1, max_length: int | None = None) -> KVCache:
        """An empty KVCache shaped for this model (its dtype and device)."""
        first = self.layers[0]
        return KVCache(len(self.layers), batch_size, first.num_kv_heads, max_length or self.max_length,
                       first.embed_dim // first.num_heads, dtype=first.q_proj.weight.dtype,
                       device=first.q_proj.weight.device)

    def forward(self, tokens: torch.Tensor, cache: KVCache | None = None, need_weights: bool = False,
                window: int | None = None, sinks: int = 0) -> tuple[torch.Tensor, list[torch.Tensor | None] | None]:
        """tokens (B, L) -> (logits (B, L, vocab), per-layer weights (B, H, L, Lk) or None).

        Without ``cache`` every position attends causally to the ones before it. With a cache, ``tokens``
        are the next positions after those cached; their keys and values are appended to it. ``window``:
        each position sees only itself and the ``window - 1`` positions before it (sliding window), and with
        ``sinks`` also the first ``sinks`` positions (attention sinks, as StreamingLLM keeps them).
        """
        require_tensor("tokens", tokens)
        require_rank("tokens", tokens, 2, "(B, L)", max_rank=2)
        start = 0 if cache is None else len(cache)
        if start + tokens.shape[1] > self.max_length:
            raise ValueError(f"expected at most max_length={self.max_length} positions, got "
                             f"{start} cached + {tokens.shape[1]} new")
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.position(positions)  # (B, L, D): the residual stream
        weights = []
        for index, layer in enumerate(self.layers):
            if cache is None:
                mask = None if window is None else sliding_window_mask(x.shape[1], x.shape[1], window, x.device,
                                                                       sinks=sinks)
                out, w = layer(x, attn_mask=mask, is_causal=window is None, need_weights=need_weights)
            else:
                out, w = _cached_layer(layer, x, cache, index, need_weights, window, sinks)
            x = x + out  # each layer adds its output to the stream
            weights.append(w)
        return self.unembed(x), (weights if need_weights else None)


def _cached_layer(layer: MultiHeadAttention, x: torch.Tensor, cache: KVCache, index: int, need_weights: bool,
                  window: int | None = None, sinks: int = 0):
    """One MultiHeadAttention layer on new positions x (B, Lnew, D), the past read from the cache."""
    q = split_heads.unchecked(layer.q_proj(x), num_heads=layer.num_heads)  # (B, H, Lnew, Dk)
    k = split_heads.unchecked(layer.k_proj(x), num_heads=layer.num_kv_heads)  # (B, Hkv, Lnew, Dk)
    v = split_heads.unchecked(layer.v_proj(x), num_heads=layer.num_kv_heads)  # (B, Hkv, Lnew, Dk)
    heads, w = cached_attention(cache, index, q, k, v, window=window, sinks=sinks, need_weights=need_weights)
    return layer.out_proj(merge_heads.unchecked(heads)), w


def repeated_tokens(batch_size: int, half: int, vocab_size: int, generator: torch.Generator | None = None,
                    device=None) -> torch.Tensor:
    """(B, 2 * half) integer tokens: ``half`` *distinct* random tokens, then the same ``half`` again.

    The first half is drawn without replacement (the first ``half`` entries of a random permutation of the
    vocabulary), so every token of the repeat has exactly one earlier occurrence: the next token is then
    determined by induction, and inside the first half no token has an earlier copy.
    """
    for name, value in (("batch_size", batch_size), ("half", half), ("vocab_size", vocab_size)):
        require_positive_int(name, value)
    if half > vocab_size:
        raise ValueError(f"expected half <= vocab_size (the first half holds distinct tokens), got half={half} "
                         f"and vocab_size={vocab_size}")
    first = torch.rand(batch_size, vocab_size, generator=generator).argsort(dim=1)[:, :half]  # distinct per row
    return torch.cat([first, first], dim=1).to(device)


def control_tokens(tokens: torch.Tensor, vocab_size: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """The control for repeated tokens: (B, 2 * half) -> (B, 2 * half), the same first half, then ``half``
    distinct tokens none of which occurs in it (drawn at random), so no token of the second half has an
    earlier copy. A head's weight on the "induction target" of such a sequence is placed there by position
    (and by tokens that match nothing), not by a match: its **positional floor**.
    """
    require_tensor("tokens", tokens)
    require_rank("tokens", tokens, 2, "(B, L)", max_rank=2)
    half = tokens.shape[1] // 2
    if 2 * half > vocab_size:
        raise ValueError(f"expected 2 * half <= vocab_size (both halves hold distinct tokens), got half={half} and "
                         f"vocab_size={vocab_size}")
    draw = torch.rand(tokens.shape[0], vocab_size, generator=generator).to(tokens.device)  # (B, vocab)
    draw.scatter_(1, tokens[:, :half], 2.0)  # the first half's tokens sort last: never drawn
    return torch.cat([tokens[:, :half], draw.argsort(dim=1)[:, :half]], dim=1)


def induction_scores(weights: torch.Tensor, half: int) -> torch.Tensor:
    """Mean weight, over the repeat's queries, on the key one past the earlier occurrence: (B, H, L, L) -> (H,).

    Query ``half + i`` holds the token of position ``i``; an induction head attends to ``i + 1``.
    """
    lq = weights.shape[-2]
    queries = torch.arange(half, lq, device=weights.device)
    return weights[..., queries, queries - half + 1].mean(dim=(0, -1))  # (B, H, half) -> (H,)


def previous_token_scores(weights: torch.Tensor) -> torch.Tensor:
    """Mean weight of each query (but the first) on the key just before it: (B, H, L, L) -> (H,)."""
    queries = torch.arange(1, weights.shape[-2], device=weights.device)
    return weights[..., queries, queries - 1].mean(dim=(0, -1))


def head_scores(model: AttentionOnlyTransformer, tokens: torch.Tensor, half: int) -> dict[str, torch.Tensor]:
    """Per layer and head: ``{"induction": (layers, H), "previous": (layers, H)}`` on repeated tokens."""
    with torch.no_grad():
        _, weights = model(tokens, need_weights=True)
    return {"induction": torch.stack([induction_scores(w, half) for w in weights]),
            "previous": torch.stack([previous_token_scores(w) for w in weights])}


def floored_scores(model: AttentionOnlyTransformer, probes: list[tuple[int, torch.Tensor, torch.Tensor]]
                   ) -> dict[str, torch.Tensor]:
    """Each head's scores on repeats of several lengths, with the positional floor beside them: (layers, H) each.

    ``probes``: ``(half, repeats, controls)`` triples (``scoring_probes``). ``induction`` and ``previous`` are
    ``head_scores`` on the repeats, ``floor`` the induction score on the controls (``control_tokens``), each
    averaged over the halves: an induction head's score stands far above its floor, a head that attends by
    position alone scores about its floor.
    """
    per_half = [(head_scores(model, repeats, half), head_scores(model, controls, half)["induction"])
                for half, repeats, controls in probes]
    return {"induction": torch.stack([s["induction"] for s, _ in per_half]).mean(dim=0),
            "previous": torch.stack([s["previous"] for s, _ in per_half]).mean(dim=0),
            "floor": torch.stack([floor for _, floor in per_half]).mean(dim=0)}


def repeat_loss(logits: torch.Tensor, tokens: torch.Tensor, half: int) -> torch.Tensor:
    """Mean cross-entropy of the predictions the repeat makes possible.

    tokens (B, 2 * half) from ``repeated_tokens``, logits (B, 2 * half - 1, vocab) from ``tokens[:, :-1]``:
    positions half..2 * half - 2 predict tokens half + 1..2 * half - 1, copies of tokens 1..half - 1.
    """
    predictable = slice(half, 2 * half - 1)
    return nn.functional.cross_entropy(logits[:, predictable].flatten(0, 1), tokens[:, half + 1:].flatten())


def context_measures(model: AttentionOnlyTransformer, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per predicted position, averaged over the batch: tokens (B, L) -> ``{"loss": (L - 1,), "seen": (L - 1,)}``.

    Position ``j`` predicts token ``j + 1`` from tokens ``0..j``. ``loss``: its cross-entropy (nats);
    ``seen``: the probability it puts on the tokens that already occur among ``0..j``, which a model that
    has learned only "tokens in the context come again" (an in-context unigram) raises without copying.
    """
    with torch.no_grad():
        logits, _ = model(tokens[:, :-1])  # (B, L - 1, vocab)
    loss = nn.functional.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (B, L - 1)
    present = nn.functional.one_hot(tokens[:, :-1], logits.shape[-1]).cumsum(dim=1) > 0  # (B, L - 1, vocab)
    seen = (logits.softmax(dim=-1) * present).sum(dim=-1)  # (B, L - 1)
    return {"loss": loss.mean(dim=0), "seen": seen.mean(dim=0)}


def scoring_probes(halves=(8, 10, 12), batch_size: int = 64, vocab_size: int = 32, seed: int = 321,
                   device=None) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    """Fixed sequences to score heads on: per ``half``, ``(half, repeats, controls)``, each (B, 2 * half) tokens:
    ``batch_size`` ``repeated_tokens`` and their ``control_tokens`` (same first halves, nothing to copy), seeded."""
    gen = torch.Generator().manual_seed(seed)
    probes = []
    for half in halves:
        repeats = repeated_tokens(batch_size, half, vocab_size, generator=gen)
        probes.append((half, repeats.to(device), control_tokens(repeats, vocab_size, generator=gen).to(device)))
    return probes


def train_induction(model: AttentionOnlyTransformer, steps: int, halves=range(4, 17), batch_size: int = 32,
                    lr: float = 3e-3, seed: int = 0, probe_every: int = 25, probe_half: int = 16,
                    score_halves=(8, 10, 12)) -> dict[str, list]:
    """Train ``model`` to predict the next token (every position counts) of ``repeated_tokens`` sequences.

    Each step draws its ``half`` from ``halves``: the distance to the earlier copy changes from batch to
    batch, so the model cannot find the copy by position alone. Returns a history dict: ``loss`` (all
    positions) and ``repeat_loss`` per step, and every ``probe_every`` steps (``probe_step``) the
    ``induction``, ``floor`` and ``previous`` head scores (layers, H) of ``floored_scores`` on the fixed
    ``scoring_probes(score_halves)``, and the ``position_loss`` and ``seen`` (``context_measures``) of 64 fixed
    sequences of ``2 * probe_half`` tokens. Probing draws nothing from the training's generator."""
    vocab = model.embed.num_embeddings
    device = model.embed.weight.device
    gen = torch.Generator().manual_seed(seed)
    halves = list(halves)
    probe = repeated_tokens(64, probe_half, vocab, generator=torch.Generator().manual_seed(seed + 1), device=device)
    scoring = scoring_probes(score_halves, vocab_size=vocab, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    history = {"loss": [], "repeat_loss": [], "probe_step": [], "induction": [], "floor": [], "previous": [],
               "position_loss": [], "seen": []}
    for step in range(steps + 1):
        if step % probe_every == 0 or step == steps:
            history["probe_step"].append(step)
            for name, scores in floored_scores(model, scoring).items():
                history[name].append(scores)
            measures = context_measures(model, probe)
            history["position_loss"].append(measures["loss"])
            history["seen"].append(measures["seen"])
        if step == steps:
            break
        half = halves[int(torch.randint(len(halves), (), generator=gen))]
        tokens = repeated_tokens(batch_size, half, vocab, generator=gen, device=device)
        logits, _ = model(tokens[:, :-1])  # predict token t + 1 from tokens 0..t
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history["loss"].append(loss.item())
        history["repeat_loss"].append(repeat_loss(logits.detach(), tokens, half).item())
    return history


# --- the book's induction-head experiment -----------------------------------------------------------------
# Its settings live here, once: the chapter that grows the head and the website's build, which trains the same
# model again for the reader's browser, both import them.

SYMBOLS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"  # how the book writes the model's tokens, one character each
ARCHITECTURE = {"vocab_size": len(SYMBOLS), "d_model": 64, "num_heads": 2, "num_layers": 2, "max_length": 32}
TRAINING = {"steps": 1000, "halves": range(4, 17), "batch_size": 32, "lr": 3e-3, "seed": 0, "probe_every": 25}
INIT_SEED = 0  # torch.manual_seed before the model is made: its initial weights
PROBE = {"batch_size": 64, "half": 16, "seed": 123}  # the fixed sequences the trained heads are scored on


def grow_induction_head() -> tuple[AttentionOnlyTransformer, dict[str, list]]:
    """The experiment: an ``AttentionOnlyTransformer(**ARCHITECTURE)`` seeded with ``INIT_SEED`` and trained
    with ``train_induction(model, **TRAINING)`` on one CPU thread (a model this small trains fastest on one,
    and it is the same model on every run). Returns ``(model, history)`` as ``train_induction`` gives it."""
    torch.manual_seed(INIT_SEED)
    model = AttentionOnlyTransformer(**ARCHITECTURE)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        history = train_induction(model, **TRAINING)
    finally:
        torch.set_num_threads(threads)
    return model, history


def probe_tokens() -> torch.Tensor:
    """``PROBE``'s fixed repeated sequences, (B, 2 * half) tokens, on which the experiment's heads are scored."""
    return repeated_tokens(PROBE["batch_size"], PROBE["half"], ARCHITECTURE["vocab_size"],
                           generator=torch.Generator().manual_seed(PROBE["seed"]))
