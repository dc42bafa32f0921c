"""vt-export ctranslate2: the exported model gives generate()'s tokens, and vt-translate serves it."""

import json
import shutil
from pathlib import Path

import ctranslate2
import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer import TranslationPipeline
from vanilla_transformer.tools.export import ExportError, export_ctranslate2
from vanilla_transformer.tools.export import main as export_main
from vanilla_transformer.tools.translate import main as translate_main

from .helpers import ROOT, tiny_model

SOURCES = (ROOT / "examples/tiny/test.en").read_text(encoding="utf-8").splitlines()[:12]


@pytest.fixture(scope="module", params=["post", "pre"])
def model_folder(request, smoke_run, tmp_path_factory) -> Path:
    """post: the trained smoke model (post-LN, the paper's); pre: a random pre-LN model with the same vocabulary."""
    if request.param == "post":
        return smoke_run[0]
    folder = tmp_path_factory.mktemp("pre-ln")
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    tiny_model(seed=3, vocab_size=len(tokenizer), layer_norm_position="pre").save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def generated_ids(folder: Path, sentence: str, num_beams: int, max_new_tokens: int) -> list[int]:
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    inputs = tokenizer([sentence], return_tensors="pt")
    with torch.inference_mode():
        output = model.generate(**inputs, num_beams=num_beams, length_penalty=0.6, max_new_tokens=max_new_tokens)
    ids = output[0, 1:].tolist()  # without the start token
    return [i for i in ids if i not in (tokenizer.eos_token_id, tokenizer.pad_token_id)]


def ctranslate2_ids(exported: Path, sentence: str, num_beams: int, max_new_tokens: int) -> list[int]:
    tokenizer = AutoTokenizer.from_pretrained(exported)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer(sentence)["input_ids"])
    translator = ctranslate2.Translator(str(exported), device="cpu")
    (result,) = translator.translate_batch(
        [tokens], beam_size=num_beams, length_penalty=0.6, min_decoding_length=0, max_decoding_length=max_new_tokens
    )  # min_decoding_length as vt-translate sets it (see the first-step test below)
    return tokenizer.convert_tokens_to_ids(result.hypotheses[0])


@pytest.mark.parametrize("num_beams", [1, 4])
def test_float32_export_gives_the_token_ids_of_generate(model_folder, tmp_path, num_beams):
    exported = export_ctranslate2(model_folder, tmp_path / "ct2")
    for sentence in SOURCES:
        expected = generated_ids(model_folder, sentence, num_beams, max_new_tokens=12)
        assert ctranslate2_ids(exported, sentence, num_beams, max_new_tokens=12) == expected, sentence


def test_vt_translate_serves_the_export_with_generates_output_and_int8_runs(smoke_run, tmp_path, capsys):
    folder = smoke_run[0]
    (tmp_path / "in.txt").write_text("\n".join(SOURCES[:5] + ["", SOURCES[5]]) + "\n", encoding="utf-8")
    export_main(["ctranslate2", str(folder), str(tmp_path / "ct2")])
    export_main(["ctranslate2", str(folder), str(tmp_path / "int8"), "--quantization", "int8"])
    printed = capsys.readouterr()
    assert "CTranslate2 model (int8)" in printed.out
    assert "Loading weights" not in printed.err  # transformers' bar: the command's output is its own
    outputs = {}
    for name, engine in (("generate", ["--model", str(folder)]), ("ct2", ["--engine", "ctranslate2"])):
        if name == "ct2":
            engine += ["--model", str(tmp_path / "ct2"), "--threads", "2"]
        translate_main([*engine, "--input", str(tmp_path / "in.txt"), "--batch_size", "3"])
        outputs[name] = capsys.readouterr().out.splitlines()
    assert outputs["ct2"] == outputs["generate"] and len(outputs["ct2"]) == 7 and outputs["ct2"][5] == ""
    translate_main(["--engine", "ctranslate2", "--model", str(tmp_path / "int8"), *SOURCES[:3]])
    int8 = capsys.readouterr().out.splitlines()
    assert len(int8) == 3 and all(line.strip() for line in int8)
    generation = json.loads((tmp_path / "ct2" / "generation_config.json").read_text())
    assert generation["num_beams"] == 4  # the folder's decoding settings travel with the export


