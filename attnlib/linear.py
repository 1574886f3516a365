"""Linear attention (Katharopoulos et al. 2020): a kernel in place of the softmax, O(L) instead of O(L²).

Softmax attention weighs key j by exp(q·k_j). Replace that by a product of features, φ(q)·φ(k_j), with
φ(x) = elu(x) + 1 > 0, and the output of query i becomes

    o_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / φ(q_i)ᵀ (Σ_j φ(k_j)).

The sums no longer depend on i, so they are computed once, (Dk, Dv) and (Dk,): the cost grows linearly
with the length. Causal attention sums only j <= i, a running sum: the same model is then a recurrent
network whose state is that (Dk, Dv) matrix and (Dk,) vector.

* ``linear_attention``: the parallel form (all positions at once; causal with cumulative sums);
* ``linear_attention_recurrent``: the causal form one position at a time, carrying the state;
* ``linear_attention_weights``: the (Lq, Lk) weights the parallel form never builds, to look at them;
* ``max_weight_bound``: the most weight *any* query can give each key, set by the keys' features alone
  (softmax has no such bound: a large enough query puts all its weight on one key).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from attnlib._checks import checked, require_bool, require_float_tensor, require_positive, require_tensor
from attnlib.attention import check_attention_args
from attnlib.scores import check_scores_args


def check_feature_map_input(x, require=require_tensor) -> None:
    """elu_feature_map's input: a float tensor x (..., Dk)."""
    require_float_tensor("x", x, 1, "(..., Dk)", require=require)


@checked(check_feature_map_input)
def elu_feature_map(x: torch.Tensor) -> torch.Tensor:
    """φ(x) = elu(x) + 1, applied to each entry of x (..., L, Dk): positive, so every weight is > 0."""
    return F.elu(x) + 1


def _features(feature_map: Callable, x: torch.Tensor) -> torch.Tensor:
    """φ(x) (..., L, Dk); the default map unchecked, since the caller has checked x."""
    return elu_feature_map.unchecked(x) if feature_map is elu_feature_map else feature_map(x)


def require_feature_map(feature_map) -> None:
    """Raise TypeError unless ``feature_map`` can be called (a function of a tensor, as linear attention uses it)."""
    if not callable(feature_map):
        raise TypeError(f"expected feature_map to be a function of a tensor, got {type(feature_map).__name__}")


def check_linear_options(is_causal, eps, feature_map, lq: int, lk: int) -> None:
    """Linear attention's options: a callable feature map, a bool ``is_causal`` (then Lq == Lk), eps > 0."""
    require_feature_map(feature_map)
    require_bool("is_causal", is_causal)
    require_positive("eps", eps)
    if is_causal and lq != lk:
        raise ValueError(f"expected causal linear attention with Lq == Lk, got Lq={lq} and Lk={lk}")


def check_linear_attention_args(query, key, value, is_causal=False, feature_map=None, eps=1e-6) -> None:
    """Linear attention's inputs: those of attention without mask, and its options."""
    check_attention_args(query, key, value)
    check_linear_options(is_causal, eps, feature_map, query.shape[-2], key.shape[-2])


@checked(check_linear_attention_args)
def linear_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *, is_causal: bool = False,
                     feature_map: Callable = elu_feature_map, eps: float = 1e-6) -> torch.Tensor:
    """Parallel linear attention: query (..., Lq, Dk), key (..., Lk, Dk), value (..., Lk, Dv) -> (..., Lq, Dv).

    Non-causal: φ(Q) (φ(K)ᵀ V) / φ(Q) Σ_j φ(k_j). Causal (Lq = Lk): the sums run over j <= i, as
    cumulative sums of the (Dk, Dv) outer products, O(L·Dk·Dv) memory. ``eps`` is added to each denominator.
    """
    phi_q, phi_k = _features(feature_map, query), _features(feature_map, key)  # (..., Lq, Dk), (..., Lk, Dk)
    if not is_causal:
        kv = phi_k.transpose(-2, -1) @ value  # (..., Dk, Lk) @ (..., Lk, Dv) -> (..., Dk, Dv)
        norm = phi_q @ phi_k.sum(dim=-2)[..., None]  # (..., Lq, Dk) @ (..., Dk, 1) -> (..., Lq, 1)
        return (phi_q @ kv) / (norm + eps)
    kv = torch.cumsum(phi_k[..., :, None] * value[..., None, :], dim=-3)  # (..., L, Dk, 1) * (..., L, 1, Dv)
    z = torch.cumsum(phi_k, dim=-2)  # (..., L, Dk): Σ_{j<=i} φ(k_j)
    numerator = (phi_q[..., None, :] @ kv)[..., 0, :]  # (..., L, 1, Dk) @ (..., L, Dk, Dv) -> (..., L, Dv)
    return numerator / ((phi_q * z).sum(dim=-1, keepdim=True) + eps)


