"""attnlib.interpret (norms, rollout, ablation, circuits) and the projections attnlib.models reads.

References are written independently here: an explicit loop for the norms, a rollout worked out by
hand, a copy with the head's columns of W_O zeroed (or its mean moved into the bias) for the ablation,
the attention-only decoder's forward pass written out head by head, the circuits read off the model's
own modules on basis vectors, matrices and hand-built models whose scores are known, and transformers'
BERT internals for the queries, keys and values.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from attnlib.induction import AttentionOnlyTransformer, repeat_loss, repeated_tokens  # noqa: E402
from attnlib.interpret import (  # noqa: E402
    ablate_heads,
    ablation_loss,
    attention_rollout,
    composition_score,
    copying_score,
    head_means,
    head_outputs,
    k_composition_circuit,
    mean_ablate_heads,
    ov_circuit,
    ov_matrix,
    patch_heads,
    qk_matrix,
    top1_copying,
    value_weighted_norms,
)
from attnlib.models import (  # noqa: E402
    attention_from_weights,
    layer_inputs,
    mean_pooled_embedding,
    output_projection,
    queries_keys_from_weights,
    values_from_weights,
)
from tests.lib.tensors import randn  # noqa: E402
from tests.lib.test_models import small_bert  # noqa: E402 - the seeded small BertModel the model tests build


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
    with pytest.raises(ValueError, match=r"expected rows as one batch row \(an int >= 0\) per head, 3 of them"):
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


def test_patching_a_head_equals_running_it_on_the_source_by_hand():
    model, target, source = small_bert(), ids(batch=1, seed=1), ids(batch=1, seed=2)
    layer, head = 1, 2
    d_k = model.config.hidden_size // model.config.num_attention_heads
    recorded = {}
    dense = model.encoder.layer[layer].attention.output.dense
    handle = dense.register_forward_pre_hook(lambda _m, inputs: recorded.setdefault("source", inputs[0].clone()))
    with torch.no_grad():
        model(input_ids=source)
    handle.remove()
    columns = slice(head * d_k, (head + 1) * d_k)

    def swap(_module, inputs):  # the reference: the head's columns of W_O's input taken from the source run
        context = inputs[0].clone()
        context[..., columns] = recorded["source"][..., columns]
        return (context,)

    handle = dense.register_forward_pre_hook(swap)
    with torch.no_grad():
        expected = model(input_ids=target).last_hidden_state
    handle.remove()
    with patch_heads(model, [(layer, head)], head_outputs(model, source)), torch.no_grad():
        got = model(input_ids=target).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    with torch.no_grad():
        intact = model(input_ids=target).last_hidden_state
    assert not torch.allclose(got, intact, atol=1e-4)


def test_patching_from_the_input_itself_changes_nothing_and_rows_patch_one_copy_each():
    model, target, source = small_bert(), ids(batch=1, seed=1), ids(batch=1, seed=2)
    heads = [(0, 1), (2, 3)]
    recorded = head_outputs(model, source)  # one row: patched into every row of a batch, or into one each
    with torch.no_grad():
        intact = model(input_ids=target).last_hidden_state
    with patch_heads(model, heads, head_outputs(model, target)), torch.no_grad():
        torch.testing.assert_close(model(input_ids=target).last_hidden_state, intact, rtol=0, atol=1e-6)
    with patch_heads(model, heads, recorded, rows=range(2)), torch.no_grad():
        together = model(input_ids=target.repeat(3, 1)).last_hidden_state
    for row, head in enumerate(heads):
        with patch_heads(model, [head], recorded), torch.no_grad():
            torch.testing.assert_close(together[row], model(input_ids=target).last_hidden_state[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(together[-1], intact[0], rtol=0, atol=1e-5)


def test_patching_rejects_a_source_of_another_length_and_rows_that_do_not_fit():
    model = small_bert()
    recorded = head_outputs(model, ids(batch=1))  # (layers, 1, H, 7, Dk)
    with pytest.raises(ValueError, match=r"expected an input of \(1, 7\) .* got \(1, 5\)"):
        with patch_heads(model, [(0, 0)], recorded), torch.no_grad():
            model(input_ids=ids(batch=1, length=5))
    with pytest.raises(ValueError, match=r"one batch row \(an int >= 0\) per head, 2 of them, got \[0\]"):
        with patch_heads(model, [(0, 0), (1, 1)], recorded, rows=[0]):
            pass
    with pytest.raises(ValueError, match="expected a batch of more than 3 rows .* got 2"):
        with patch_heads(model, [(0, 0)], recorded, rows=[3]), torch.no_grad():
            model(input_ids=ids(batch=2))


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


# --- ablation of the attention-only transformer, against a forward pass written out head by head ------------


def tiny_decoder(seed=0, num_kv_heads=None):
    torch.manual_seed(seed)
    return AttentionOnlyTransformer(vocab_size=13, d_model=12, num_heads=3, num_layers=2, max_length=20,
                                    num_kv_heads=num_kv_heads).double()


def loop_forward(model, tokens, replace=None):
    """The decoder's logits (B, L, vocab) and head outputs {(layer, head): (B, L, Dk)}, one head at a time.

    ``replace`` maps (layer, head) to what that head outputs instead: 0 or a tensor broadcasting to (B, L, Dk).
    """
    replace = replace or {}
    length = tokens.shape[1]
    x = model.embed.weight[tokens] + model.position.weight[:length]  # (B, L, D)
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    outputs = {}
    for index, attn in enumerate(model.layers):
        d_k = attn.embed_dim // attn.num_heads
        group = attn.num_heads // attn.num_kv_heads
        pieces = []
        for h in range(attn.num_heads):
            cols, kv = slice(h * d_k, (h + 1) * d_k), slice((h // group) * d_k, (h // group + 1) * d_k)
            q, k, v = x @ attn.q_proj.weight[cols].T, x @ attn.k_proj.weight[kv].T, x @ attn.v_proj.weight[kv].T
            scores = (q @ k.transpose(1, 2) / d_k**0.5).masked_fill(future, float("-inf"))
            outputs[index, h] = torch.softmax(scores, dim=-1) @ v  # (B, L, Dk)
            pieces.append(replace[index, h] * torch.ones_like(outputs[index, h]) if (index, h) in replace
                          else outputs[index, h])
        x = x + torch.cat(pieces, dim=-1) @ attn.out_proj.weight.T
    return model.unembed(x), outputs


def decoder_tokens(batch=4, half=6, seed=2):
    return repeated_tokens(batch, half, 13, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("num_kv_heads", [None, 1])
def test_head_outputs_equal_the_loop(num_kv_heads):
    model, tokens = tiny_decoder(num_kv_heads=num_kv_heads), decoder_tokens()
    got = head_outputs(model, tokens)
    assert got.shape == (2, 4, 3, 12, 4)  # (layers, B, H, L, Dk)
    with torch.no_grad():
        logits, expected = loop_forward(model, tokens)
        torch.testing.assert_close(logits, model(tokens)[0], rtol=0, atol=1e-12)  # the loop is the model
    for (layer, head), out in expected.items():
        torch.testing.assert_close(got[layer, :, head], out, rtol=0, atol=1e-12)


@pytest.mark.parametrize("heads", [[(1, 2)], [(0, 0), (1, 1)]])
def test_zero_ablation_of_the_decoder_equals_the_loop(heads):
    model, tokens = tiny_decoder(), decoder_tokens()
    with ablate_heads(model, heads), torch.no_grad():
        got = model(tokens)[0]
    with torch.no_grad():
        expected, _ = loop_forward(model, tokens, {pair: 0.0 for pair in heads})
        intact = model(tokens)[0]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    assert not torch.allclose(got, intact, atol=1e-3)


@pytest.mark.parametrize("per_position", [True, False])
def test_mean_ablation_equals_the_loop_with_the_reference_means(per_position):
    model, tokens = tiny_decoder(), decoder_tokens()
    reference = torch.randint(13, (9, 14), generator=torch.Generator().manual_seed(5))  # longer than tokens
    with torch.no_grad():
        _, ref_outputs = loop_forward(model, reference)
    means = {pair: out.mean(dim=0)[:12] if per_position else out.mean(dim=(0, 1))
             for pair, out in ref_outputs.items()}  # (L, Dk) or (Dk,)
    heads = [(0, 1), (1, 0)]
    with mean_ablate_heads(model, heads, reference, per_position=per_position), torch.no_grad():
        got = model(tokens)[0]
    with torch.no_grad():
        expected, _ = loop_forward(model, tokens, {pair: means[pair] for pair in heads})
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    stacked = head_means(model, reference, per_position)
    assert stacked.shape == ((2, 3, 14, 4) if per_position else (2, 3, 4))


def test_mean_ablating_a_last_layer_head_on_its_own_batch_keeps_the_mean_logits():
    """Logits are linear in the last layer's head outputs: their batch mean cannot move, the logits do."""
    model, tokens = tiny_decoder(seed=3), decoder_tokens(batch=8)
    with torch.no_grad():
        intact = model(tokens)[0]
    with mean_ablate_heads(model, [(1, 2)], tokens), torch.no_grad():
        ablated = model(tokens)[0]
    torch.testing.assert_close(ablated.mean(dim=0), intact.mean(dim=0), rtol=0, atol=1e-12)
    assert not torch.allclose(ablated, intact, atol=1e-3)


