"""Multi-head attention: split D into H heads of D/H, attend per head, concatenate, project by W_O.

``MultiHeadAttention`` is batch-first and uses attnlib's mask convention (bool True = may attend).
Note that ``torch.nn.MultiheadAttention``'s boolean ``attn_mask``/``key_padding_mask`` mean the
opposite (True = masked out): convert with ``~mask`` when moving between the two.
"""

from __future__ import annotations

import torch
from torch import nn

from attnlib._checks import (
    check_mask_args,
    checked,
    require_float_tensor,
    require_like,
    require_positive_int,
    require_positive_ints,
    require_rank,
    require_tensor,
)
from attnlib.attention import scaled_dot_product_attention


def check_split_heads(x, num_heads: int, require=require_tensor) -> None:
    """x (B, L, D) with D divisible by ``num_heads``."""
    require("x", x)
    require_rank("x", x, 3, "(B, L, D)", max_rank=3)
    require_positive_int("num_heads", num_heads)
    if x.shape[-1] % num_heads:
        raise ValueError(f"expected D divisible by num_heads={num_heads}, got x of shape {tuple(x.shape)}")


@checked(check_split_heads)
def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(B, L, D) -> (B, H, L, D/H): each head gets its own slice of the features."""
    b, length, d = x.shape
    return x.reshape(b, length, num_heads, d // num_heads).transpose(1, 2)  # (B, L, H, Dk) -> (B, H, L, Dk)


def check_merge_heads(x, require=require_tensor) -> None:
    """merge_heads' input: x (B, H, L, Dk)."""
    require("x", x)
    require_rank("x", x, 4, "(B, H, L, Dk)", max_rank=4)


@checked(check_merge_heads)
def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, L, Dk) -> (B, L, H*Dk): concatenate the heads' outputs feature-wise."""
    b, h, length, dk = x.shape
    return x.transpose(1, 2).reshape(b, length, h * dk)  # (B, H, L, Dk) -> (B, L, H, Dk) -> (B, L, D)


def check_multihead_config(embed_dim, num_heads, kdim=None, vdim=None, num_kv_heads=None) -> None:
    """MultiHeadAttention's sizes: D divisible by H, H by Hkv; kdim and vdim None or positive."""
    require_positive_ints(embed_dim=embed_dim, num_heads=num_heads)
    if embed_dim % num_heads:
        raise ValueError(f"expected embed_dim divisible by num_heads, got embed_dim={embed_dim}, "
                         f"num_heads={num_heads}")
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    require_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"expected num_heads divisible by num_kv_heads, got num_heads={num_heads}, "
                         f"num_kv_heads={num_kv_heads}")
    require_positive_ints(**{name: width for name, width in (("kdim", kdim), ("vdim", vdim)) if width is not None})


def require_features(name: str, x, width: int, like_name: str, like) -> None:
    """A module's input: a float tensor (B, L, width) with the dtype and device of ``like`` (its weights)."""
    require_float_tensor(name, x, 3, f"(B, L, {width})", max_rank=3)
    require_like(name, x, like_name, like)
    if x.shape[-1] != width:
        raise ValueError(f"expected {name} of shape (B, L, {width}), got {tuple(x.shape)}")


