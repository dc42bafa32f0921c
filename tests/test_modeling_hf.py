"""The model behaves as a transformers 5.x encoder-decoder: attention implementations, cache, loss, Trainer,
save/load (also as remote code), gradient checkpointing, bf16, and clear errors for bad input."""

import copy
import json
import warnings
from collections import Counter

import pytest
import torch
from safetensors import safe_open
from torch import nn
from transformers import (
    AutoModel,
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    LogitsProcessorList,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
)
from transformers.loss.loss_utils import LOSS_MAPPING, ForCausalLMLoss
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging as transformers_logging

from vanilla_transformer import VanillaTransformerForConditionalGeneration, VanillaTransformerModel
from vanilla_transformer.modeling_vanilla_transformer import shift_tokens_right, target_padding_mask

from .helpers import PAIRS, EndFirstSentenceAt, random_batch, run_python, tiny_config, tiny_model, word_tokenizer


def logits_of(model, input_ids, attention_mask, labels):
    with torch.no_grad():
        return model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits


# Attention implementations ----------------------------------------------------------------------------------------
def test_eager_and_sdpa_agree():
    model = tiny_model()
    batch = random_batch()
    model.set_attn_implementation("eager")
    eager = logits_of(model, *batch)
    model.set_attn_implementation("sdpa")
    sdpa = logits_of(model, *batch)
    torch.testing.assert_close(sdpa, eager, rtol=0, atol=1e-5)


def test_sdpa_is_the_default():
    assert tiny_model().config._attn_implementation == "sdpa"


def test_flex_attention_agrees_with_eager():
    from torch.nn.attention import flex_attention  # noqa: F401  (part of every torch this package supports)

    model = tiny_model()
    batch = random_batch()
    model.set_attn_implementation("eager")
    eager = logits_of(model, *batch)
    model.set_attn_implementation("flex_attention")
    # torch's flex attention has no CPU backward; the forward is what inference uses.
    torch.testing.assert_close(logits_of(model, *batch), eager, rtol=0, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="flash attention kernels need a CUDA GPU")
def test_flash_attention_agrees_with_sdpa_on_gpu():
    model = tiny_model().to("cuda", torch.bfloat16)
    batch = [t.cuda() for t in random_batch()]
    sdpa = logits_of(model, *batch).float()
    model.set_attn_implementation("flash_attention_2")
    torch.testing.assert_close(logits_of(model, *batch).float(), sdpa, rtol=0, atol=5e-2)


def test_eager_returns_attention_weights_of_every_kind():
    model = tiny_model()
    model.set_attn_implementation("eager")
    input_ids, attention_mask, labels = random_batch()
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True)
    batch, source_length, target_length = 3, 7, 6
    assert len(out.encoder_attentions) == len(out.decoder_attentions) == len(out.cross_attentions) == 2
    assert out.encoder_attentions[0].shape == (batch, 4, source_length, source_length)
    assert out.decoder_attentions[0].shape == (batch, 4, target_length, target_length)
    assert out.cross_attentions[0].shape == (batch, 4, target_length, source_length)
    for weights in out.decoder_attentions:  # masked self-attention: nothing above the diagonal
        assert torch.all(weights.triu(diagonal=1) == 0)
    for weights in (*out.encoder_attentions, *out.cross_attentions):  # padded source tokens get no attention
        assert torch.all(weights[-1, ..., -2:] == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_a_sentence_padded_on_either_side_is_encoded_and_translated_as_it_is_alone(attn_implementation):
    # Tokenizers pad on the left where a user set padding_side="left" (the habit from decoder-only models).
    model = tiny_model().eval()
    model.set_attn_implementation(attn_implementation)
    sentence, _, _ = random_batch(batch=1, source_length=5)
    alone = model.get_encoder()(input_ids=sentence).last_hidden_state  # (1, 5, D)
    pad = torch.zeros(1, 3, dtype=torch.long)
    mask = torch.ones(1, 5, dtype=torch.long)
    sides = {"right": (torch.cat([sentence, pad], 1), torch.cat([mask, pad], 1), slice(0, 5))}
    sides["left"] = (torch.cat([pad, sentence], 1), torch.cat([pad, mask], 1), slice(3, 8))
    translation = model.generate(input_ids=sentence, max_new_tokens=6, num_beams=1)
    # The translation's scores, step by step, whatever the padding (compared as logits: a random model's near-ties
    # may break either way between releases of transformers).
    scores = model(input_ids=sentence, decoder_input_ids=translation).logits
    for input_ids, attention_mask, words in sides.values():
        encoded = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        torch.testing.assert_close(encoded[:, words], alone, rtol=0, atol=1e-5)
        padded = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=translation).logits
        torch.testing.assert_close(padded, scores, rtol=0, atol=1e-5)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("labels_to_model", [True, False], ids=["model_loss", "trainer_loss"])