def test_mean_ablation_per_position_refuses_inputs_longer_than_the_reference():
    model = tiny_decoder()
    with pytest.raises(ValueError, match="expected inputs of at most 5 positions.* got 12"):
        with mean_ablate_heads(model, [(0, 0)], decoder_tokens()[:, :5]):
            model(decoder_tokens())
    assert all(not layer.out_proj._forward_pre_hooks for layer in model.layers)


def test_patching_a_first_layer_head_equals_the_loop_with_its_output_swapped_at_those_positions():
    model, clean = tiny_decoder(), decoder_tokens(seed=2)
    corrupt = decoder_tokens(seed=3)
    with torch.no_grad():
        _, clean_outputs = loop_forward(model, clean)
        _, corrupt_outputs = loop_forward(model, corrupt)
        swapped = corrupt_outputs[0, 1].clone()
        swapped[:, [2, 5]] = clean_outputs[0, 1][:, [2, 5]]  # layer 0 does not depend on the patch
        expected, _ = loop_forward(model, corrupt, {(0, 1): swapped})
        with patch_heads(model, [(0, 1)], head_outputs(model, clean), positions=[2, 5]):
            got = model(corrupt)[0]
        plain = model(corrupt)[0]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    assert not torch.allclose(got, plain, atol=1e-3)
    assert all(not layer.out_proj._forward_pre_hooks for layer in model.layers)


