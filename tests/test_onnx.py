"""vt-export onnx: the graphs compute what the model computes (the same tokens through generate(), the same
teacher-forced logits and attention weights), int8 keeps the translations, and the export is put in place safely."""

import gzip
import itertools
import re

import numpy as np
import pytest
import sacrebleu
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer.export_base import ExportError
from vanilla_transformer.export_onnx import DECODER, ENCODER, check_exporter, export_bytes, past_names
from vanilla_transformer.onnx_model import VanillaTransformerOnnxModel, session
from vanilla_transformer.tools.export import main as export_main

from .helpers import ROOT, shared_data


@pytest.fixture(scope="module")
def exports(smoke_run, tmp_path_factory):
    """The smoke model exported in float32 and int8: {quantization: folder}."""
    folder = tmp_path_factory.mktemp("onnx")
    export_main(["onnx", str(smoke_run[0]), str(folder / "float32")])
    export_main(["onnx", str(smoke_run[0]), str(folder / "int8"), "--quantization", "int8"])
    return {"float32": folder / "float32", "int8": folder / "int8"}


def test_onnxruntime_gives_the_token_ids_of_generate_on_200_multi30k_sentences(smoke_run, exports):
    with gzip.open(shared_data() / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as lines:
        sources = [line.strip() for line in itertools.islice(lines, 200)]
    model = AutoModelForSeq2SeqLM.from_pretrained(smoke_run[0]).eval()
    exported = VanillaTransformerOnnxModel.from_export(exports["float32"])
    tokenizer = AutoTokenizer.from_pretrained(exports["float32"])
    for beams in (1, 4):
        for start in range(0, len(sources), 50):
            batch = tokenizer(sources[start : start + 50], return_tensors="pt", padding=True)
            expected = model.generate(**batch, num_beams=beams)
            assert torch.equal(exported.generate(**batch, num_beams=beams), expected), (beams, start)


def test_teacher_forcing_gives_the_models_logits_and_attention_in_one_pass(smoke_run, exports):
    """P = 0, T = the whole target: every position predicted at once under the causal mask (§3.2.3)."""
    model = AutoModelForSeq2SeqLM.from_pretrained(smoke_run[0], attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    batch = tokenizer(
        ["A dog runs on the grass.", "A man."],
        text_target=["Ein Hund läuft.", "Ein Mann."],
        padding=True,
        return_tensors="pt",
    )
    decoder_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"].masked_fill(batch["labels"] == -100, 0))
    with torch.no_grad():
        expected = model(
            **{k: batch[k] for k in ("input_ids", "attention_mask")},
            decoder_input_ids=decoder_ids,
            output_attentions=True,
        )
    encoder, decoder = session(exports["float32"] / ENCODER), session(exports["float32"] / DECODER)
    states, encoder_attentions = encoder.run(
        None, {"input_ids": batch["input_ids"].numpy(), "attention_mask": batch["attention_mask"].numpy()}
    )
    config = model.config
    heads, width = config.decoder_attention_heads, config.d_model // config.decoder_attention_heads
    empty = np.zeros((2, heads, 0, width), dtype=np.float32)
    outputs = decoder.run(
        None,
        {
            "input_ids": decoder_ids.numpy(),
            "encoder_attention_mask": batch["attention_mask"].numpy(),
            "encoder_hidden_states": states,
            **dict.fromkeys(past_names(config, "past_key_values"), empty),
        },
    )
    logits, decoder_attentions, cross_attentions = outputs[0], outputs[-2], outputs[-1]
    np.testing.assert_allclose(logits, expected.logits.numpy(), atol=1e-4)
    np.testing.assert_allclose(encoder_attentions, torch.stack(expected.encoder_attentions).numpy(), atol=1e-5)
    np.testing.assert_allclose(decoder_attentions, torch.stack(expected.decoder_attentions).numpy(), atol=1e-5)
    np.testing.assert_allclose(cross_attentions, torch.stack(expected.cross_attentions).numpy(), atol=1e-5)
    length = decoder_ids.shape[1]
    assert np.all(
        decoder_attentions[..., np.triu_indices(length, 1)[0], np.triu_indices(length, 1)[1]] == 0
    )  # the future blank


def test_the_embedding_both_graphs_use_is_stored_once(smoke_run, exports):
    """§3.4: the encoder's embedding and the decoder's (the pre-softmax projection's too) are one matrix: both graphs
    read it from one place of weights.onnx_data."""
    import onnx

    config = AutoModelForSeq2SeqLM.from_pretrained(smoke_run[0]).config
    for quantization, folder in exports.items():
        places = {}
        for name in (ENCODER, DECODER):
            for tensor in onnx.load(folder / name, load_external_data=False).graph.initializer:
                if list(tensor.dims) == [config.vocab_size, config.d_model]:
                    places[name] = {entry.key: entry.value for entry in tensor.external_data}
        assert places[ENCODER] == places[DECODER], (quantization, places)


def test_int8_is_smaller_and_translates_as_well(smoke_run, exports):
    sizes = {name: export_bytes(folder) for name, folder in exports.items()}
    assert sizes["int8"] < 0.6 * sizes["float32"]
    sources = (ROOT / "examples" / "tiny" / "test.en").read_text(encoding="utf-8").splitlines()
    references = (ROOT / "examples" / "tiny" / "test.de").read_text(encoding="utf-8").splitlines()
    tokenizer = AutoTokenizer.from_pretrained(exports["float32"])
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    bleu = {}
    for name, folder in exports.items():
        translations = tokenizer.batch_decode(
            VanillaTransformerOnnxModel.from_export(folder).generate(**batch), skip_special_tokens=True
        )
        bleu[name] = sacrebleu.corpus_bleu(translations, [references]).score
    # No worse: int8 kernels differ between CPUs (AVX2 or VNNI), and on 10 sentences one changed word can move BLEU up.
    assert bleu["int8"] >= bleu["float32"] - 0.5, bleu


def test_an_onnx_export_replaces_only_an_earlier_one(smoke_run, exports, tmp_path):
    with pytest.raises(SystemExit, match="exists: choose a new folder, or pass --force"):
        export_main(["onnx", str(smoke_run[0]), str(exports["float32"])])
    with pytest.raises(SystemExit, match="which this reads"):
        export_main(["onnx", str(smoke_run[0]), str(smoke_run[0].parent), "--force"])
    export_main(["ctranslate2", str(smoke_run[0]), str(tmp_path / "ct2")])
    with pytest.raises(SystemExit, match="is not an ONNX export"):
        export_main(["onnx", str(smoke_run[0]), str(tmp_path / "ct2"), "--force"])
    assert (tmp_path / "ct2" / "model.bin").is_file()


@pytest.mark.parametrize("version", ["2.8.0", "2.10.0+cpu", "2.13.0", "2.15.0+cu130"])
def test_the_torch_releases_that_export_the_lengths_that_vary_are_let_through(version):
    check_exporter(version)


@pytest.mark.parametrize("version", ["2.9.0", "2.9.1+cu128"])
def test_torch_2_9_is_refused_before_its_exporter_fails(version):
    with pytest.raises(ExportError, match=rf"torch {re.escape(version)} cannot export .* torch 2.10 or later"):
        check_exporter(version)