def test_targets_padded_on_the_left_by_the_collator_train_as_on_the_right(attn_implementation, labels_to_model):
    # DataCollatorForSeq2Seq pads the labels on the tokenizer's side, and makes the decoder inputs from them; a
    # Trainer with label smoothing or a compute_loss_func keeps the labels from the model.
    model = tiny_model().eval()
    model.set_attn_implementation(attn_implementation)
    tokenizer = word_tokenizer([sentence for pair in PAIRS for sentence in pair])
    features = [tokenizer(source, text_target=target) for source, target in PAIRS[3:6]]  # targets of 5, 4, 6
    batches = {}
    for side in ("right", "left"):
        tokenizer.padding_side = side
        batch = DataCollatorForSeq2Seq(tokenizer, model=model)([dict(f) for f in features])
        labels = batch["labels"] if labels_to_model else batch.pop("labels")
        with torch.no_grad():
            batches[side] = model(**batch).logits[labels != -100], labels[labels != -100]
    assert torch.equal(batches["left"][1], batches["right"][1])  # the same labels, in the same order
    torch.testing.assert_close(batches["left"][0], batches["right"][0], rtol=0, atol=1e-5)


@pytest.mark.parametrize("use_cache", [True, False])
def test_decoder_prompts_padded_on_the_left_generate_as_alone(use_cache):
    model = tiny_model()
    input_ids, _, _ = random_batch(batch=2, source_length=5)
    prompts = [[2, 9, 10, 11], [2, 12]]

    def scores(**inputs) -> torch.Tensor:  # (B, steps, V)
        kwargs = dict(max_new_tokens=4, num_beams=1, output_scores=True, return_dict_in_generate=True)
        return torch.stack(model.generate(**inputs, **kwargs, use_cache=use_cache).scores, 1)

    alone = [scores(input_ids=input_ids[i : i + 1], decoder_input_ids=torch.tensor([p])) for i, p in enumerate(prompts)]
    padded = scores(
        input_ids=input_ids,
        decoder_input_ids=torch.tensor([[2, 9, 10, 11], [0, 0, 2, 12]]),
        decoder_attention_mask=torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]]),
    )
    for i in range(2):
        torch.testing.assert_close(padded[i : i + 1], alone[i], rtol=0, atol=1e-5)


@pytest.mark.parametrize("start", [2, 0], ids=["start_token", "start_is_padding"])
def test_labels_padded_on_the_left_are_shifted_behind_the_start_token_and_their_padding_masked(start):
    pad = 0
    labels = torch.tensor([[-100, -100, 7, 8, 3], [5, 6, 7, 3, -100], [-100, -100, -100, -100, -100]])
    decoder_input_ids = shift_tokens_right(labels, pad, start)
    assert decoder_input_ids.tolist() == [[pad, pad, start, 7, 8], [start, 5, 6, 7, 3], [start, pad, pad, pad, pad]]
    mask = target_padding_mask(decoder_input_ids, pad, start)
    assert mask.tolist() == [[0, 0, 1, 1, 1], [1, 1, 1, 1, 1], [1, 1, 1, 1, 1] if start != pad else [0, 0, 0, 0, 1]]


# Cache and generate() ----------------------------------------------------------------------------------------------
GENERATION_MODES = {
    "greedy": dict(do_sample=False, num_beams=1),
    "beam": dict(do_sample=False, num_beams=4, num_return_sequences=2),
    "sampling": dict(do_sample=True, top_k=0, temperature=1.0),
}


@pytest.mark.parametrize("mode", GENERATION_MODES)
def test_generate_gives_the_same_sequences_with_and_without_cache(mode):
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    sequences = {}
    for use_cache in (True, False):
        torch.manual_seed(0)
        sequences[use_cache] = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            max_new_tokens=12,
            min_new_tokens=12,
            use_cache=use_cache,
            **GENERATION_MODES[mode],
        )
    assert sequences[True].shape[1] == 13
    assert torch.equal(sequences[True], sequences[False])