def test_patching_a_last_layer_head_everywhere_equals_the_loop_with_its_clean_output():
    model, clean, corrupt = tiny_decoder(seed=1), decoder_tokens(seed=4), decoder_tokens(seed=5)
    with torch.no_grad():
        _, clean_outputs = loop_forward(model, clean)
        expected, _ = loop_forward(model, corrupt, {(1, 2): clean_outputs[1, 2]})
        with patch_heads(model, [(1, 2)], head_outputs(model, clean)):
            got = model(corrupt)[0]
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_patching_with_the_runs_own_outputs_changes_nothing():
    model, tokens = tiny_decoder(seed=2), decoder_tokens(seed=6)
    with torch.no_grad():
        plain = model(tokens)[0]
        with patch_heads(model, [(0, 0), (1, 1)], head_outputs(model, tokens), positions=[0, 3]):
            patched = model(tokens)[0]
    torch.testing.assert_close(patched, plain, rtol=0, atol=1e-12)


def test_patching_checks_its_input_and_removes_its_hooks():
    model, tokens = tiny_decoder(), decoder_tokens()
    source = head_outputs(model, tokens)  # (2, 4, 3, 12, 4)
    with pytest.raises(ValueError, match=r"expected source from head_outputs.* got \(4, 3, 12, 4\)"):
        with patch_heads(model, [(0, 0)], source[0]):
            pass
    with pytest.raises(ValueError, match=r"expected positions as ints in \[0, 11\], got \[12\]"):
        with patch_heads(model, [(0, 0)], source, positions=[12]):
            pass
    with pytest.raises(ValueError, match=r"expected \(layer, head\) with layer in \[0, 1\]"):
        with patch_heads(model, [(2, 0)], source):
            pass
    with pytest.raises(ValueError, match=r"expected an input of \(4, 12\) .* got \(4, 5\)"):
        with patch_heads(model, [(0, 0)], source), torch.no_grad():
            model(tokens[:, :5])
    assert all(not layer.out_proj._forward_pre_hooks for layer in model.layers)


