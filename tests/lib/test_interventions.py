"""attnlib.interventions' parts: each replacement is one small function, the sites are found once per call, and
the chapters' names stay importable from attnlib.interpret. What the interventions compute is tested against
independent references in tests/lib/test_interpret.py."""

from __future__ import annotations

import pytest
import torch

from attnlib import circuits, interpret, interventions
from attnlib.induction import AttentionOnlyTransformer, repeated_tokens
from tests.lib.tensors import randn


def tiny_decoder(seed=0):
    torch.manual_seed(seed)
    return AttentionOnlyTransformer(vocab_size=13, d_model=12, num_heads=3, num_layers=2, max_length=20).double()


def tokens(batch=2, length=8, seed=1):
    return torch.randint(0, 13, (batch, length), generator=torch.Generator().manual_seed(seed))


def test_the_chapters_names_are_the_split_modules_own():
    for name in interpret.__all__:
        home = getattr(interventions, name, None) or getattr(circuits, name, None) or vars(interpret)[name]
        assert getattr(interpret, name) is home, name
    assert {"ablate_heads", "patch_heads", "head_outputs", "ablation_loss", "ov_circuit",
            "k_composition_circuit", "value_weighted_norms", "attention_rollout"} <= set(interpret.__all__)


# --- the replacements: (context (B, L, H*Dk), row, positions) -> what the head's columns become ---------------

def test_zero_is_zero():
    assert interventions.zero(randn(2, 5, 6, seed=1), None, slice(None)) == 0


def test_a_mean_per_position_is_cut_to_the_input_and_read_at_the_positions():
    mean = randn(7, 3, seed=2)  # (L_ref, Dk)
    replace = interventions.mean_of(mean)
    context = randn(2, 5, 6, seed=3).float()
    got = replace(context, None, slice(None))
    assert got.dtype == torch.float32 and torch.equal(got, mean[:5].float())
    torch.testing.assert_close(replace(context, 1, [4, 0]), mean[[4, 0]].float())
    with pytest.raises(ValueError, match="at most 7 positions.*got 8"):
        replace(randn(1, 8, 6, seed=4), None, slice(None))


def test_a_mean_over_positions_is_the_same_everywhere():
    mean = randn(3, seed=5)  # (Dk,)
    assert torch.equal(interventions.mean_of(mean)(randn(2, 50, 6, seed=6), 0, [3]), mean)


def test_a_recorded_output_is_read_at_the_row_and_positions():
    output = randn(2, 5, 3, seed=7)  # (B, L, Dk) of another run
    replace = interventions.recorded(output)
    context = randn(2, 5, 6, seed=8)
    assert torch.equal(replace(context, None, [1, 3]), output[:, [1, 3]])
    assert torch.equal(replace(context, 1, [2]), output[1, [2]])
    one_row = interventions.recorded(output[:1])  # a run of one row is patched into every row
    assert torch.equal(one_row(randn(4, 5, 6, seed=9), 3, [0]), output[0, [0]])
    with pytest.raises(ValueError, match=r"expected an input of \(2, 5\).*got \(2, 4\)"):
        replace(randn(2, 4, 6, seed=10), None, [0])


def test_the_hook_sets_only_the_heads_columns_at_the_positions():
    context = randn(2, 4, 6, seed=11)  # H = 2 heads of Dk = 3
    targets = [(1, slice(3, 6), lambda c, row, positions: torch.full((1, 3), 7.0, dtype=c.dtype))]
    (new, extra) = interventions._replacing_hook(targets, [2])(None, (context, "kept"))
    expected = context.clone()
    expected[1, 2, 3:] = 7.0
    assert torch.equal(new, expected) and extra == "kept"
    assert not torch.equal(context, expected)  # the hooked input itself is left alone


# --- the sites: found once per call -----------------------------------------------------------------------------

@pytest.fixture
def counted(monkeypatch):
    """interventions.head_sites, counting its calls."""
    calls = []
    real = interventions.head_sites

    def counting(model):
        calls.append(model)
        return real(model)

    monkeypatch.setattr(interventions, "head_sites", counting)
    return calls


def _ablate(model, x):
    with interventions.ablate_heads(model, [(0, 1), (1, 0)]):
        model(x)


def _mean_ablate(model, x):
    with interventions.mean_ablate_heads(model, [(1, 1)], x):
        model(x)


CALLS = {"ablate_heads": _ablate, "mean_ablate_heads": _mean_ablate,
         "head_outputs": interventions.head_outputs, "head_means": interventions.head_means}


@pytest.mark.parametrize("name", CALLS)
def test_each_call_finds_the_sites_once(counted, name):
    model, x = tiny_decoder(), tokens()
    CALLS[name](model, x)
    assert len(counted) == 1
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_patching_finds_the_sites_once_beside_the_recording(counted):
    model, x = tiny_decoder(), tokens()
    source = interventions.head_outputs(model, x)
    counted.clear()
    with interventions.patch_heads(model, [(0, 1), (1, 2)], source, positions=[1, 5]):
        model(x)
    assert len(counted) == 1


def test_ablation_loss_finds_the_sites_once_per_ablation(counted):
    model = tiny_decoder()
    x = repeated_tokens(2, half=4, vocab_size=13, generator=torch.Generator().manual_seed(0))
    interventions.ablation_loss(model, x, half=4, heads=[(1, 0)])
    assert len(counted) == 1
    counted.clear()
    interventions.ablation_loss(model, x, half=4, heads=[(1, 0)], reference=x)
    assert len(counted) == 1