@pytest.mark.parametrize("mode", GENERATION_MODES)
def test_a_finished_sentence_is_padded_after_its_end_in_every_mode(mode):
    # transformers' beam search pads with the end token where pad_token_id is 0 (`pad_token_id or eos_token_id`).
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    torch.manual_seed(0)
    output = model.generate(
        input_ids=input_ids,
        attention_mask=attention_mask,
        max_new_tokens=8,
        logits_processor=LogitsProcessorList([EndFirstSentenceAt(4, len(input_ids), model.config.eos_token_id)]),
        return_dict_in_generate=True,
        **GENERATION_MODES[mode],
    )
    sequences = output.sequences
    per_sentence = sequences.shape[0] // len(input_ids)
    first, others = sequences[:per_sentence], sequences[per_sentence:]
    assert sequences.shape[1] == 9
    assert torch.all(first[:, 3] == model.config.eos_token_id)
    assert torch.all(first[:, 4:] == model.config.pad_token_id)
    assert not torch.isin(others, torch.tensor([model.config.eos_token_id, model.config.pad_token_id])).any()


def generation_log() -> CaptureLogger:
    """What transformers' generate() logs (its logger does not propagate to pytest's caplog)."""
    return CaptureLogger(transformers_logging.get_logger("transformers.generation.utils"))


def generated_lengths(model, batches, **generate_kwargs) -> tuple[list[int], str]:
    """Each batch's output length, with end and padding tokens forbidden, and what transformers' generate() logged."""
    with generation_log() as log:
        lengths = [model.generate(**batch, bad_words_ids=[[0], [3]], **generate_kwargs).shape[1] for batch in batches]
    return lengths, log.out


@pytest.mark.parametrize(
    "setting, length",
    [
        ({}, 1 + 7 + 5),  # the paper's rule: the source's 7 tokens + 5
        ({"max_new_tokens": 3}, 1 + 3),
        ({"max_length": 6}, 6),
        ({"max_length": 20}, 1 + 7 + 5),  # transformers' default, which Seq2SeqTrainer writes in: nobody's choice
    ],
)
def test_the_papers_length_rule_gives_way_to_a_length_in_the_generation_config(setting, length):
    model = tiny_model()
    model.generation_config.max_length_beyond_source = 5
    model.generation_config.update(**setting)
    input_ids, attention_mask, _ = random_batch()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask}
    assert generated_lengths(model, [batch]) == ([length], "")
    if not setting:
        assert generated_lengths(model, [batch], max_new_tokens=2) == ([3], "")  # the call's own length wins


@pytest.mark.parametrize("given_as", ["inputs_embeds", "encoder_outputs"])
def test_the_papers_length_rule_reads_a_source_given_as_embeddings_or_the_encoders_output(given_as):
    model = tiny_model()
    model.generation_config.max_length_beyond_source = 30  # past transformers' default of 20 tokens in all
    input_ids, attention_mask, _ = random_batch()
    with torch.no_grad():
        embeddings = model.get_input_embeddings()(input_ids)
        encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    source = {"inputs_embeds": embeddings, "encoder_outputs": encoder_outputs}[given_as]
    batch = {given_as: source, "attention_mask": attention_mask}
    assert generated_lengths(model, [batch]) == ([1 + 7 + 30], "")


def test_seq2seq_trainer_evaluation_keeps_the_papers_length_rule_without_warnings(tmp_path):
    """Seq2SeqTrainer fills the model's generation config with transformers' defaults (max_length=20) after the
    first batch it generates; the later batches must still get the paper's rule, without a warning each."""
    model = tiny_model()
    model.generation_config.max_length_beyond_source = 5
    examples = uneven_examples()
    trainer = Seq2SeqTrainer(
        model=model,
        args=training_arguments(tmp_path, predict_with_generate=True, per_device_eval_batch_size=2),
        data_collator=DataCollatorForSeq2Seq(word_tokenizer(["a b"]), model=model),
    )
    with generation_log() as log:
        predictions = trainer.predict(examples, bad_words_ids=[[0], [3]]).predictions
    assert model.generation_config.max_length == 20  # transformers' doing, which the rule must outlast
    assert (predictions != model.config.pad_token_id).sum(-1).tolist() == [1 + 5 + 5] * 4  # Trainer pads to 20
    assert "seem to have been set" not in log.out


@pytest.mark.parametrize("mode", ["greedy", "beam"])
def test_a_static_cache_generates_what_the_dynamic_cache_does(mode):
    # The static cache is the one torch.compile can capture; generate() hands the decoder a 4D mask with it.
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, **GENERATION_MODES[mode])
    dynamic = model.generate(**kwargs)
    static = model.generate(**kwargs, cache_implementation="static")
    assert torch.equal(static, dynamic)