def test_ablation_loss_is_the_repeat_loss_of_the_ablated_loop():
    model, tokens = tiny_decoder(), decoder_tokens(half=6)
    with torch.no_grad():
        plain, _ = loop_forward(model, tokens[:, :-1])
        zeroed, _ = loop_forward(model, tokens[:, :-1], {(1, 0): 0.0, (1, 2): 0.0})
    assert ablation_loss(model, tokens, 6) == pytest.approx(repeat_loss(plain, tokens, 6).item(), abs=1e-12)
    assert ablation_loss(model, tokens, 6, [(1, 0), (1, 2)]) == pytest.approx(
        repeat_loss(zeroed, tokens, 6).item(), abs=1e-12)
    reference = decoder_tokens(batch=16, seed=7)
    with mean_ablate_heads(model, [(0, 1)], reference), torch.no_grad():
        expected = repeat_loss(model(tokens[:, :-1])[0], tokens, 6).item()
    assert ablation_loss(model, tokens, 6, [(0, 1)], reference=reference) == pytest.approx(expected, abs=1e-12)


def test_ablation_loss_checks_its_input():
    model = tiny_decoder()
    with pytest.raises(ValueError, match=r"shape \(B, 2 \* half\) = \(B, 10\), got \(4, 12\)"):
        ablation_loss(model, decoder_tokens(half=6), 5)
    with pytest.raises(TypeError, match="expected an attnlib AttentionOnlyTransformer, got BertModel"):
        ablation_loss(small_bert(), decoder_tokens(), 6)
    with pytest.raises(ValueError, match=r"layer in \[0, 1\] and head in \[0, 2\], got \(2, 0\)"):
        ablation_loss(model, decoder_tokens(), 6, [(2, 0)])


def test_bert_mean_ablation_equals_moving_the_heads_mean_into_the_bias():
    """Over positions too, the mean is a constant c: the head's W_O columns go to 0 and c W_O^h into the bias."""
    import copy  # noqa: PLC0415

    model, input_ids, reference = small_bert(), ids(), ids(batch=5, seed=8)
    mean = head_means(model, reference, per_position=False)[1, 2]  # (Dk,) of layer 1, head 2
    routed = copy.deepcopy(model)
    dense = routed.encoder.layer[1].attention.output.dense
    with torch.no_grad():
        dense.bias += mean @ dense.weight[:, 16:24].T
        dense.weight[:, 16:24] = 0
        expected = routed(input_ids=input_ids).last_hidden_state
    with mean_ablate_heads(model, [(1, 2)], reference, per_position=False), torch.no_grad():
        got = model(input_ids=input_ids).last_hidden_state
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-5)


# --- circuits (Elhage et al. 2021) -----------------------------------------------------------------------------


def unit(i, size=12):
    return torch.eye(size, dtype=torch.float64)[i]


def head_slice(vector, head, d_k=4):
    """vector (..., H*Dk) with every head's slice but one set to zero."""
    kept = torch.zeros_like(vector)
    kept[..., head * d_k:(head + 1) * d_k] = vector[..., head * d_k:(head + 1) * d_k]
    return kept


def modules_qk(model, layer, head, read_q=lambda x: x, read_k=lambda x: x):
    """[i, j] = query of read_q(e_i) · key of read_k(e_j), through the model's own nn.Linear modules."""
    attn, basis = model.layers[layer], torch.eye(12, dtype=torch.float64)
    with torch.no_grad():
        q = head_slice(attn.q_proj(read_q(basis)), head)  # (D, H*Dk), row i: the query of e_i
        k = head_slice(attn.k_proj(read_k(basis)), head)
    return q @ k.T


def modules_ov(model, layer, head):
    """Row i: what the head writes for value input e_i (all weight on it), through the modules."""
    attn = model.layers[layer]
    with torch.no_grad():
        return attn.out_proj(head_slice(attn.v_proj(torch.eye(12, dtype=torch.float64)), head))


def test_circuit_matrices_equal_the_models_modules_on_basis_vectors():
    model = tiny_decoder(seed=4)
    for layer in range(2):
        for head in range(3):
            torch.testing.assert_close(qk_matrix(model, layer, head), modules_qk(model, layer, head))
            torch.testing.assert_close(ov_matrix(model, layer, head), modules_ov(model, layer, head))
    with torch.no_grad():
        attended = model.embed.weight @ modules_ov(model, 1, 2)  # (vocab, D): the head's output for each token
        expected = model.unembed(attended)  # (vocab, vocab)
    assert ov_circuit(model, 1, 2).shape == (13, 13)
    torch.testing.assert_close(ov_circuit(model, 1, 2), expected)


