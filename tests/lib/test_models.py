"""attnlib.models against transformers' own BERT attention (output_attentions, eager).

The reference is code nobody here wrote: ``BertModel(..., output_attentions=True)``. We compare on
the pretrained MiniLM and on small randomly initialised BertModels with padded batches.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

transformers = pytest.importorskip("transformers")
from transformers import BertConfig, BertForMaskedLM, BertModel  # noqa: E402

from attnlib.models import (  # noqa: E402
    attention_from_weights,
    key_mask,
    layer_attention,
    layer_inputs,
    load_minilm,
)
from attnlib.softmax import causal_mask, padding_mask  # noqa: E402

ATOL = 1e-5
SENTENCE = "Mark told Sam that he was leaving."


@pytest.fixture(scope="module")
def minilm():
    return load_minilm()


def small_bert(seed=0, **overrides) -> BertModel:
    """A seeded random BertModel small enough to build in milliseconds, eager attention."""
    settings_ = dict(vocab_size=60, hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                     intermediate_size=48, max_position_embeddings=24)
    settings_.update(overrides)
    torch.manual_seed(seed)
    config = BertConfig(**settings_)
    config._attn_implementation = "eager"
    return BertModel(config).eval()


def reference(model, input_ids, attention_mask=None, **kwargs):
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True, **kwargs)
    return out.attentions


def assert_equal_on_real_tokens(ours, theirs, attention_mask):
    """Compare every layer on the (query, key) pairs where both are real tokens."""
    assert len(ours) == len(theirs)
    keep = attention_mask.bool()
    for layer, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a.shape == b.shape, f"layer {layer}"
        for i in range(a.shape[0]):
            real = keep[i]
            got, want = a[i][:, real][:, :, real], b[i][:, real][:, :, real]
            torch.testing.assert_close(got, want, atol=ATOL, rtol=0, msg=f"layer {layer}, sequence {i}")


def random_batch(lengths, vocab=60, seed=0, left=False):
    """Token ids (B, max(lengths)) padded with id 0, and the tokenizer-style 0/1 attention mask."""
    generator = torch.Generator().manual_seed(seed)
    length = max(lengths)
    ids = torch.randint(1, vocab, (len(lengths), length), generator=generator)
    mask = padding_mask(lengths, length)[:, 0, 0, :].long()  # (B, L)
    if left:
        mask = mask.flip(-1)
    return ids * mask, mask


# --- the pretrained MiniLM ---------------------------------------------------------------------------


def test_minilm_loads_offline_as_eager_bert(minilm):
    tokenizer, model = minilm
    assert isinstance(model, BertModel)
    assert model.config._attn_implementation == "eager"
    assert not model.training
    assert (model.config.num_hidden_layers, model.config.num_attention_heads, model.config.hidden_size) == (6, 12, 384)
    ids = tokenizer(SENTENCE)["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids)[0] == "[CLS]"
    assert load_minilm() is minilm  # cached: the second call loads nothing


@pytest.mark.slow  # a fresh interpreter imports transformers and loads MiniLM: ~13 s of CPU
def test_loading_prints_nothing():
    """No warnings or progress bars on stdout/stderr: they would leak into the chapter's outputs."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    code = "from attnlib.models import load_minilm; load_minilm()"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert done.stderr == ""


def test_minilm_sentence_matches_output_attentions(minilm):
    tokenizer, model = minilm
    enc = tokenizer(SENTENCE, return_tensors="pt")
    ours = attention_from_weights(model, enc["input_ids"], enc["attention_mask"])
    theirs = reference(model, enc["input_ids"], enc["attention_mask"])
    assert len(ours) == 6
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == (1, 12, 10, 10)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_minilm_padded_batch_matches_on_real_tokens(minilm):
    tokenizer, model = minilm
    enc = tokenizer([SENTENCE, "Hi.", "Attention is all you need, they said."], return_tensors="pt", padding=True)
    assert (enc["attention_mask"] == 0).any()  # the batch really is padded
    ours = attention_from_weights(model, enc["input_ids"], enc["attention_mask"])
    assert_equal_on_real_tokens(ours, reference(model, enc["input_ids"], enc["attention_mask"]),
                                enc["attention_mask"])