def test_cross_attention_keys_and_values_are_computed_once_per_sequence():
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    calls = []
    for layer in model.model.decoder.layers:
        layer.encoder_attn.k_proj.register_forward_hook(lambda *_: calls.append("k"))
        layer.encoder_attn.v_proj.register_forward_hook(lambda *_: calls.append("v"))
    model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=10, min_new_tokens=10)
    assert len(calls) == 2 * len(model.model.decoder.layers)
    calls.clear()
    model.generate(
        input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=10, min_new_tokens=10, num_beams=4
    )
    assert len(calls) == 2 * len(model.model.decoder.layers)


def test_beam_search_leaves_the_cross_attention_cache_in_place_with_the_same_result(monkeypatch):
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=12, min_new_tokens=12)
    kwargs.update(num_beams=4, output_scores=True, return_dict_in_generate=True)
    cross_keys = []

    def record_cross_keys(module, args, inputs):
        cache = inputs.get("cache", inputs.get("past_key_values"))
        if cache is not None and cache.is_updated.get(0):
            cross_keys.append(cache.cross_attention_cache.layers[0].keys)

    model.model.decoder.register_forward_pre_hook(record_cross_keys, with_kwargs=True)
    ours = model.generate(**kwargs)
    assert len(cross_keys) == 11 and all(keys is cross_keys[0] for keys in cross_keys)  # never copied

    # transformers' default: both caches reordered at every step
    def reorder_both(self, cache, beam_idx):
        cache.reorder_cache(beam_idx)
        return cache

    monkeypatch.setattr(VanillaTransformerForConditionalGeneration, "_reorder_cache", reorder_both)
    cross_keys.clear()
    default = model.generate(**kwargs)
    assert len({id(keys) for keys in cross_keys}) == 11  # a new copy at every step
    assert torch.equal(ours.sequences, default.sequences)
    assert torch.equal(ours.sequences_scores, default.sequences_scores)


def logits_step_by_step(model, input_ids, attention_mask, decoder_input_ids) -> torch.Tensor:
    """The logits of decoder_input_ids computed one position at a time with a cache, as generate() does."""
    encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    past, steps = None, []
    with torch.no_grad():
        for t in range(decoder_input_ids.shape[1]):
            out = model(
                encoder_outputs=encoder_outputs,
                attention_mask=attention_mask,
                decoder_input_ids=decoder_input_ids[:, t : t + 1],
                cache=past,
                use_cache=True,
            )
            past = out.cache
            steps.append(out.logits)
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_cached_step_logits_equal_full_forward_logits(attn_implementation):
    model = tiny_model(attn_implementation=attn_implementation)
    input_ids, attention_mask, labels = random_batch()
    decoder_input_ids = shift_tokens_right(labels, 0, 2)
    full = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    steps = logits_step_by_step(model, input_ids, attention_mask, decoder_input_ids)
    torch.testing.assert_close(steps, full.detach(), rtol=0, atol=1e-5)


def counted_calls(monkeypatch, owner, name: str, counts=lambda *args, **kwargs: True) -> list:
    """Wrap owner.<name> so that each call that `counts` accepts appends to the returned list."""
    calls = []
    original = getattr(owner, name)

    def counting(*args, **kwargs):
        calls.extend([args] if counts(*args, **kwargs) else [])
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counting)
    return calls


