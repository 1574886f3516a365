"""The circuits of an attention-only transformer, read from its weights alone (Elhage et al. 2021).

* ``qk_matrix`` and ``ov_matrix``: a head's W_QK = W_Q W_Kᵀ and W_OV = W_V W_O (D, D);
* ``ov_circuit``: W_E W_OV W_U, what attending to a token does to every logit, with ``copying_score`` and
  ``top1_copying`` to summarise it;
* ``composition_score``: how much a later head's queries, keys or values read an earlier head's output;
* ``k_composition_circuit``: that K-composition token by token, the induction head's signature.

Row-vector convention, as attnlib computes: a head's score is x_q W_Q W_Kᵀ x_kᵀ and its output x W_V W_O,
so W_QK = W_Q W_Kᵀ (D, D) and W_OV = W_V W_O (D, D). Elhage et al. write column vectors: their W_QK is this
one, their W_OV this one transposed; each composed matrix below is theirs transposed, its Frobenius norm the same.
"""

from __future__ import annotations

import torch

from attnlib._checks import require_tensor
from attnlib.induction import AttentionOnlyTransformer
from attnlib.interventions import check_head_pairs


def _head_pairs(model: AttentionOnlyTransformer, pairs: list) -> list[tuple[int, int]]:
    """The (layer, head) ``pairs`` of an attnlib ``AttentionOnlyTransformer``, checked against its layers and heads."""
    if not isinstance(model, AttentionOnlyTransformer):
        raise TypeError(f"expected an attnlib AttentionOnlyTransformer, got {type(model).__qualname__}")
    return check_head_pairs(pairs, len(model.layers), model.layers[0].num_heads)


def _head_weights(model: AttentionOnlyTransformer, layer: int, head: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K, W_V (D, Dk) and W_O (Dk, D) of one head, detached; grouped heads read their shared K/V head."""
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
