"""attnlib.interpret (value-weighted norms, rollout, head ablation) and the projections attnlib.models reads.

References are written independently here: an explicit loop for the norms, a rollout worked out by
hand, a copy with the head's columns of W_O zeroed for the ablation, and transformers' BERT
internals for the queries, keys and values.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
from conftest import randn  # noqa: E402
from transformers import BertConfig, BertModel  # noqa: E402

from attnlib.interpret import ablate_heads, attention_rollout, value_weighted_norms  # noqa: E402
from attnlib.models import (  # noqa: E402
    attention_from_weights,
    layer_inputs,
    mean_pooled_embedding,
    output_projection,
    queries_keys_from_weights,
    values_from_weights,
)


def small_bert(seed=0, **overrides) -> BertModel:
    config = dict(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                  intermediate_size=48, max_position_embeddings=24)
    config.update(overrides)
    torch.manual_seed(seed)
    settings = BertConfig(**config)
    settings._attn_implementation = "eager"
    return BertModel(settings).eval()


def ids(batch=2, length=7, seed=1):
    return torch.randint(1, 60, (batch, length), generator=torch.Generator().manual_seed(seed))


# --- value-weighted norms -------------------------------------------------------------------------


def test_norms_equal_an_explicit_loop():
    weights = torch.softmax(randn(2, 3, 4, 5, seed=1), dim=-1)  # (B, H, Lq, Lk)
    values = randn(2, 3, 5, 6, seed=2)  # (B, H, Lk, Dv)
    out_proj = randn(3 * 6, 7, seed=3)  # (H*Dv, D)
    got, got_o = value_weighted_norms(weights, values), value_weighted_norms(weights, values, out_proj)
    assert got.shape == got_o.shape == (2, 3, 4, 5)
    for b in range(2):
        for h in range(3):
            block = out_proj[h * 6:(h + 1) * 6]  # head h's rows of W_O
            for i in range(4):
                for j in range(5):
                    vector = weights[b, h, i, j] * values[b, h, j]
                    assert torch.isclose(got[b, h, i, j], torch.sqrt((vector**2).sum()), rtol=1e-12, atol=0)
                    assert torch.isclose(got_o[b, h, i, j], torch.sqrt(((vector @ block) ** 2).sum()),
                                         rtol=1e-12, atol=0)


def test_norms_of_the_heads_add_up_to_the_layer_output_before_its_bias():
    """Σ_h Σ_j α f_h(v_j) is the attention sublayer's output minus b_O: the decomposition is exact."""
    model = small_bert().double()
    input_ids = ids()
    hidden = layer_inputs(model, input_ids)[1]
    attention = attention_from_weights(model, input_ids)[1]  # (B, H, L, L)
    values = values_from_weights(model, input_ids)[1]  # (B, H, L, Dv)
    w_o = output_projection(model, 1)
    per_head = (attention @ values) @ w_o.reshape(4, 8, 32)  # (B, H, L, D)
    with torch.no_grad():
        dense = model.encoder.layer[1].attention.output.dense
        context = model.encoder.layer[1].attention.self(hidden)[0]  # (B, L, D) concat(heads)
        expected = dense(context) - dense.bias
    torch.testing.assert_close(per_head.sum(dim=1), expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("weights", "values", "message"), [
    ((3, 4, 5), (3, 4, 6), r"expected values of shape \(\.\.\., H, Lk, Dv\) with H=3, Lk=5"),
    ((4, 5), (4, 5), "same rank >= 3"),
    ((1, 3, 4, 5), (3, 5, 6), "same rank >= 3"),
])
def test_norms_reject_bad_shapes(weights, values, message):
    with pytest.raises(ValueError, match=message):
        value_weighted_norms(torch.rand(weights), torch.rand(values))


def test_norms_reject_a_bad_output_projection():
    with pytest.raises(ValueError, match=r"expected out_proj of shape \(H\*Dv, D\) = \(18, D\), got \(12, 7\)"):
        value_weighted_norms(torch.rand(3, 4, 5), torch.rand(3, 5, 6), torch.rand(12, 7))


# --- rollout ---------------------------------------------------------------------------------------