def test_the_cache_argument_is_taken_by_its_name_in_every_transformers_version():
    # transformers 5.24 renamed forward's `past_key_values` to `cache` (the old name still works there, with a
    # warning); earlier versions' generate() passes `past_key_values=`. Both reach the model.
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    decoder_input_ids = shift_tokens_right(labels, 0, 2)
    inputs = dict(input_ids=input_ids, attention_mask=attention_mask, use_cache=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        first = model(**inputs, decoder_input_ids=decoder_input_ids[:, :-1])
        second = {
            name: model(**inputs, decoder_input_ids=decoder_input_ids[:, -1:], **{name: copy.deepcopy(first.cache)})
            for name in ("cache", "past_key_values")
        }
        full = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    for output in second.values():
        torch.testing.assert_close(output.logits[:, -1], full[:, -1], rtol=0, atol=1e-5)


def test_training_and_generate_use_no_name_transformers_deprecated(recwarn):
    # transformers 5.24 renamed its mask helpers' `past_key_values` to `cache` and warns at every training run that
    # still passes the old name; the model passes the name the installed version takes.
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    decoder_attention_mask = torch.ones_like(labels)
    decoder_attention_mask[0, -2:] = 0  # padded targets: the decoder builds a causal + padding mask
    model(
        input_ids=input_ids, attention_mask=attention_mask, labels=labels, decoder_attention_mask=decoder_attention_mask
    )
    model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=4)
    deprecations = [str(w.message) for w in recwarn if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    assert deprecations == []


# Labels and loss -------------------------------------------------------------------------------------------------
def test_labels_give_the_token_mean_loss_ignoring_minus_100_and_shifted_decoder_inputs():
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    labels[0, -3:] = -100
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    decoder_input_ids = shift_tokens_right(labels, pad_token_id=0, decoder_start_token_id=2)
    assert torch.equal(decoder_input_ids[:, 0], torch.full((3,), 2))
    assert torch.equal(decoder_input_ids[0, 1:], labels[0, :-1].masked_fill(labels[0, :-1] == -100, 0))
    explicit = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)
    torch.testing.assert_close(out.logits, explicit.logits)
    keep = labels != -100
    expected = nn.functional.cross_entropy(explicit.logits[keep], labels[keep])
    torch.testing.assert_close(out.loss, expected)
    total = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, num_items_in_batch=5).loss
    torch.testing.assert_close(total, expected * keep.sum() / 5)


def training_arguments(tmp_path, **overrides) -> Seq2SeqTrainingArguments:
    return Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        logging_strategy="no",
        max_steps=1,
        learning_rate=1.0,
        lr_scheduler_type="constant",
        seed=0,
        max_grad_norm=0.0,  # clipping would hide a wrongly scaled gradient
        **overrides,
    )


def uneven_examples():
    """Four examples with 3, 5, 1 and 6 real labels: a mean per micro-batch would weigh them wrong."""
    examples = []
    for i, real in enumerate((3, 5, 1, 6)):
        labels = [4 + i + j for j in range(real)] + [-100] * (6 - real)
        examples.append({"input_ids": [10 + i] * 5, "attention_mask": [1] * 5, "labels": labels})
    return examples


def stack(examples) -> dict[str, torch.Tensor]:
    return {key: torch.tensor([e[key] for e in examples]) for key in examples[0]}


def test_gradient_accumulation_equals_one_step_on_the_concatenated_batch(tmp_path):
    examples = uneven_examples()
    reference = tiny_model(dropout=0.0).train()
    reference(**stack(examples)).loss.backward()
    expected = {name: p.detach() - 1.0 * p.grad for name, p in reference.named_parameters()}

    model = tiny_model(dropout=0.0)
    args = training_arguments(tmp_path, per_device_train_batch_size=2, gradient_accumulation_steps=2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    Seq2SeqTrainer(model=model, args=args, train_dataset=examples, optimizers=(optimizer, None)).train()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.detach(), expected[name], rtol=1e-5, atol=1e-6, msg=name)


def test_the_model_names_no_loss_that_shifts_its_labels():
    """The loss is aligned with the labels (the decoder inputs are what is shifted), so every label is a target. A
    model whose loss transformers takes for the causal-LM one had only labels[:, 1:] counted by the Trainer of
    transformers 5.10-5.14, which divided its losses by too few (the test above fails there without this)."""
    assert LOSS_MAPPING.get(tiny_model().loss_type) is not ForCausalLMLoss