@checked(check_linear_attention_args, is_causal=True)
def linear_attention_recurrent(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, *,
                               feature_map: Callable = elu_feature_map, eps: float = 1e-6) -> torch.Tensor:
    """Causal linear attention as a recurrent network: query, key (..., L, Dk), value (..., L, Dv) -> (..., L, Dv).

    State S (..., Dk, Dv) and z (..., Dk) start at 0; at step i, S += φ(k_i) v_iᵀ, z += φ(k_i), and
    o_i = φ(q_i)ᵀ S / (φ(q_i)ᵀ z + eps). Memory per step is constant in L, like a decoder's next token.
    """
    phi_q, phi_k = _features(feature_map, query), _features(feature_map, key)
    batch = torch.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    state = query.new_zeros((*batch, query.shape[-1], value.shape[-1]))  # (..., Dk, Dv)
    z = query.new_zeros((*batch, query.shape[-1]))  # (..., Dk)
    outputs = []
    for i in range(query.shape[-2]):
        state = state + phi_k[..., i, :, None] * value[..., i, None, :]  # (..., Dk, 1) * (..., 1, Dv)
        z = z + phi_k[..., i, :]
        numerator = (phi_q[..., i, None, :] @ state)[..., 0, :]  # (..., 1, Dk) @ (..., Dk, Dv) -> (..., Dv)
        outputs.append(numerator / ((phi_q[..., i, :] * z).sum(dim=-1, keepdim=True) + eps))
    return torch.stack(outputs, dim=-2)


def check_linear_weights_args(query, key, is_causal=False, feature_map=None, eps=1e-6) -> None:
    """linear_attention_weights' inputs: query (..., Lq, Dk), key (..., Lk, Dk) and the options."""
    check_scores_args(query, key)
    check_linear_options(is_causal, eps, feature_map, query.shape[-2], key.shape[-2])


@checked(check_linear_weights_args)
def linear_attention_weights(query: torch.Tensor, key: torch.Tensor, *, is_causal: bool = False,
                             feature_map: Callable = elu_feature_map, eps: float = 1e-6) -> torch.Tensor:
    """The weights (..., Lq, Lk) linear attention applies: φ(q_i)·φ(k_j) / (Σ_j' φ(q_i)·φ(k_j') + eps).

    query (..., Lq, Dk), key (..., Lk, Dk). ``weights @ value`` equals ``linear_attention``'s output.
    Costs O(Lq·Lk): for looking at a few rows, not for computing.
    """
    phi_q, phi_k = _features(feature_map, query), _features(feature_map, key)
    kernel = phi_q @ phi_k.transpose(-2, -1)  # (..., Lq, Dk) @ (..., Dk, Lk) -> (..., Lq, Lk)
    if is_causal:
        kernel = kernel.tril()  # key j <= query i
    return kernel / (kernel.sum(dim=-1, keepdim=True) + eps)


def check_weight_bound_args(key, feature_map=None) -> None:
    """max_weight_bound's inputs: float key (..., Lk, Dk) and a callable feature map."""
    require_float_tensor("key", key, 2, "(..., Lk, Dk)")
    require_feature_map(feature_map)


@checked(check_weight_bound_args)
def max_weight_bound(key: torch.Tensor, *, feature_map: Callable = elu_feature_map) -> torch.Tensor:
    """The most weight any query can give each key, key (..., Lk, Dk) -> (..., Lk), for a positive ``feature_map``.

    With u = φ(q) > 0 and a_j = φ(k_j) > 0: u·a_j' >= min_d(a_j'd / a_jd) u·a_j, so key j's weight (eps = 0) is
    at most 1 / (1 + Σ_{j' ≠ j} min_d a_j'd / a_jd), whatever the query.
    """
    a = _features(feature_map, key)  # (..., Lk, Dk)
    if not (a > 0).all():
        raise ValueError("expected a feature map with positive values (the bound needs φ > 0), got values <= 0")
    ratios = (a[..., None, :, :] / a[..., :, None, :]).amin(dim=-1)  # (..., Lk j, Lk j'): min_d a_j'd / a_jd
    return 1 / ratios.sum(dim=-1)  # the j' = j term is 1
