"""attnlib.induction: the attention-only transformer (full vs cached), the task, the head scores, training."""

from __future__ import annotations

import pytest
import torch

from attnlib.causal import kv_cache_bytes
from attnlib.induction import (
    AttentionOnlyTransformer,
    context_measures,
    control_tokens,
    floored_scores,
    head_scores,
    induction_scores,
    previous_token_scores,
    repeat_loss,
    repeated_tokens,
    scoring_probes,
    train_induction,
)


def _model(num_kv_heads=None, dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    return AttentionOnlyTransformer(vocab_size=11, d_model=16, num_heads=4, num_layers=2, max_length=40,
                                    num_kv_heads=num_kv_heads).to(dtype)


@pytest.mark.parametrize("dtype, atol", [(torch.float64, 1e-6), (torch.float32, 1e-5)], ids=str)
@pytest.mark.parametrize("num_kv_heads", [None, 2, 1])
def test_decoding_with_the_cache_equals_the_full_forward_pass(num_kv_heads, dtype, atol):
    model = _model(num_kv_heads, dtype)
    tokens = torch.randint(11, (2, 36), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full, full_weights = model(tokens, need_weights=True)
        cache = model.new_cache(batch_size=2)
        steps = [model(tokens[:, t:t + 1], cache=cache)[0] for t in range(36)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=atol, rtol=0)
    assert len(full_weights) == 2 and full_weights[0].shape == (2, 4, 36, 36)
    hkv = num_kv_heads or 4
    assert cache.nbytes == kv_cache_bytes(2, hkv, 4, 40, 2, bytes_per_value=torch.empty((), dtype=dtype).element_size())


def test_a_prompt_then_steps_gives_the_same_logits_and_too_long_is_an_error():
    model = _model()
    tokens = torch.randint(11, (1, 40), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = model(tokens)
        cache = model.new_cache()
        prompt, _ = model(tokens[:, :30], cache=cache)
        rest = [model(tokens[:, t:t + 1], cache=cache)[0] for t in range(30, 40)]
        torch.testing.assert_close(torch.cat([prompt, *rest], dim=1), full, atol=1e-12, rtol=0)
        with pytest.raises(ValueError, match="max_length=40"):
            model(tokens[:, :1], cache=cache)


def test_windowed_forward_equals_windowed_decoding():
    model = _model(num_kv_heads=2)
    tokens = torch.randint(11, (2, 33), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full, _ = model(tokens, window=6)
        cache = model.new_cache(batch_size=2)
        steps = [model(tokens[:, :20], cache=cache, window=6)[0]]
        steps += [model(tokens[:, t:t + 1], cache=cache, window=6)[0] for t in range(20, 33)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-12, rtol=0)
        assert not torch.allclose(full, model(tokens)[0])  # the window changes what the model sees


def test_windowed_forward_with_sinks_equals_windowed_decoding_with_sinks():
    model = _model()
    tokens = torch.randint(11, (2, 30), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        full, weights = model(tokens, window=5, sinks=2, need_weights=True)
        cache = model.new_cache(batch_size=2)
        steps = [model(tokens[:, t:t + 1], cache=cache, window=5, sinks=2)[0] for t in range(30)]
        torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-12, rtol=0)
        assert weights[1][:, :, 10:, :2].sum() > 0 and weights[1][:, :, 10:, 2:5].eq(0).all()  # sinks seen, not 2-4
        assert not torch.allclose(full, model(tokens, window=5)[0])  # keeping the sinks changes what it computes


def test_control_tokens_keep_the_first_half_and_give_the_second_nothing_to_copy():
    tokens = repeated_tokens(50, 6, 13, generator=torch.Generator().manual_seed(1))
    controls = control_tokens(tokens, 13, generator=torch.Generator().manual_seed(2))
    again = control_tokens(tokens, 13, generator=torch.Generator().manual_seed(2))
    assert controls.shape == tokens.shape and torch.equal(controls, again)
    assert torch.equal(controls[:, :6], tokens[:, :6])
    for row in controls.tolist():
        assert len(set(row)) == 12 and all(0 <= t < 13 for t in row)  # 12 distinct tokens: no earlier copy
    assert len({tuple(r[6:]) for r in controls.tolist()}) > 40  # drawn, not a fixed choice
    with pytest.raises(ValueError, match="2 \\* half <= vocab_size"):
        control_tokens(repeated_tokens(1, 7, 13), 13)


class _DesignedHeads(torch.nn.Module):
    """Two heads on every input: head 0 attends 'half - 1 back' by position alone, head 1 one past the earlier copy
    of its token when there is one (an ideal induction head), else to position 0."""

    def __init__(self, half):
        super().__init__()
        self.half = half

    def forward(self, tokens, need_weights=False):
        batch, length = tokens.shape
        positional = torch.zeros(batch, length, length)
        queries = torch.arange(length)
        positional[:, queries, (queries - self.half + 1).clamp(min=0)] = 1
        earlier = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(length, length, dtype=torch.bool).tril(-1)
        target = torch.nn.functional.pad(earlier[..., :-1], (1, 0)).float()
        target[..., 0] += target.sum(-1) == 0  # nothing to copy: rest on position 0
        weights = torch.stack([positional, target], dim=1)  # (B, 2 heads, L, L)
        return None, [weights]


def test_floored_scores_tell_an_induction_head_from_a_positional_one():
    half = 5
    probes = scoring_probes((half,), batch_size=16, vocab_size=12, seed=3)
    scores = floored_scores(_DesignedHeads(half), probes)
    assert scores["induction"].tolist() == [[1.0, 1.0]]  # on repeats both land on the target...
    assert scores["floor"].tolist() == [[1.0, 0.0]]  # ... but with nothing to copy only position does
    assert scores["previous"].shape == (1, 2)


def test_scoring_probes_are_seeded_repeats_and_their_controls():
    first, again = scoring_probes(), scoring_probes()
    assert [half for half, _, _ in first] == [8, 10, 12]
    for (half, repeats, controls), (_, repeats2, controls2) in zip(first, again, strict=True):
        assert repeats.shape == controls.shape == (64, 2 * half)
        assert torch.equal(repeats, repeats2) and torch.equal(controls, controls2)
        assert torch.equal(repeats[:, :half], repeats[:, half:]) and torch.equal(controls[:, :half], repeats[:, :half])


def test_repeated_tokens_repeat_and_are_seeded():
    tokens = repeated_tokens(3, 5, 7, generator=torch.Generator().manual_seed(0))
    again = repeated_tokens(3, 5, 7, generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (3, 10) and torch.equal(tokens[:, :5], tokens[:, 5:]) and torch.equal(tokens, again)
    assert int(tokens.min()) >= 0 and int(tokens.max()) < 7
    assert all(len(set(row[:5].tolist())) == 5 for row in tokens)  # the first half: distinct tokens
    full = repeated_tokens(2, 7, 7, generator=torch.Generator().manual_seed(1))  # half = vocabulary: a permutation
    assert all(sorted(row[:7].tolist()) == list(range(7)) for row in full)
    with pytest.raises(ValueError, match="half <= vocab_size"):
        repeated_tokens(1, 8, 7)


def test_context_measures_of_a_copying_and_a_uniform_predictor():
    tokens = repeated_tokens(4, 6, 9, generator=torch.Generator().manual_seed(2))

    class Uniform(torch.nn.Module):
        def forward(self, t):
            return torch.zeros(*t.shape, 9), None

    measures = context_measures(Uniform(), tokens)
    seen_count = torch.arange(1, 12).clamp(max=6).float()  # distinct tokens among 0..j: j + 1, at most 6
    torch.testing.assert_close(measures["seen"], seen_count / 9)
    torch.testing.assert_close(measures["loss"], torch.full((11,), float(torch.log(torch.tensor(9.0)))))


def test_scores_of_designed_heads():
    half, length = 4, 8
    previous = torch.zeros(1, 1, length, length)
    previous[0, 0, 0, 0] = 1
    previous[0, 0, torch.arange(1, length), torch.arange(length - 1)] = 1  # every query on the key before it
    induction = torch.zeros(1, 1, length, length)
    induction[0, 0, torch.arange(half), 0] = 1
    induction[0, 0, torch.arange(half, length), torch.arange(1, half + 1)] = 1  # one past the earlier copy
    assert previous_token_scores(previous).item() == 1 and induction_scores(induction, half).item() == 1
    assert induction_scores(previous, half).item() == 0  # a previous-token head is no induction head
    both = torch.cat([previous, induction], dim=1)  # two heads -> two scores
    assert induction_scores(both, half).tolist() == [0.0, 1.0]


def test_repeat_loss_reads_the_predictable_positions():
    tokens = repeated_tokens(2, 6, 9, generator=torch.Generator().manual_seed(3))
    perfect = torch.full((2, 11, 9), -30.0)
    perfect[torch.arange(2)[:, None], torch.arange(11)[None, :], tokens[:, 1:]] = 30.0  # knows every next token
    assert repeat_loss(perfect, tokens, 6).item() < 1e-6
    uniform = torch.zeros(2, 11, 9)
    assert repeat_loss(uniform, tokens, 6).item() == pytest.approx(torch.log(torch.tensor(9.0)).item())


@pytest.mark.slow
def test_training_grows_an_induction_head_in_layer_2_on_top_of_a_previous_token_head():
    torch.manual_seed(0)
    model = AttentionOnlyTransformer(vocab_size=32, d_model=64, num_heads=2, num_layers=2, max_length=32)
    history = train_induction(model, steps=1000, lr=3e-3, seed=0, probe_every=500)
    scores = head_scores(model, repeated_tokens(64, 16, 32, generator=torch.Generator().manual_seed(9)), 16)
    assert sum(history["repeat_loss"][-50:]) / 50 < 1.0 < sum(history["repeat_loss"][:50]) / 50
    assert scores["induction"][1].max() > max(0.5, scores["induction"][0].max())
    assert scores["previous"][0].max() > 0.3
    assert history["probe_step"] == [0, 500, 1000] and history["induction"][0].shape == (2, 2)
    above = history["induction"][-1] - history["floor"][-1]  # the scores above their positional floors
    assert above[1].min() > 0.5 > 0.2 > above[0].abs().max()  # layer 2 far above, layer 1 near its floor