def test_a_training_step_traces_as_one_graph_and_gives_the_eager_loss_and_gradients():
    """Nothing in forward + loss makes the host wait for the device: dynamo traces it as one graph (fullgraph=True
    raises at any break) for padded batches of two lengths, with the eager loss and gradients."""
    model = tiny_model(dropout=0.0).train()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    for source_length, target_length in ((7, 6), (11, 9)):
        input_ids, attention_mask, labels = random_batch(source_length=source_length, target_length=target_length)
        labels[0, -3:] = -100
        batch = dict(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        losses, gradients = [], []
        for run in (model, compiled):
            model.zero_grad()
            loss = run(**batch).loss
            loss.backward()
            losses.append(loss.detach())
            gradients.append({name: p.grad.clone() for name, p in model.named_parameters()})
        torch.testing.assert_close(losses[1], losses[0], rtol=0, atol=1e-5)
        for name, grad in gradients[0].items():
            torch.testing.assert_close(gradients[1][name], grad, rtol=0, atol=1e-5, msg=name)


def test_token_ids_are_read_where_that_is_free_and_generate_reads_its_input():
    from vanilla_transformer.input_checks import check_token_ids

    on_an_accelerator = torch.full((2, 3), 500, device="meta")  # stands for a GPU tensor: its values are not read
    check_token_ids(on_an_accelerator, 99, "input_ids")
    with pytest.raises(ValueError, match=r"Token id 500 in input_ids is outside the vocabulary"):
        check_token_ids(torch.full((2, 3), 500), 99, "input_ids")  # on the CPU the values are at hand
    with pytest.raises(ValueError, match=r"expected \(batch, length\)"):
        check_token_ids(on_an_accelerator[0], 99, "input_ids")  # shapes and types are checked everywhere
    with pytest.raises(ValueError, match=r"Token id 500"):
        tiny_model().generate(torch.full((1, 3), 500), max_new_tokens=2)


def test_trainer_label_smoothing_works_with_minus_100(tmp_path):
    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer))
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    features = [tokenizer(src, text_target=tgt) for src, tgt in PAIRS[:4]]
    batch = collator(features)
    assert (batch["labels"] == -100).any() and "decoder_input_ids" in batch
    trainer = Seq2SeqTrainer(model=model, args=training_arguments(tmp_path, label_smoothing_factor=0.1))
    loss = trainer.compute_loss(model, dict(batch))

    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    keep = batch["labels"] != -100
    log_probs = logits[keep].log_softmax(-1)
    nll = -log_probs.gather(-1, batch["labels"][keep].unsqueeze(-1)).mean()
    uniform = -log_probs.mean()
    torch.testing.assert_close(loss.detach(), 0.9 * nll + 0.1 * uniform, rtol=1e-5, atol=1e-6)


def test_missing_decoder_inputs_name_the_collator_to_use():
    model = tiny_model()
    input_ids, attention_mask, _ = random_batch()
    with pytest.raises(ValueError, match="DataCollatorForSeq2Seq"):
        model(input_ids=input_ids, attention_mask=attention_mask)


