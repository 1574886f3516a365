"""attnlib's public signatures: torch's SDPA argument order, keyword-only options, return annotations."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest
import torch
import torch.nn.functional as F

import attnlib
from attnlib import numpy_ops
from attnlib.attention import scaled_dot_product_attention
from attnlib.causal import cached_attention, paged_attention
from attnlib.flash import flash_attention, weights_from_lse
from attnlib.linear import linear_attention, linear_attention_recurrent, linear_attention_weights
from attnlib.multihead import MultiHeadAttention
from attnlib.softmax import apply_mask

P = inspect.Parameter
# Every attnlib module, subpackages included (attnlib.views.*): their public functions and methods are annotated.
MODULES = sorted(m.name for m in pkgutil.walk_packages(attnlib.__path__, "attnlib."))


def _described(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def _torch_sdpa() -> list[tuple]:
    """torch's SDPA signature: names and defaults from its docstring, kinds from what a call accepts.

    A builtin has no signature that inspect can read; its docstring adds that ``scale`` is keyword-only.
    """
    with pytest.raises(ValueError):
        inspect.signature(F.scaled_dot_product_attention)
    header = F.scaled_dot_product_attention.__doc__.split("->")[0]  # "scaled_dot_product_attention(query, ...)"
    args = ast.parse(f"def {header.strip()}: pass").body[0].args
    defaults = [P.empty] * (len(args.args) - len(args.defaults)) + [ast.literal_eval(d) for d in args.defaults]
    positional = _positional_count(F.scaled_dot_product_attention, defaults)
    return [(a.arg, P.POSITIONAL_OR_KEYWORD if i < positional else P.KEYWORD_ONLY, d)
            for i, (a, d) in enumerate(zip(args.args, defaults, strict=True))]


def _positional_count(function, defaults: list) -> int:
    """How many arguments ``function`` takes by position: call it with more until it refuses."""
    x = torch.randn(1, 2, 3)
    count = 3
    for default in defaults[3:]:
        try:
            function(x, x, x, *defaults[3:count], default)
        except TypeError:
            break
        count += 1
    return count


def test_torchs_signature_is_the_one_torch_documents():
    names = [name for name, _, _ in _torch_sdpa()]
    assert names == ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]
    assert _positional_count(scaled_dot_product_attention, [d for _, _, d in _torch_sdpa()]) == 6


def test_sdpa_takes_torchs_arguments_in_torchs_order_then_need_weights_keyword_only():
    assert _described(scaled_dot_product_attention) == [*_torch_sdpa(), ("need_weights", P.KEYWORD_ONLY, True)]


def test_the_numpy_twin_has_the_same_signature():
    assert _described(numpy_ops.scaled_dot_product_attention) == _described(scaled_dot_product_attention)


def test_positional_arguments_mean_what_they_mean_in_torch():
    query, key, value = (torch.randn(2, 5, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    mask = torch.rand(5, 5, generator=torch.Generator().manual_seed(3)) < 0.6
    for args, kwargs in [((None, 0.0, True), {}), ((mask, 0.0, False), {"scale": 0.3}), ((mask,), {})]:
        ours = scaled_dot_product_attention(query, key, value, *args, **kwargs)[0]
        torch.testing.assert_close(ours, F.scaled_dot_product_attention(query, key, value, *args, **kwargs))
    torch.manual_seed(0)
    dropped = scaled_dot_product_attention(query, key, value, None, 0.5, need_weights=False)[0]
    torch.manual_seed(0)
    torch.testing.assert_close(dropped, F.scaled_dot_product_attention(query, key, value, None, 0.5))


OTHERS = [flash_attention, weights_from_lse, apply_mask, numpy_ops.apply_mask, MultiHeadAttention.forward]


@pytest.mark.parametrize("function", OTHERS, ids=lambda f: f.__qualname__)
def test_other_attention_functions_take_keywords_only_after_attn_mask(function):
    params = list(inspect.signature(function).parameters.values())
    after = params[[p.name for p in params].index("attn_mask") + 1:]
    assert after and all(p.kind is P.KEYWORD_ONLY for p in after)


@pytest.mark.parametrize("function", [linear_attention, linear_attention_recurrent, linear_attention_weights,
                                      cached_attention, paged_attention], ids=lambda f: f.__qualname__)
def test_attention_functions_without_a_mask_take_their_options_by_keyword(function):
    params = list(inspect.signature(function).parameters.values())
    tensors = [p for p in params if p.kind is P.POSITIONAL_OR_KEYWORD]
    assert all(p.default is P.empty for p in tensors)  # only the required inputs are positional
    assert any(p.kind is P.KEYWORD_ONLY for p in params)


def _public_callables():
    """(qualified name, function) for every public function and method defined in an attnlib module."""
    for name in MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if attr.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isfunction(obj):
                yield f"{name}.{attr}", obj
            elif inspect.isclass(obj):
                for method_name, member in vars(obj).items():
                    method = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
                    if inspect.isfunction(method) and not method_name.startswith("_"):
                        yield f"{name}.{attr}.{method_name}", method


def test_every_module_is_walked():
    assert {"attnlib.attention", "attnlib.bench", "attnlib.views.bertviz", "attnlib.views.html"} <= set(MODULES)


def test_every_public_function_and_method_has_a_return_annotation():
    public = dict(_public_callables())
    assert len(public) > 100
    missing = [name for name, f in public.items() if inspect.signature(f).return_annotation is P.empty]
    assert missing == []