def test_on_a_cpu_the_threads_translate_batches_side_by_side_one_thread_each(smoke_run, tmp_path, capsys, monkeypatch):
    # Two threads sharing one batch waited on each other (MKL): 5.6 s for 500 Multi30K sentences on 2 cores of an
    # Intel Xeon, 0.8 s with a batch each. vt-translate gives CTranslate2 many batches' lines at once: it sorts them by
    # length, cuts them into --batch_size batches and hands those to its workers, one thread each.
    exported = export_ctranslate2(smoke_run[0], tmp_path / "ct2")
    settings, given = {}, []

    class RecordingTranslator(ctranslate2.Translator):
        def __init__(self, *args, **kwargs):
            settings.update(kwargs)
            super().__init__(*args, **kwargs)

        def translate_batch(self, source, *args, **kwargs):
            given.append((len(source), kwargs["max_batch_size"]))
            return super().translate_batch(source, *args, **kwargs)

    monkeypatch.setattr(ctranslate2, "Translator", RecordingTranslator)
    (tmp_path / "in.txt").write_text("\n".join(SOURCES[:6]) + "\n", encoding="utf-8")
    translate_main(
        ["--engine", "ctranslate2", "--model", str(exported), "--input", str(tmp_path / "in.txt")]
        + ["--threads", "2", "--batch_size", "2"]
    )
    assert settings["inter_threads"] == 2 and settings["intra_threads"] == 1
    assert given == [(len([s for s in SOURCES[:6] if s.strip()]), 2)]  # every line at once, in batches of 2
    assert capsys.readouterr().out.splitlines() == translated_one_by_one(exported, SOURCES[:6], capsys)


def translated_one_by_one(exported: Path, sentences: list[str], capsys) -> list[str]:
    lines = []
    for sentence in sentences:
        translate_main(["--engine", "ctranslate2", "--model", str(exported), "--threads", "1", sentence])
        lines += capsys.readouterr().out.splitlines()
    return lines