# Saving and loading ------------------------------------------------------------------------------------------------
def test_save_pretrained_round_trip_keeps_logits_and_ties(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    with safe_open(tmp_path / "model.safetensors", "pt") as weights:
        saved = set(weights.keys())
    assert "model.encoder.embeddings.embed_tokens.weight" in saved
    assert "lm_head.weight" not in saved and "model.decoder.embeddings.embed_tokens.weight" not in saved
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("VanillaTransformerForConditionalGeneration")
    assert (tmp_path / "modeling_vanilla_transformer.py").exists()
    assert (tmp_path / "configuration_vanilla_transformer.py").exists()

    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, VanillaTransformerForConditionalGeneration)
    assert loaded.lm_head.weight is loaded.model.encoder.embeddings.embed_tokens.weight
    assert loaded.model.decoder.embeddings.embed_tokens.weight is loaded.model.encoder.embeddings.embed_tokens.weight
    batch = random_batch()
    torch.testing.assert_close(logits_of(loaded, *batch), logits_of(model, *batch), rtol=0, atol=0)


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize("tie", [True, False])
def test_every_combination_of_sharing_and_tying_is_saved_and_reloaded_with_the_same_outputs(tmp_path, share, tie):
    """share_encoder_decoder_embeddings (one matrix for both embeddings) and tie_word_embeddings (the pre-softmax
    projection reuses the target embedding) are independent: each of the four combinations reloads as saved."""
    model = tiny_model(share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    with torch.no_grad():  # weights that differ from the initialisation a bad reload would give
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(tmp_path)
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    encoder, decoder = (loaded.model.encoder.embeddings.embed_tokens, loaded.model.decoder.embeddings.embed_tokens)
    assert (decoder.weight is encoder.weight) == share
    assert (loaded.lm_head.weight is decoder.weight) == tie
    batch = random_batch()
    torch.testing.assert_close(logits_of(loaded, *batch), logits_of(model.eval(), *batch), rtol=0, atol=0)


def test_auto_model_gives_the_base_model():
    assert isinstance(AutoModel.from_config(tiny_config()), VanillaTransformerModel)


def test_folder_loads_as_remote_code_where_the_package_cannot_be_imported(tmp_path):
    model = tiny_model()
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    input_ids, attention_mask, labels = random_batch()
    torch.save({"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}, tmp_path / "batch.pt")
    torch.save(logits_of(model, input_ids, attention_mask, labels), tmp_path / "expected.pt")
    code = f"""
        import torch
        from transformers import AutoModelForSeq2SeqLM
        model = AutoModelForSeq2SeqLM.from_pretrained({str(folder)!r}, trust_remote_code=True).eval()
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        batch = torch.load({str(tmp_path / "batch.pt")!r})
        with torch.no_grad():
            logits = model(**batch).logits
        # The same model to float32's rounding: this process may run other kernels than the test's (MKL's Intel
        # ones on an AMD CPU, which the test's process and vt-train use), adding in another order.
        torch.testing.assert_close(logits, torch.load({str(tmp_path / "expected.pt")!r}), rtol=1e-5, atol=1e-5)
        print("remote code ok")
        """
    result = run_python(code, tmp_path)
    assert "remote code ok" in result.stdout


# Training features -----------------------------------------------------------------------------------------------
def test_gradient_checkpointing_recomputes_each_layer_and_gives_the_same_gradients():
    batch = dict(zip(("input_ids", "attention_mask", "labels"), random_batch(), strict=True))
    grads, ffn_calls = [], Counter()
    for checkpointing in (False, True):
        model = tiny_model(dropout=0.0).train()
        if checkpointing:  # transformers 5.25 renamed it (the old name warns); 5.9 and 4.57 have the old one only
            enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
            enable()
        # Hooked inside the layer: transformers 5.25 checkpoints a layer's forward, not the hooks around its call.
        for layer in (*model.model.encoder.layers, *model.model.decoder.layers):
            layer.ffn.register_forward_hook(lambda *_, key=checkpointing: ffn_calls.update([key]))
        model(**batch).loss.backward()
        grads.append({name: p.grad for name, p in model.named_parameters()})
    assert tiny_model().supports_gradient_checkpointing
    assert ffn_calls[True] == 2 * ffn_calls[False]  # each layer's forward run again in the backward pass
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_bf16_autocast_on_cpu_gives_finite_loss_and_gradients():
    model = tiny_model().train()
    batch = dict(zip(("input_ids", "attention_mask", "labels"), random_batch(), strict=True))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**batch)
    assert out.logits.dtype == torch.bfloat16
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


# Bad input ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["input_ids", "decoder_input_ids", "labels"])
@pytest.mark.parametrize("bad_id", [99, 1000, -5])
def test_token_ids_outside_the_vocabulary_are_a_value_error_naming_the_id(where, bad_id):
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
    if where == "decoder_input_ids":
        inputs["decoder_input_ids"] = shift_tokens_right(labels, 0, 2)
    inputs[where][0, 1] = bad_id
    with pytest.raises(ValueError, match=rf"Token id {bad_id} in {where} is outside the vocabulary"):
        model(**inputs)


def test_attention_mask_of_the_wrong_shape_is_a_value_error_naming_both_shapes():
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    with pytest.raises(ValueError, match=r"attention_mask has shape \(3, 5\).*\(3, 7\)"):
        model(input_ids=input_ids, attention_mask=attention_mask[:, :5], labels=labels)
    with pytest.raises(ValueError, match=r"decoder_attention_mask has shape \(3, 2\)"):
        model(input_ids=input_ids, labels=labels, decoder_attention_mask=torch.ones(3, 2))


@pytest.mark.parametrize(
    "change, message",
    [
        ({"labels": "labels[:2]"}, r"disagree on the batch size .*input_ids \(3, 7\), labels \(2, 6\)"),
        ({"decoder_input_ids": "labels[:2]", "labels": "None"}, r"batch size .*decoder_input_ids \(2, 6\)"),
        ({"decoder_input_ids": "labels[:, :3]"}, r"labels \(3, 6\) and decoder_input_ids \(3, 3\) must have the same"),
        ({"input_ids": "input_ids[0]", "labels": "labels[0]"}, r"labels has shape \(6,\): expected \(batch, length"),
        ({"input_ids": "input_ids[0]", "labels": "None", "decoder_input_ids": "labels"}, r"input_ids has shape \(7,\)"),
        ({"input_ids": "input_ids[:, :0]"}, r"input_ids has shape \(3, 0\): expected \(batch, length\), both at"),
        ({"input_ids": "input_ids.float()"}, r"input_ids holds torch.float32 values: token ids are integers"),
    ],
)
def test_inputs_whose_shapes_or_types_disagree_are_a_value_error_naming_them(change, message):
    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    inputs = {"input_ids": input_ids, "labels": labels}
    for name, expression in change.items():
        inputs[name] = eval(expression, {}, {"input_ids": input_ids, "labels": labels})
    with pytest.raises(ValueError, match=message):
        model(**inputs)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"num_beams": 0}, r"num_beams=0: must be a whole number of at least 1 \(1 is greedy search\)"),
        ({"num_beams": -1}, r"num_beams=-1: must be a whole number of at least 1"),
        ({"num_beams": "4"}, r"num_beams='4': must be a whole number"),
        ({"num_beams": 2.5}, r"num_beams=2.5: must be a whole number"),
        ({"max_new_tokens": 2.5}, r"max_new_tokens=2.5: must be a whole number of at least 1"),
        ({"num_return_sequences": 0}, r"num_return_sequences=0: must be a whole number of at least 1"),
        ({"length_penalty": float("nan")}, r"length_penalty=nan: must be a finite number"),  # gave 1-2 tokens
        ({"forced_bos_token_id": 500}, r"forced_bos_token_id=500 is not a token id of the vocabulary \(ids 0 to 98\)"),
    ],
)
def test_generate_arguments_out_of_range_are_a_value_error_naming_them(settings, message):
    input_ids, attention_mask, _ = random_batch()
    with pytest.raises(ValueError, match=r"generate\(\): " + message):
        tiny_model().generate(input_ids, attention_mask=attention_mask, **{"max_new_tokens": 3, **settings})