def test_rollout_of_a_two_layer_example_worked_by_hand():
    # one head, two tokens.  Layer 1: A1 = [[1, 0], [.5, .5]];  layer 2: A2 = [[0, 1], [1, 0]].
    # With the residual, Â = (A + I) / 2 (rows already sum to 1):
    #   Â1 = [[1, 0], [.25, .75]],   Â2 = [[.5, .5], [.5, .5]]
    # rollout = Â2 Â1:  row 0 = .5 [1, 0] + .5 [.25, .75] = [.625, .375];  row 1 is the same.
    a1 = torch.tensor([[[1.0, 0.0], [0.5, 0.5]]], dtype=torch.float64)
    a2 = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]], dtype=torch.float64)
    by_hand = torch.tensor([[0.625, 0.375], [0.625, 0.375]], dtype=torch.float64)
    torch.testing.assert_close(attention_rollout([a1, a2]), by_hand, rtol=0, atol=1e-15)
    # without the residual: A2 A1 = [[.5, .5], [1, 0]]
    torch.testing.assert_close(attention_rollout([a1, a2], residual=False),
                               torch.tensor([[0.5, 0.5], [1.0, 0.0]], dtype=torch.float64), rtol=0, atol=1e-15)


def test_rollout_averages_heads_keeps_batches_and_rows_sum_to_one():
    layers = [torch.softmax(randn(2, 3, 5, 5, seed=s), dim=-1) for s in range(4)]  # (B, H, L, L) each
    rolled = attention_rollout(layers)
    assert rolled.shape == (2, 5, 5)
    torch.testing.assert_close(rolled.sum(dim=-1), torch.ones(2, 5, dtype=torch.float64))
    eye = torch.eye(5, dtype=torch.float64)
    expected = eye
    for layer in layers:
        expected = (0.5 * layer.mean(dim=1) + 0.5 * eye) @ expected
    torch.testing.assert_close(rolled, expected)
    torch.testing.assert_close(attention_rollout(layers[:1], residual=False), layers[0].mean(dim=1))


def test_rollout_rejects_bad_input():
    with pytest.raises(TypeError, match="expected a non-empty list"):
        attention_rollout([])
    with pytest.raises(TypeError, match="got Tensor"):
        attention_rollout(torch.rand(2, 3, 4, 4))
    with pytest.raises(ValueError, match=r"like layer 0, got \(3, 5, 5\) at layer 1"):
        attention_rollout([torch.rand(3, 4, 4), torch.rand(3, 5, 5)])
    with pytest.raises(ValueError, match=r"got \(3, 4, 5\) at layer 0"):
        attention_rollout([torch.rand(3, 4, 5)])


# --- ablation ---------------------------------------------------------------------------------------


def reference_without_heads(model, input_ids, heads):
    """The same model with the heads' columns of W_O set to zero in a copy: the weights route, no hooks."""
    import copy  # noqa: PLC0415

    pruned = copy.deepcopy(model)
    d_k = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        for layer, head in heads:
            pruned.encoder.layer[layer].attention.output.dense.weight[:, head * d_k:(head + 1) * d_k] = 0
        return pruned(input_ids=input_ids).last_hidden_state


@pytest.mark.parametrize("heads", [[(1, 2)], [(0, 0), (2, 3), (2, 1)]])
def test_ablation_equals_zeroing_the_heads_columns_of_w_o(heads):
    model, input_ids = small_bert(), ids()
    expected = reference_without_heads(model, input_ids, heads)
    with ablate_heads(model, heads), torch.no_grad():
        got = model(input_ids=input_ids).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)
    with torch.no_grad():
        intact = model(input_ids=input_ids).last_hidden_state
    assert not torch.allclose(got, intact, atol=1e-3)


def test_ablation_by_rows_equals_one_ablation_per_copy():
    model, input_ids = small_bert(), ids(batch=1)
    heads = [(0, 1), (2, 3), (1, 0)]
    copies = input_ids.repeat(len(heads) + 1, 1)  # the last row keeps every head
    with ablate_heads(model, heads, rows=range(len(heads))), torch.no_grad():
        together = model(input_ids=copies).last_hidden_state
    for row, head in enumerate(heads):
        with ablate_heads(model, [head]), torch.no_grad():
            alone = model(input_ids=input_ids).last_hidden_state[0]
        torch.testing.assert_close(together[row], alone, rtol=0, atol=1e-5)
    with torch.no_grad():
        torch.testing.assert_close(together[-1], model(input_ids=input_ids).last_hidden_state[0], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="expected rows as 3 batch indices"):
        with ablate_heads(model, heads, rows=[0, 1]):
            pass