def check_multihead_inputs(module, query, key, value, attn_mask, is_causal) -> None:
    """MultiHeadAttention.forward's inputs: query (B, Lq, D), key (B, Lk, kdim), value (B, Lk, vdim) like the
    module's weights, and a mask broadcastable to (B, H, Lq, Lk) or ``is_causal``."""
    widths = (("query", query, module.embed_dim), ("key", key, module.kdim), ("value", value, module.vdim))
    for name, t, width in widths:
        require_features(name, t, width, "the module's weights", module.out_proj.weight)
    if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
        raise ValueError(f"expected query (B, Lq, ...), key and value (B, Lk, ...) with matching B "
                         f"and Lk, got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    batch = (query.shape[0], module.num_heads)  # the weights' leading dims (B, H)
    check_mask_args(attn_mask, is_causal, query.shape[1], key.shape[1], (batch,), query.device)


class MultiHeadAttention(nn.Module):
    """Batch-first multi-head attention with separate Q, K, V projections and an output projection.

    ``embed_dim`` D is split into ``num_heads`` H heads of D/H. ``kdim``/``vdim`` are the feature
    widths of the key and value inputs (default D), as in ``torch.nn.MultiheadAttention``.
    ``num_kv_heads`` Hkv (default H) key/value heads of D/H each: H/Hkv query heads share one
    (grouped-query attention; Hkv = 1 is multi-query attention). The key and value projections then
    map to Hkv * D/H features instead of D.
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True,
                 kdim: int | None = None, vdim: int | None = None, num_kv_heads: int | None = None) -> None:
        super().__init__()
        check_multihead_config(embed_dim, num_heads, kdim, vdim, num_kv_heads)
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        kv_dim = self.num_kv_heads * (embed_dim // num_heads)  # Hkv heads of D/H features
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(self.kdim, kv_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, kv_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query: torch.Tensor, key: torch.Tensor | None = None,
                value: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None, *,
                is_causal: bool = False, need_weights: bool = True) -> tuple[torch.Tensor, torch.Tensor | None]:
        """query (B, Lq, D), key (B, Lk, kdim), value (B, Lk, vdim); key/value default to query.

        Returns ``(output (B, Lq, D), weights (B, H, Lq, Lk))`` (weights None if not ``need_weights``).
        ``attn_mask`` is attnlib's: bool True = may attend, broadcastable to (B, H, Lq, Lk).
        """
        key = query if key is None else key
        value = key if value is None else value
        check_multihead_inputs(self, query, key, value, attn_mask, is_causal)
        q = split_heads.unchecked(self.q_proj(query), num_heads=self.num_heads)  # (B, H, Lq, Dk)
        k = split_heads.unchecked(self.k_proj(key), num_heads=self.num_kv_heads)  # (B, Hkv, Lk, Dk)
        v = split_heads.unchecked(self.v_proj(value), num_heads=self.num_kv_heads)  # (B, Hkv, Lk, Dk)
        heads, weights = scaled_dot_product_attention.unchecked(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=self.num_kv_heads < self.num_heads,
            need_weights=need_weights)  # (B, H, Lq, Dk), (B, H, Lq, Lk)
        return self.out_proj(merge_heads.unchecked(heads)), weights

    @classmethod
    def from_torch(cls, module: nn.MultiheadAttention) -> MultiHeadAttention:
        """A MultiHeadAttention with the weights of a ``torch.nn.MultiheadAttention`` (batch_first or not).

        The copy is always batch-first and has no dropout (it matches ``module`` in eval mode). Modules
        with ``add_bias_kv`` or ``add_zero_attn`` are refused.
        """
        if not isinstance(module, nn.MultiheadAttention):
            raise TypeError(f"expected a torch.nn.MultiheadAttention, got {type(module).__qualname__}")
        if module.bias_k is not None or module.add_zero_attn:
            raise ValueError("expected a torch.nn.MultiheadAttention without add_bias_kv/add_zero_attn, "
                             "got one with them")
        ref = module.out_proj.weight
        new = cls(module.embed_dim, module.num_heads, bias=module.in_proj_bias is not None,
                  kdim=module.kdim, vdim=module.vdim).to(device=ref.device, dtype=ref.dtype)
        new._copy_from(module)
        return new

    @torch.no_grad()
    def _copy_from(self, module: nn.MultiheadAttention) -> None:
        if module._qkv_same_embed_dim:
            weights = module.in_proj_weight.chunk(3)
        else:
            weights = (module.q_proj_weight, module.k_proj_weight, module.v_proj_weight)
        projections = (self.q_proj, self.k_proj, self.v_proj)
        for proj, w in zip(projections, weights, strict=True):
            proj.weight.copy_(w)
        if module.in_proj_bias is not None:
            for proj, b in zip(projections, module.in_proj_bias.chunk(3), strict=True):
                proj.bias.copy_(b)
            self.out_proj.bias.copy_(module.out_proj.bias)
        self.out_proj.weight.copy_(module.out_proj.weight)