def test_minilm_batch_rows_equal_single_sentences(minilm):
    """Padding must not change a sentence's attention among its real tokens."""
    tokenizer, model = minilm
    texts = [SENTENCE, "Hi."]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    batched = attention_from_weights(model, enc["input_ids"], enc["attention_mask"])
    for i, text in enumerate(texts):
        alone = attention_from_weights(model, tokenizer(text, return_tensors="pt")["input_ids"])
        n = alone[0].shape[-1]
        for a, b in zip(batched, alone, strict=True):
            torch.testing.assert_close(a[i, :, :n, :n], b[0], atol=ATOL, rtol=0)


# --- small random BertModels --------------------------------------------------------------------------


def test_random_bert_padded_batch_matches():
    model = small_bert(seed=1)
    ids, mask = random_batch([9, 4, 7, 1], seed=2)
    ours = attention_from_weights(model, ids, mask)
    assert len(ours) == 3 and ours[0].shape == (4, 4, 9, 9)
    assert_equal_on_real_tokens(ours, reference(model, ids, mask), mask)


def test_padded_keys_get_zero_weight_and_rows_sum_to_one():
    model = small_bert(seed=3)
    ids, mask = random_batch([6, 3], seed=4)
    for weights in attention_from_weights(model, ids, mask):
        assert torch.all(weights[1, :, :, 3:] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))


def test_sequence_without_real_tokens_gets_zero_weights():
    ids, mask = random_batch([4, 4], seed=19)
    mask[1] = 0
    for weights in attention_from_weights(small_bert(seed=19), ids, mask):
        assert torch.all(weights[1] == 0) and torch.all(weights[0].sum(-1) > 0.99)


def test_left_padding_matches():
    model = small_bert(seed=5)
    ids, mask = random_batch([8, 5, 2], seed=6, left=True)
    assert mask[1, 0] == 0 and mask[1, -1] == 1
    assert_equal_on_real_tokens(attention_from_weights(model, ids, mask), reference(model, ids, mask), mask)


def test_token_type_ids_are_used():
    model = small_bert(seed=7)
    ids, mask = random_batch([8, 8], seed=8)
    types = torch.tensor([[0] * 4 + [1] * 4, [0] * 8])
    ours = attention_from_weights(model, ids, mask, token_type_ids=types)
    assert_equal_on_real_tokens(ours, reference(model, ids, mask, token_type_ids=types), mask)


def test_decoder_configuration_is_causal():
    model = small_bert(seed=9, is_decoder=True, use_cache=False)
    ids, mask = random_batch([7, 5], seed=10)
    ours = attention_from_weights(model, ids, mask)
    assert torch.all(ours[0][0].triu(diagonal=1) == 0)
    assert_equal_on_real_tokens(ours, reference(model, ids, mask), mask)


def test_training_mode_is_restored_and_dropout_ignored():
    model = small_bert(seed=11, attention_probs_dropout_prob=0.5, hidden_dropout_prob=0.5)
    ids, mask = random_batch([6, 4], seed=12)
    expected = attention_from_weights(model, ids, mask)
    model.train()
    got = attention_from_weights(model, ids, mask)
    assert model.training
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b, atol=0, rtol=0)


def test_sdpa_model_matches_its_eager_twin():
    """attnlib reads only weights and hidden states, so a model on the fused SDPA path works too."""
    eager = small_bert(seed=17)
    sdpa = small_bert(seed=17)
    sdpa.set_attn_implementation("sdpa")
    assert sdpa.config._attn_implementation == "sdpa"
    ids, mask = random_batch([8, 5], seed=18)
    assert_equal_on_real_tokens(attention_from_weights(sdpa, ids, mask), reference(eager, ids, mask), mask)


def test_larger_model_without_mask_matches():
    model = small_bert(seed=13, hidden_size=96, num_attention_heads=6, num_hidden_layers=2, intermediate_size=64,
                       vocab_size=100, max_position_embeddings=40)
    ids, _ = random_batch([33, 33], vocab=100, seed=14)
    ours = attention_from_weights(model, ids)
    for a, b in zip(ours, reference(model, ids), strict=True):
        assert a.shape == (2, 6, 33, 33)
        torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4), seed=st.integers(0, 1000),
       heads=st.sampled_from([1, 2, 4, 8]))