def test_grouped_heads_read_their_shared_key_and_value_head():
    model = tiny_decoder(num_kv_heads=1)
    attn = model.layers[0]
    with torch.no_grad():
        v = attn.v_proj(torch.eye(12, dtype=torch.float64))  # (D, Dk): the one value head
        for head in range(3):
            w_o = attn.out_proj.weight[:, head * 4:(head + 1) * 4].T  # (Dk, D): this head's rows of W_O
            torch.testing.assert_close(ov_matrix(model, 0, head), v @ w_o)


def test_copying_scores_of_matrices_whose_answer_is_known():
    identity, cycle = torch.eye(5, dtype=torch.float64), torch.roll(torch.eye(5, dtype=torch.float64), 1, dims=1)
    assert copying_score(identity) == pytest.approx(1) and top1_copying(identity) == 1
    assert copying_score(-identity) == pytest.approx(-1) and top1_copying(-identity) == 0
    assert copying_score(cycle) == pytest.approx(0, abs=1e-12)  # the 5th roots of unity sum to 0
    assert top1_copying(cycle) == 0  # token a raises the logit of a + 1
    low_rank = torch.diag(torch.tensor([3.0, 1.0, 0.0, 0.0], dtype=torch.float64))
    assert copying_score(low_rank) == pytest.approx(1)  # zero eigenvalues count for nothing


def test_copying_score_equals_an_explicit_eigenvalue_loop():
    import numpy as np  # noqa: PLC0415

    for seed in range(4):
        matrix = randn(7, 7, seed=seed) + seed * torch.eye(7, dtype=torch.float64)
        eigenvalues = np.linalg.eigvals(matrix.numpy())
        numerator, denominator = 0.0, 0.0
        for value in eigenvalues:
            numerator += value.real
            denominator += abs(value)
        assert copying_score(matrix) == pytest.approx(numerator / denominator, abs=1e-10)
        rows = [int(np.argmax(matrix[i].numpy()) == i) for i in range(7)]
        assert top1_copying(matrix) == pytest.approx(sum(rows) / 7)


def copying_decoder():
    """One head of width D = vocab whose W_V = W_O = I, with W_E = W_U = I: its OV circuit is the identity."""
    model = AttentionOnlyTransformer(vocab_size=4, d_model=4, num_heads=1, num_layers=2, max_length=8).double()
    with torch.no_grad():
        for weight in (model.embed.weight, model.unembed.weight, model.layers[0].v_proj.weight,
                       model.layers[0].out_proj.weight):
            weight.copy_(torch.eye(4))
    return model


def test_a_decoder_built_to_copy_scores_one():
    model = copying_decoder()
    torch.testing.assert_close(ov_circuit(model, 0, 0), torch.eye(4, dtype=torch.float64))
    assert copying_score(ov_circuit(model, 0, 0)) == 1 and top1_copying(ov_circuit(model, 0, 0)) == 1


def test_composition_scores_equal_the_loop_over_basis_vectors():
    model = tiny_decoder(seed=6)
    norm = torch.linalg.matrix_norm
    for earlier in ((0, 0), (0, 2)):
        w_ov = modules_ov(model, *earlier)  # (D, D)
        k_read = modules_qk(model, 1, 1, read_k=lambda x, w=w_ov: x @ w)  # keys read e_j W_OV
        q_read = modules_qk(model, 1, 1, read_q=lambda x, w=w_ov: x @ w)  # queries read e_i W_OV
        with torch.no_grad():
            attn = model.layers[1]
            v_read = attn.out_proj(head_slice(attn.v_proj(w_ov), 1))  # values read e_i W_OV
        qk, ov = modules_qk(model, 1, 1), modules_ov(model, 1, 1)
        for kind, composed, other in (("k", k_read, qk), ("q", q_read, qk), ("v", v_read, ov)):
            expected = float(norm(composed) / (norm(other) * norm(w_ov)))
            assert composition_score(model, earlier, (1, 1), kind) == pytest.approx(expected, rel=1e-10)
            assert 0 < expected < 1