@pytest.mark.parametrize("num_beams", [1, 4])
def test_the_export_ends_a_translation_at_its_first_step_as_generate_does(smoke_run, tmp_path, capsys, num_beams):
    """generate() lets a hypothesis end at its first step (an empty translation, which beam search counts among its
    finished ones); CTranslate2 by default does not, which changed 3 of Multi30K's 2,000 test translations."""
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    model = tiny_model(seed=3, vocab_size=len(tokenizer), layer_norm_position="pre")
    with torch.no_grad():  # every decoder output is about one vector, and the end token's row points along it
        direction = torch.randn(model.config.d_model)
        model.model.decoder.layer_norm.weight.fill_(0.01)
        model.model.decoder.layer_norm.bias.copy_(direction)
        model.get_input_embeddings().weight[tokenizer.eos_token_id] = 3 * direction
    model.save_pretrained(tmp_path / "model")  # a generation config without num_beams or length_penalty, too
    tokenizer.save_pretrained(tmp_path / "model")
    export_ctranslate2(tmp_path / "model", tmp_path / "ct2")
    outputs = {}
    for engine in (["--model", str(tmp_path / "model")], ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2")]):
        translate_main([*engine, "--num_beams", str(num_beams), *SOURCES[:4]])
        outputs[engine[1]] = capsys.readouterr().out.splitlines()
    assert outputs["ctranslate2"] == outputs[str(tmp_path / "model")] == ["", "", "", ""]


def test_what_cannot_be_exported_is_named(smoke_run, tmp_path):
    with pytest.raises(
        ExportError, match=r"has no config\.json \(the model's configuration\): it is not a model folder"
    ):
        export_ctranslate2(tmp_path, tmp_path / "out")
    marian = tmp_path / "marian"
    marian.mkdir()
    (marian / "config.json").write_text(json.dumps({"model_type": "marian"}), encoding="utf-8")
    with pytest.raises(ExportError, match=r"config\.json describes a 'marian' model, not a vanilla_transformer one"):
        export_ctranslate2(marian, tmp_path / "out")
    odd = tmp_path / "odd"
    tiny_model(vocab_size=120, decoder_attention_heads=2, activation_function="gelu_fast").save_pretrained(odd)
    shutil.copy(smoke_run[0] / "tokenizer.json", odd)
    with pytest.raises(ExportError, match=r"encoder_attention_heads=4 and decoder_attention_heads=2: .*one head count"):
        export_ctranslate2(odd, tmp_path / "out")
    with pytest.raises(ExportError, match=r"exists: choose a new folder, or pass --force"):
        export_ctranslate2(smoke_run[0], odd)
    with pytest.raises(SystemExit, match=r"error: .*activation_function='gelu_fast': CTranslate2 has gelu"):
        export_main(["ctranslate2", str(odd), str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()


def test_the_export_keeps_sources_and_outputs_within_its_positions(smoke_run, tmp_path, capsys):
    """--max_positions travels with the export (the tokenizer's model_max_length): outputs stop at the last position
    instead of failing inside CTranslate2, and a longer source is an error that names the sentence and the flag."""
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    lengths = {sentence: len(tokenizer(sentence)["input_ids"]) for sentence in SOURCES}
    short, long = min(lengths, key=lengths.get), max(lengths, key=lengths.get)
    positions = lengths[short] + 1  # room for the source, not for the source + 50 tokens of output
    export_main(["ctranslate2", str(smoke_run[0]), str(tmp_path / "ct2"), "--max_positions", str(positions)])
    assert AutoTokenizer.from_pretrained(tmp_path / "ct2").model_max_length == positions
    capsys.readouterr()
    translate_main(["--engine", "ctranslate2", "--model", str(tmp_path / "ct2"), short])
    output = capsys.readouterr()
    assert len(output.out.splitlines()) == 1
    assert f"warning: 1 translation(s) cut at the {positions} positions that {tmp_path / 'ct2'} encodes" in output.err
    with pytest.raises(SystemExit, match=rf"A sentence of {lengths[long]} tokens .* longer than the {positions} pos"):
        translate_main(["--engine", "ctranslate2", "--model", str(tmp_path / "ct2"), short, long])


def test_a_line_empty_once_normalised_translates_to_nothing_in_both_engines_and_the_pipeline(
    smoke_run, tmp_path, capsys
):
    """One rule for an empty line (the model would read no token of it): "" everywhere, where the generate engine
    and the pipeline invented a sentence for characters that the vocabulary's normalisation drops."""
    lines = ["\u200b", "a dog", "\ufeff", "\x7f", " \u200b\u200b ", ""]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    export_main(["ctranslate2", str(smoke_run[0]), str(tmp_path / "ct2")])
    outputs = []
    for engine in (["--model", str(smoke_run[0])], ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2")]):
        capsys.readouterr()
        translate_main([*engine, "--input", str(tmp_path / "in.txt")])
        outputs.append(capsys.readouterr().out.split("\n")[:-1])
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(smoke_run[0]), AutoTokenizer.from_pretrained(smoke_run[0])
    outputs.append(
        [result["translation_text"] for result in TranslationPipeline(model=model, tokenizer=tokenizer)(lines)]
    )
    assert outputs[0] == outputs[1] == outputs[2]
    assert [line == "" for line in outputs[0]] == [True, False, True, True, True, True]


@pytest.mark.parametrize("num_beams", [1, 4])
def test_the_export_never_writes_the_tokens_that_generate_suppresses(smoke_run, tmp_path, capsys, num_beams):
    """A model trained with --target_vocabulary_softmax saves the tokens outside its training targets as the generation
    config's suppress_tokens, the rest renormalised: CTranslate2 gets them too, and gives generate()'s text."""
    shutil.copytree(smoke_run[0], tmp_path / "model")
    written = {
        token for sentence in SOURCES for token in generated_ids(tmp_path / "model", sentence, 1, max_new_tokens=12)
    }
    generation = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    # Half the tokens that it wrote, and the rest renormalised, as training writes them.
    generation.update(suppress_tokens=sorted(written)[::2], renormalize_logits=True)
    (tmp_path / "model" / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    export_ctranslate2(tmp_path / "model", tmp_path / "ct2")
    outputs = {}
    for engine in (["--model", str(tmp_path / "model")], ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2")]):
        translate_main([*engine, "--num_beams", str(num_beams), *SOURCES])
        outputs[engine[1]] = capsys.readouterr().out.splitlines()
    assert outputs["ctranslate2"] == outputs[str(tmp_path / "model")]
    for sentence in SOURCES:
        ids = generated_ids(tmp_path / "model", sentence, num_beams, max_new_tokens=12)
        assert not set(ids) & set(generation["suppress_tokens"]), sentence


@pytest.mark.parametrize("setting", [{"max_new_tokens": 2}, {"max_length": 3}])
def test_a_length_in_the_generation_config_limits_both_engines_alike(smoke_run, tmp_path, capsys, setting):
    shutil.copytree(smoke_run[0], tmp_path / "model")
    translate_main(["--model", str(tmp_path / "model"), *SOURCES])
    unlimited = capsys.readouterr().out.splitlines()
    translate_main(["--model", str(tmp_path / "model"), "--max_new_tokens", "2", *SOURCES])
    limited = capsys.readouterr().out.splitlines()
    assert limited != unlimited  # the limit binds on these sentences
    path = tmp_path / "model" / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **setting}), encoding="utf-8")
    export_ctranslate2(tmp_path / "model", tmp_path / "ct2")
    for engine in (["--model", str(tmp_path / "model")], ["--engine", "ctranslate2", "--model", str(tmp_path / "ct2")]):
        translate_main([*engine, *SOURCES])
        assert capsys.readouterr().out.splitlines() == limited, engine