def test_ablation_hooks_are_removed_even_after_an_error():
    model, input_ids = small_bert(), ids()
    with torch.no_grad():
        before = model(input_ids=input_ids).last_hidden_state
    with pytest.raises(RuntimeError, match="inside"), ablate_heads(model, [(0, 1)]):
        raise RuntimeError("inside")
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=input_ids).last_hidden_state, before, rtol=0, atol=0)
    assert all(not layer.attention.output.dense._forward_pre_hooks for layer in model.encoder.layer)


@pytest.mark.parametrize(("heads", "error", "message"), [
    ([(3, 0)], ValueError, r"layer in \[0, 2\] and head in \[0, 3\], got \(3, 0\)"),
    ([(0, 4)], ValueError, r"got \(0, 4\)"),
    ([(0,)], TypeError, r"expected heads as \(layer, head\) pairs of ints"),
    ([(0, 1.0)], TypeError, "pairs of ints"),
    ([(True, 1)], TypeError, "pairs of ints"),
])
def test_ablation_rejects_bad_heads(heads, error, message):
    model = small_bert()
    with pytest.raises(error, match=message), ablate_heads(model, heads):
        pass
    assert all(not layer.attention.output.dense._forward_pre_hooks for layer in model.encoder.layer)


def test_ablation_rejects_a_model_that_is_not_bert():
    with pytest.raises(TypeError, match="expected a transformers BertModel"), ablate_heads(torch.nn.Linear(2, 2), []):
        pass


# --- the projections attnlib.models reads --------------------------------------------------------


def test_queries_keys_values_match_transformers_internals():
    model, input_ids = small_bert(), ids()
    queries, keys = queries_keys_from_weights(model, input_ids)
    values = values_from_weights(model, input_ids)
    hidden = layer_inputs(model, input_ids)
    assert len(queries) == len(keys) == len(values) == 3
    for layer, h in enumerate(hidden):
        self_attention = model.encoder.layer[layer].attention.self
        with torch.no_grad():
            for got, linear in ((queries[layer], self_attention.query), (keys[layer], self_attention.key),
                                (values[layer], self_attention.value)):
                expected = linear(h).view(2, 7, 4, 8).transpose(1, 2)  # (B, H, L, Dk), transformers' own split
                assert got.shape == (2, 4, 7, 8)
                torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_queries_and_keys_give_attention_from_weights():
    model, input_ids = small_bert(seed=3), ids(seed=4)
    queries, keys = queries_keys_from_weights(model, input_ids)
    for q, k, a in zip(queries, keys, attention_from_weights(model, input_ids), strict=True):
        torch.testing.assert_close(torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, dim=-1), a, rtol=0, atol=1e-6)


def test_queries_keys_check_their_input():
    with pytest.raises(TypeError, match="expected a transformers BertModel"):
        queries_keys_from_weights(torch.nn.Linear(2, 2), ids())
    with pytest.raises(ValueError, match="expected token ids in"):
        queries_keys_from_weights(small_bert(), torch.full((1, 3), 99))
    with pytest.raises(ValueError, match=r"expected a layer index in \[0, 2\], got 3"):
        output_projection(small_bert(), 3)


def test_mean_pooled_embedding_ignores_padding():
    model = small_bert()
    input_ids = ids(batch=1, length=5)
    padded = torch.cat([input_ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.tensor([[1] * 5 + [0] * 3])
    alone = mean_pooled_embedding(model, input_ids)
    torch.testing.assert_close(mean_pooled_embedding(model, padded, mask), alone, rtol=0, atol=1e-5)
    with torch.no_grad():
        last = model(input_ids=input_ids).last_hidden_state
    torch.testing.assert_close(alone, last.mean(dim=1), rtol=0, atol=1e-6)