def test_composition_of_hand_built_heads_is_one_when_aligned_and_zero_when_not():
    """Layer 0 writes e_1 for input e_0 (rank 1): a layer-1 key reading e_1 composes fully, one reading e_2 not."""
    model = AttentionOnlyTransformer(vocab_size=4, d_model=4, num_heads=1, num_layers=2, max_length=8).double()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.layers[0].v_proj.weight[0, 0] = 2.0  # W_V: reads e_0 into the head's coordinate 0
        model.layers[0].out_proj.weight[1, 0] = 1.5  # W_O: writes coordinate 0 to e_1
        model.layers[1].q_proj.weight[0, 3] = 1.0  # the query reads e_3
        model.layers[1].k_proj.weight[0, 1] = 0.5  # the key reads e_1: what layer 0 wrote
    assert composition_score(model, (0, 0), (1, 0), "k") == pytest.approx(1)
    assert composition_score(model, (0, 0), (1, 0), "q") == 0  # the query reads e_3, which nobody writes
    with torch.no_grad():
        model.layers[1].k_proj.weight[0, 1], model.layers[1].k_proj.weight[0, 2] = 0.0, 0.5  # now reads e_2
    assert composition_score(model, (0, 0), (1, 0), "k") == 0


def test_k_composition_circuit_equals_the_modules_on_token_embeddings():
    """[a, b]: the later head's query of e_a against its key of what the earlier head writes for e_b."""
    model = tiny_decoder(seed=7)
    for earlier, later in (((0, 0), (1, 2)), ((0, 2), (1, 1))):
        attn = model.layers[1]
        with torch.no_grad():
            written = model.embed.weight @ modules_ov(model, *earlier)  # (vocab, D): the earlier head's output
            q = head_slice(attn.q_proj(model.embed.weight), later[1])  # (vocab, H*Dk)
            k = head_slice(attn.k_proj(written), later[1])
        expected = q @ k.T / 4**0.5
        got = k_composition_circuit(model, earlier, later)
        assert got.shape == (13, 13)
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)


def test_k_composition_circuit_of_hand_built_heads_matches_each_token_to_itself():
    """Layer 0 copies e_b to other coordinates, the later key reads them, the query reads e_a: [a, b] = [a = b] / 2."""
    model = AttentionOnlyTransformer(vocab_size=2, d_model=4, num_heads=1, num_layers=2, max_length=8).double()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.weight[0, 0] = model.embed.weight[1, 1] = 1.0  # token t: e_t
        model.layers[0].v_proj.weight[:2, :2] = torch.eye(2)  # the head reads coordinates 0, 1
        model.layers[0].out_proj.weight[2:, :2] = torch.eye(2)  # and writes them to 2, 3
        model.layers[1].q_proj.weight[:2, :2] = torch.eye(2)  # the query reads the token
        model.layers[1].k_proj.weight[:2, 2:] = torch.eye(2)  # the key reads what layer 0 wrote
    torch.testing.assert_close(k_composition_circuit(model, (0, 0), (1, 0)), torch.eye(2, dtype=torch.float64) / 2)
    with pytest.raises(ValueError, match=r"expected the earlier head in a lower layer.* got \(1, 0\) and \(0, 0\)"):
        k_composition_circuit(model, (1, 0), (0, 0))


def test_circuits_check_their_input():
    model = tiny_decoder()
    with pytest.raises(ValueError, match=r"expected the earlier head in a lower layer.* got \(1, 0\) and \(1, 2\)"):
        composition_score(model, (1, 0), (1, 2))
    with pytest.raises(ValueError, match="expected kind 'q', 'k' or 'v', got 'o'"):
        composition_score(model, (0, 0), (1, 2), kind="o")
    with pytest.raises(ValueError, match=r"got \(0, 3\)"):
        ov_circuit(model, 0, 3)
    with pytest.raises(TypeError, match="expected an attnlib AttentionOnlyTransformer, got BertModel"):
        qk_matrix(small_bert(), 0, 0)
    with pytest.raises(ValueError, match=r"expected circuit of shape \(N, N\), got \(3, 4\)"):
        copying_score(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="eigenvalues are all 0"):
        copying_score(torch.zeros(3, 3))
    with pytest.raises(TypeError, match="expected circuit to be a torch.Tensor"):
        top1_copying([[1.0]])
