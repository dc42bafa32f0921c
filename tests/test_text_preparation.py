"""A model trained on lowercased, Moses-tokenized text (`--preprocess lowercase_tokenized`) reads a user's natural
sentence as training prepared its text: its tokenizer records the preparation, and the pipeline, both vt-translate
engines, the attention maps and the tuning tools apply it."""

import json
import shutil

import ctranslate2
import pytest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer import TranslationPipeline
from vanilla_transformer.pipeline_vanilla_transformer import lowercase_tokenizer, text_preparation
from vanilla_transformer.tools.export import export_ctranslate2
from vanilla_transformer.tools.translate import main as translate_main
from vanilla_transformer.tools.tune_decoding import main as tune_main
from vanilla_transformer.tools.tune_decoding import run_data_arguments, run_translator
from vanilla_transformer.training.tokenizer import record_text_preprocessing
from vanilla_transformer.visualization import attention_maps

from .helpers import SMOKE, word_tokenizer

NATURAL, PREPARED = "A Cat runs near the house.", "a cat runs near the house ."


@pytest.fixture(scope="module")
def lowercase_run(tmp_path_factory):
    """The smoke config trained (~5 s) on examples/tiny lowercased and tokenized: (output folder, report)."""
    from vanilla_transformer.training.train import main as train_main

    output = tmp_path_factory.mktemp("lowercase") / "run"
    report = train_main([*SMOKE, "--preprocess", "lowercase_tokenized", "--output_dir", str(output)])
    return output, report


@pytest.mark.parametrize("code", ["fr", "fr-FR", "fr_CA", "FR", "fra", "fre"])
def test_a_language_code_with_a_region_or_of_three_letters_is_tokenized_by_its_languages_rules(code):
    # sacremoses, handed "fr-FR" or Tatoeba's "fra", knew no language and split the elided article from the word as an
    # English quote.
    assert lowercase_tokenizer(code)("L'homme qu'il a vu.") == "l' homme qu' il a vu ."


def recorded(folder) -> dict:
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    return {name: settings.get(name) for name in ("text_preprocessing", "source_lang", "target_lang")}


def test_training_records_how_its_text_was_prepared_in_every_saved_tokenizer(lowercase_run, smoke_run):
    folder, _ = lowercase_run
    expected = {"text_preprocessing": "lowercase_tokenized", "source_lang": "en", "target_lang": "de"}
    assert recorded(folder) == expected
    assert all(recorded(checkpoint) == expected for checkpoint in folder.glob("checkpoint-*"))
    assert recorded(smoke_run[0]) == {"text_preprocessing": "none", "source_lang": "en", "target_lang": "de"}
    # The card says so: its model reads and writes such text.
    assert "reads and writes **lowercased, Moses-tokenized** text" in (folder / "README.md").read_text(encoding="utf-8")
    assert "Moses-tokenized** text" not in (smoke_run[0] / "README.md").read_text(encoding="utf-8")


def test_the_pipeline_prepares_a_natural_sentence_as_training_prepared_its_text(lowercase_run, smoke_run):
    translators = {}
    for (folder, _), model_reads in ((lowercase_run, PREPARED), (smoke_run, NATURAL)):  # smoke_run: natural text
        tokenizer = AutoTokenizer.from_pretrained(folder)
        translator = TranslationPipeline(model=AutoModelForSeq2SeqLM.from_pretrained(folder), tokenizer=tokenizer)
        assert translator.preprocess(NATURAL)["input_ids"].tolist() == [tokenizer(model_reads)["input_ids"]]
        translators[model_reads] = translator
    assert translators[PREPARED](NATURAL) == translators[PREPARED](PREPARED)


def test_both_vt_translate_engines_prepare_the_source(lowercase_run, tmp_path, capsys, monkeypatch):
    folder, _ = lowercase_run
    export_ctranslate2(folder, tmp_path / "ct2")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model_reads = tokenizer.convert_ids_to_tokens(tokenizer(PREPARED)["input_ids"])
    given = []

    class RecordingTranslator(ctranslate2.Translator):  # what vt-translate hands CTranslate2
        def translate_batch(self, source, *args, **kwargs):
            given.extend(source)
            return super().translate_batch(source, *args, **kwargs)

    monkeypatch.setattr(ctranslate2, "Translator", RecordingTranslator)
    outputs = []
    for engine in (["--model", str(folder)], ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2")]):
        translate_main([*engine, NATURAL, PREPARED])
        outputs.append(capsys.readouterr().out.splitlines())
    assert given == [model_reads, model_reads]
    assert outputs[0] == outputs[1] and outputs[0][0] == outputs[0][1]


def test_attention_maps_show_the_source_as_the_model_reads_it(lowercase_run):
    folder, _ = lowercase_run
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    natural, prepared = (attention_maps(model, tokenizer, text).source_tokens for text in (NATURAL, PREPARED))
    assert natural == prepared and "<unk>" not in natural


def test_tuning_a_preprocessed_run_scores_what_the_run_scored(lowercase_run, capsys):
    # Validation sources go to the pipeline as the corpus has them, and the pipeline prepares them once.
    folder, report = lowercase_run
    tune_main([str(folder), "--average", "1", "--batch_size", "32"])
    table = capsys.readouterr().out.split("\n\n")[-1].strip().splitlines()
    score = table[2].strip("|").split("|")[3].split()[0]
    assert score == f"{report['results']['last']['validation']['bleu']:.2f}"


def test_a_folder_saved_before_tokenizers_recorded_it_is_taken_to_share_its_runs_preparation(lowercase_run, tmp_path):
    folder, _ = lowercase_run
    old = shutil.copytree(sorted(folder.glob("checkpoint-*"))[-1], tmp_path / "old")
    settings = json.loads((old / "tokenizer_config.json").read_text(encoding="utf-8"))
    for name in ("text_preprocessing", "source_lang", "target_lang"):
        del settings[name]
    (old / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    assert run_translator(old, run_data_arguments(folder)[0]).prepare_source(NATURAL) == PREPARED


def test_an_unknown_preparation_is_an_error_naming_it():
    tokenizer = word_tokenizer([PREPARED])
    record_text_preprocessing(tokenizer, "truecased", "en", "de")
    with pytest.raises(ValueError, match="text_preprocessing='truecased', which this code does not know"):
        text_preparation(tokenizer)