def test_any_padded_batch_matches(lengths, seed, heads):
    model = small_bert(seed=seed, num_attention_heads=heads, num_hidden_layers=2)
    ids, mask = random_batch(lengths, seed=seed)
    assert_equal_on_real_tokens(attention_from_weights(model, ids, mask), reference(model, ids, mask), mask)


def test_layer_attention_from_layer_inputs_matches_each_layer():
    """The two building blocks, used by hand: hidden states in, one layer's probabilities out."""
    model = small_bert(seed=15)
    ids, mask = random_batch([5, 3], seed=16)
    hidden = layer_inputs(model, ids, mask)
    assert len(hidden) == model.config.num_hidden_layers and hidden[0].shape == (2, 5, 32)
    theirs = reference(model, ids, mask)
    for layer, h, want in zip(model.encoder.layer, hidden, theirs, strict=True):
        got = layer_attention(layer.attention.self, h, key_mask(mask, 5))
        assert_equal_on_real_tokens([got], [want], mask)


def test_key_mask_uses_padding_mask_for_right_padding():
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]])
    assert torch.equal(key_mask(mask, 4), padding_mask([3, 2], 4))
    assert key_mask(None, 4) is None
    causal = key_mask(mask, 4, is_causal=True)
    assert causal.shape == (2, 1, 4, 4) and not causal[0, 0, 0, 1] and causal[0, 0, 2, 1]


def test_key_mask_without_padding_is_causal_on_the_models_device():
    # a decoder without attention_mask: the causal mask must be made where the scores live
    mask = key_mask(None, 4, is_causal=True, device="meta")
    assert mask.device.type == "meta" and mask.shape == (4, 4)
    assert torch.equal(key_mask(None, 4, is_causal=True), causal_mask(4))


# --- errors -----------------------------------------------------------------------------------------


def test_rejects_a_model_that_is_not_a_bert_model():
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match="expected a transformers BertModel, got Linear"):
        attention_from_weights(torch.nn.Linear(3, 3), ids)
    config = BertConfig(vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    with pytest.raises(TypeError, match=r"got BertForMaskedLM \(pass its .bert attribute\)"):
        attention_from_weights(BertForMaskedLM(config), ids)


@pytest.mark.parametrize("bad", [torch.tensor([1, 2, 3]), torch.ones(1, 3), torch.ones(1, 2, 3, dtype=torch.long),
                                 torch.ones(1, 3, dtype=torch.bool)])
def test_rejects_input_ids_that_are_not_2d_ints(bad):
    with pytest.raises(TypeError, match=r"expected input_ids of shape \(B, L\) with an integer dtype"):
        attention_from_weights(small_bert(), bad)


def test_rejects_input_ids_that_are_not_tensors():
    with pytest.raises(TypeError, match="expected input_ids to be a torch.Tensor, got builtins.list"):
        attention_from_weights(small_bert(), [[1, 2, 3]])


def test_rejects_ids_outside_the_vocabulary_and_too_long_inputs():
    model = small_bert()
    with pytest.raises(ValueError, match=r"expected token ids in \[0, 59\]"):
        attention_from_weights(model, torch.tensor([[1, 60]]))
    with pytest.raises(ValueError, match="expected at most 24 tokens"):
        attention_from_weights(model, torch.ones(1, 25, dtype=torch.long))


def test_rejects_token_type_ids_of_another_shape():
    with pytest.raises(ValueError, match=r"expected token_type_ids of shape \(B, L\) = \(1, 3\) like input_ids, "
                                         r"got \(1, 4\)"):
        attention_from_weights(small_bert(), torch.ones(1, 3, dtype=torch.long), token_type_ids=torch.zeros(1, 4))


def test_rejects_mask_of_another_shape_or_values():
    model = small_bert()
    ids = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match=r"expected attention_mask of shape \(B, L\) = \(2, 5\) like input_ids, "
                                         r"got \(2, 6\)"):
        attention_from_weights(model, ids, torch.ones(2, 6, dtype=torch.long))
    with pytest.raises(ValueError, match="expected attention_mask of 0/1"):
        attention_from_weights(model, ids, torch.full((2, 5), 2))
