"""What must work on both transformers 5.x and 4.57: `.ci/run` runs this file a second time in a virtualenv with
transformers 4.57.6, on a folder that training.train wrote with 5.x (VT_TRAINED_FOLDER).

Load, generate with and without the cache (greedy and beams), remote code, the translation pipeline, a few
Seq2SeqTrainer steps, and the Trainer resuming from its checkpoint.
"""

import json
import os
import re
from pathlib import Path

import pytest
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    LogitsProcessorList,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    pipeline,
)

import vanilla_transformer

from .helpers import PAIRS, PROJECT_PACKAGES, ROOT, EndFirstSentenceAt, run_python, tiny_model, word_tokenizer

SOURCES = ["a dog runs", "two men play football"]


@pytest.fixture(scope="module")
def folder(request) -> Path:
    """A model folder written by training.train: given by .ci/run, else trained here by the smoke config."""
    if "VT_TRAINED_FOLDER" in os.environ:
        return Path(os.environ["VT_TRAINED_FOLDER"])
    return request.getfixturevalue("smoke_run")[0]


def translations(model, tokenizer, sentences: list[str], **generate_kwargs) -> list[str]:
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        generated = model.generate(**batch, **generate_kwargs)
    return [text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)]


def test_a_trained_folder_loads_tied_and_generates_the_same_with_and_without_cache(folder):
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert model.lm_head.weight is model.model.encoder.embeddings.embed_tokens.weight
    assert model.model.decoder.embeddings.embed_tokens.weight is model.model.encoder.embeddings.embed_tokens.weight
    for settings in ({"num_beams": 1}, {"num_beams": 4, "num_return_sequences": 2}):
        cached = translations(model, tokenizer, SOURCES, use_cache=True, **settings)
        uncached = translations(model, tokenizer, SOURCES, use_cache=False, **settings)
        assert cached == uncached and len(cached) == len(SOURCES) * settings.get("num_return_sequences", 1)
    assert any(cached), "the smoke model translates into something"


def test_beam_search_pads_a_sentence_that_ends_before_the_others(folder):
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    batch = AutoTokenizer.from_pretrained(folder)(SOURCES, return_tensors="pt", padding=True)
    eos, pad = model.config.eos_token_id, model.config.pad_token_id
    ends = LogitsProcessorList([EndFirstSentenceAt(3, len(SOURCES), eos)])
    sequences = model.generate(**batch, num_beams=2, max_new_tokens=6, logits_processor=ends)
    assert sequences.shape == (2, 7) and sequences[0, 2] == eos
    assert torch.all(sequences[0, 3:] == pad) and not torch.isin(sequences[1], torch.tensor([eos, pad])).any()


def test_pipeline_translation_works_with_the_package_and_no_remote_code(folder):
    """4.57 has its own TranslationPipeline (as for Marian); 5.x has none: register_translation_task() gives ours."""
    vanilla_transformer.register_translation_task()
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    long_source = " ".join(SOURCES * 4)  # longer than the 20 tokens of 4.x's default max_length
    expected = translations(model, tokenizer, [SOURCES[0], long_source])
    for translator in (
        pipeline("translation", model=str(folder)),
        pipeline("translation", model=model, tokenizer=tokenizer),
    ):
        assert not type(translator).__module__.startswith("transformers_modules")
        outputs = translator([SOURCES[0], long_source])
        assert outputs == [{"translation_text": text} for text in expected]


def test_the_folder_translates_as_remote_code_where_the_package_cannot_be_imported(folder, tmp_path):
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    expected = translations(model, AutoTokenizer.from_pretrained(folder), SOURCES)
    code = f"""
        import json
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
        folder = {str(folder)!r}
        model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
        assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
        # Saved again, as Seq2SeqTrainer's save_model saves a fine-tune, before any pipeline code was loaded: the new
        # folder keeps the pipeline that its config.json names.
        model.save_pretrained("resaved")
        AutoTokenizer.from_pretrained(folder, trust_remote_code=True).save_pretrained("resaved")
        for translating in (folder, "resaved"):
            translator = pipeline("translation", model=translating, trust_remote_code=True)
            print(json.dumps([output["translation_text"] for output in translator({SOURCES!r})]))
        """
    result = run_python(code, tmp_path, without=(*PROJECT_PACKAGES, "sentencepiece"))
    assert [json.loads(line) for line in result.stdout.strip().splitlines()[-2:]] == [expected, expected]