@pytest.mark.parametrize(
    "file_text, message",
    [
        ('{"eos_token_id": 500}', r"eos_token_id=500 is not a token id"),  # decoded to the length limit
        ('{"num_beams": "4"}', r"num_beams='4': must be a whole number"),
        ('{"length_penalty": "0.6"}', r"length_penalty='0.6': must be a finite number"),
        ("[4]", r"cannot be read \(a JSON list, not an object of settings\)"),
    ],
)
def test_a_generation_config_out_of_range_is_refused_at_load_naming_the_file(tmp_path, file_text, message):
    tiny_model().save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(file_text, encoding="utf-8")
    with pytest.raises(ValueError, match=r"generation_config\.json.*" + message):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path)


def test_ids_of_tokens_added_by_resize_token_embeddings_are_accepted():
    model = tiny_model()
    model.resize_token_embeddings(120, mean_resizing=False)
    new_token = torch.full((1, 3), 110)
    assert model(input_ids=new_token, labels=new_token).logits.shape == (1, 3, 120)
    with pytest.raises(ValueError, match=r"Token id 120 in input_ids is outside the vocabulary .*\[0, 119\]"):
        model(input_ids=torch.full((1, 3), 120), labels=new_token)


def test_a_folder_without_a_readable_generation_config_is_never_silently_greedy(tmp_path, caplog):
    tiny_model().save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").unlink()
    with caplog.at_level("WARNING"):
        loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    assert "has no generation_config.json: generating with the paper's settings" in caplog.text
    generation = loaded.generation_config
    assert (generation.num_beams, generation.length_penalty, generation.max_length_beyond_source) == (4, 0.6, 50)
    (tmp_path / "generation_config.json").write_text('{"num_beams": 4,', encoding="utf-8")
    with pytest.raises(ValueError, match=r"generation_config\.json cannot be read \(.*\): repair or delete it"):
        AutoModelForSeq2SeqLM.from_pretrained(tmp_path)


def test_a_decoding_step_with_a_static_cache_traces_as_one_graph():
    """What generate(cache_implementation="static") compiles: no graph break (the cache length is a tensor there)."""
    from transformers import EncoderDecoderCache, StaticCache

    model = tiny_model()
    assert model._can_compile_fullgraph
    input_ids, attention_mask, _ = random_batch()
    encoder_outputs = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
    cache = EncoderDecoderCache(
        StaticCache(config=model.config, max_cache_len=16), StaticCache(config=model.config, max_cache_len=7)
    )

    def step(token: torch.Tensor) -> torch.Tensor:
        inputs = {"encoder_outputs": encoder_outputs, "attention_mask": attention_mask, "cache": cache}
        return model(decoder_input_ids=token, use_cache=True, **inputs).logits

    eager = [step(torch.full((3, 1), 2)), step(torch.full((3, 1), 5))]  # the first step fills the encoder's K/V
    explained = torch._dynamo.explain(step)(torch.full((3, 1), 7))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    assert all(torch.isfinite(logits).all() for logits in eager)