def pairs_tokenizer():
    return word_tokenizer([s for pair in PAIRS for s in pair])


def pairs_model(seed: int = 0, **overrides):
    """A tiny model in training mode, with the vocabulary of PAIRS' words."""
    return tiny_model(seed, vocab_size=len(pairs_tokenizer()), **overrides).train()


def seq2seq_trainer(output_dir: Path, model, **arguments) -> Seq2SeqTrainer:
    """A Seq2SeqTrainer of `model` on PAIRS, with the paper's label smoothing."""
    tokenizer = pairs_tokenizer()
    examples = [dict(tokenizer(source, text_target=target)) for source, target in PAIRS]
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)  # adds the decoder inputs label smoothing needs
    args = Seq2SeqTrainingArguments(
        str(output_dir),
        learning_rate=3e-3,
        per_device_train_batch_size=8,
        label_smoothing_factor=0.1,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        remove_unused_columns=False,
        **arguments,
    )
    return Seq2SeqTrainer(
        model=model, args=args, train_dataset=examples, data_collator=collator, processing_class=tokenizer
    )


def test_seq2seq_trainer_lowers_the_loss_in_a_few_steps(tmp_path):
    trainer = seq2seq_trainer(tmp_path, pairs_model(), max_steps=30, save_strategy="no")
    trainer.train()
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    assert len(losses) == 30 and losses[-1] < 0.6 * losses[0]


@pytest.mark.parametrize("share, tie", [(True, True), (True, False), (False, True)])
def test_the_trainer_resumes_from_a_checkpoint_missing_no_weight_and_tied(tmp_path, share, tie):
    """A checkpoint leaves out the tied copies of the embeddings (_keys_to_ignore_on_save); the Trainer, resuming, ties
    them where the keys it misses are exactly those, and otherwise warns that weights were missing."""
    from transformers.testing_utils import CaptureLogger
    from transformers.utils import logging

    sharing = {"share_encoder_decoder_embeddings": share, "tie_word_embeddings": tie}
    seq2seq_trainer(tmp_path, pairs_model(**sharing), max_steps=2, save_steps=2).train()
    resumed = pairs_model(seed=1, **sharing)
    trainer = seq2seq_trainer(tmp_path, resumed, max_steps=3, save_strategy="no")
    with CaptureLogger(logging.get_logger("transformers.trainer")) as captured:
        trainer.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    assert "missing keys" not in captured.out, captured.out
    if tie:
        assert resumed.lm_head.weight is resumed.get_decoder().get_input_embeddings().weight


def test_the_modeling_file_reads_the_same_on_every_transformers_version():
    """The version differences live in transformers_versions.py; the modeling file holds the paper and the HF ladder."""
    from vanilla_transformer import modeling_vanilla_transformer

    source = Path(modeling_vanilla_transformer.__file__).read_text(encoding="utf-8")
    assert "__version__" not in source and "TRANSFORMERS_5" not in source and "from .transformers_versions" in source


def test_the_oldest_transformers_the_model_accepts_is_the_one_pyproject_names():
    """pyproject.toml's lower bound is what pip enforces and .ci/run tests; the import check is what a folder loaded as
    remote code, where no pip ran, enforces: one number."""
    from vanilla_transformer.transformers_versions import OLDEST_5

    bound = re.search(r'"transformers>=([0-9.]+),', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))[1]
    assert bound == f"{OLDEST_5[0]}.{OLDEST_5[1]}", bound


def test_an_untested_transformers_release_is_refused_naming_the_one_to_install():
    from vanilla_transformer.transformers_versions import tested_release

    assert tested_release("5.9.0") == (5, 9) and tested_release("4.57.6") == (4, 57)
    assert tested_release("5.25.0.dev0") == (5, 25)
    for release in ("5.3.0", "5.8.1", "4.46.3"):
        with pytest.raises(ImportError, match=rf"not {release}: pip install 'transformers>=5\.9,<6'"):
            tested_release(release)
