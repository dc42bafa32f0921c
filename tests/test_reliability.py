"""docs/reliability.md's table of bad input and what it gets, kept true: each row is run here, and the table in the
document must be the one these runs produce. `VT_WRITE_RELIABILITY_DOC=1 python -m pytest tests/test_reliability.py`
rewrites it after a deliberate change of a message."""

import argparse
import contextlib
import errno
import gzip
import importlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from unittest import mock

import datasets
import huggingface_hub.constants
import pytest
import torch
from safetensors import SafetensorError
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer import TranslationPipeline, VanillaTransformerConfig
from vanilla_transformer.tools.curves import main as curves_main
from vanilla_transformer.tools.demo import main as demo_main
from vanilla_transformer.tools.diversify import main as diversify_main
from vanilla_transformer.tools.export import main as export_main
from vanilla_transformer.tools.translate import main as translate_main
from vanilla_transformer.tools.translate import positive_int
from vanilla_transformer.tools.tune_decoding import main as tune_main
from vanilla_transformer.tools.visualize import main as visualize_main
from vanilla_transformer.training import one_line_errors
from vanilla_transformer.training.arguments import parse_arguments
from vanilla_transformer.training.average_checkpoints import main as average_main
from vanilla_transformer.training.data import DataArguments, load_parallel_corpus, tokenize_corpus
from vanilla_transformer.training.train import cli as train_cli

from .helpers import PAIRS, ROOT, SMOKE, random_batch, tiny_model, word_tokenizer

DOCUMENT = ROOT / "docs" / "reliability.md"
TABLE_START, TABLE_END = "<!-- table: tests/test_reliability.py -->", "<!-- end of table -->"


def write_pairs(folder: Path, prefix: str, source: bytes, target: bytes, suffix: str = "") -> None:
    (folder / f"{prefix}.en{suffix}").write_bytes(source)
    (folder / f"{prefix}.de{suffix}").write_bytes(target)


def load(**arguments) -> None:
    load_parallel_corpus(DataArguments(**{"validation_prefix": None, **arguments}), seed=0)


def mismatched_files(d: Path):
    write_pairs(d, "train", b"a\nb\nc\n", b"a\nb\n")
    load(data_dir=str(d))


def invalid_utf8(d: Path):
    write_pairs(d, "train", b"ok\n\xe9t\xe9\n", b"ok\nok\n")
    load(data_dir=str(d))


def broken_utf16(d: Path):
    write_pairs(d, "train", "a\nb\n".encode("utf-16") + b"\x00\xd8", b"a\nb\n")
    load(data_dir=str(d))


def binary(d: Path):
    write_pairs(d, "train", b"a\n\x00\x01\x02\n", b"a\nb\n")
    load(data_dir=str(d))


def cut_off_gzip(d: Path):
    whole = gzip.compress(b"".join(b"sentence %d\n" % i for i in range(2000)))
    write_pairs(d, "train", whole[: len(whole) // 2], whole[: len(whole) // 2], suffix=".gz")
    load(data_dir=str(d))


def empty_files(d: Path):
    write_pairs(d, "train", b"", b"")
    load(data_dir=str(d))


def tsv_without_tab(d: Path):
    (d / "pairs.tsv").write_text("a dog\tein Hund\nno tab here\n", encoding="utf-8")
    load(train_file=str(d / "pairs.tsv"))


def tsv_whose_columns_change_part_way(d: Path):
    rows = [f"dog {i}\tHund {i}\n" for i in range(1200)] + [f"cat {i}\tKatze {i}\tCC-BY\n" for i in range(300)]
    (d / "pairs.tsv").write_text("".join(rows), encoding="utf-8")
    load(train_file=str(d / "pairs.tsv"))


def one_side_as_the_training_file(d: Path):
    write_pairs(d, "train", b"a dog\n", b"ein Hund\n")
    load(train_file=str(d / "train.en"))


def csv_without_the_target_column(d: Path):
    (d / "pairs.csv").write_text("text,translation\na dog,ein Hund\n", encoding="utf-8")
    load(train_file=str(d / "pairs.csv"))


def tsv_in_the_other_order(d: Path):
    (d / "cmn-eng.tsv").write_text("I am a student.\t我是一个学生。\n" * 1200, encoding="utf-8")
    load(train_file=str(d / "cmn-eng.tsv"), source_lang="zh", target_lang="en")


def too_few_pairs_to_hold_out(d: Path):
    (d / "pairs.tsv").write_text("".join(f"dog {i}\tHund {i}\n" for i in range(300)), encoding="utf-8")
    load(train_file=str(d / "pairs.tsv"))


def row_numbers_as_a_language(d: Path):
    (d / "pairs.tsv").write_text("".join(f"{i}\tdog {i}\tHund {i}\n" for i in range(1200)), encoding="utf-8")
    load(train_file=str(d / "pairs.tsv"))


def jsonl_number(d: Path):
    (d / "pairs.jsonl").write_text('{"translation": {"en": "a", "de": 5}}\n', encoding="utf-8")
    load(train_file=str(d / "pairs.jsonl"))


def jsonl_not_json(d: Path):
    (d / "pairs.jsonl").write_text('{"translation": {"en": "a"\n', encoding="utf-8")
    load(train_file=str(d / "pairs.jsonl"))


def tmx_cut_off(d: Path):
    unit = '<tu><tuv xml:lang="en"><seg>A dog.</seg></tuv><tuv xml:lang="de"><seg>Ein Hund.</seg></tuv></tu>'
    (d / "memory.tmx").write_text(f'<tmx version="1.4">\n<body>\n{unit}\n{unit[:40]}', encoding="utf-8")
    load(train_file=str(d / "memory.tmx"))


def tmx_of_two_chinese_variants(d: Path):
    unit = '<tu><tuv xml:lang="en-US"><seg>I am a student.</seg></tuv><tuv xml:lang="zh-CN"><seg>我是学生。</seg></tuv>'
    unit += '<tuv xml:lang="zh-TW"><seg>我是學生。</seg></tuv></tu>'
    (d / "memory.tmx").write_text(f'<tmx version="1.4"><body>{unit}</body></tmx>', encoding="utf-8")
    load(train_file=str(d / "memory.tmx"), target_lang="zh")


def xliff_not_translated_yet(d: Path):
    units = "".join(f'<trans-unit id="{i}"><source>Sentence {i}.</source><target/></trans-unit>' for i in range(3))
    document = (
        f'<xliff version="1.2"><file source-language="en" target-language="de"><body>{units}</body></file></xliff>'
    )
    (d / "document.xlf").write_text(document, encoding="utf-8")
    load(train_file=str(d / "document.xlf"))


def two_sources(d: Path):
    load(data_dir="data", train_file="pairs.tsv")


def one_language_for_both_sides(d: Path):
    write_pairs(d, "train", b"a dog\n", b"ein Hund\n")
    load(data_dir=str(d), source_lang="de", target_lang="de")


def a_tsv_column_language_named_twice(d: Path):
    (d / "pairs.tsv").write_text("a dog\ta cat\tein Hund\n" * 1200, encoding="utf-8")
    load(train_file=str(d / "pairs.tsv"), tsv_languages=["en", "en", "de"])


def no_data_dir(d: Path):
    load(data_dir=str(d / "nowhere"))


def unreachable_hub_dataset(d: Path):
    with (
        mock.patch.object(datasets.config, "HF_HUB_OFFLINE", True),
        mock.patch.object(huggingface_hub.constants, "HF_HUB_OFFLINE", True),
    ):
        load(dataset_name="wmt14", dataset_config_name="de-en")


def dataset_without_a_training_split(d: Path):
    pairs = datasets.Dataset.from_dict({"en": ["A dog runs."], "de": ["Ein Hund rennt."]})
    datasets.DatasetDict(dev=pairs, devtest=pairs).save_to_disk(d / "flores")
    load(dataset_name=str(d / "flores"))


def every_pair_too_long(d: Path):
    for prefix in ("train", "test"):
        write_pairs(d, prefix, *("".join(p[i] + "\n" for p in PAIRS).encode() for i in (0, 1)))
    args = DataArguments(data_dir=str(d), validation_prefix="test", test_prefixes=["test"], max_source_length=2)
    tokenize_corpus(load_parallel_corpus(args, seed=0), word_tokenizer([s for p in PAIRS for s in p]), args)


def output_dir_a_file(d: Path):
    (d / "run").write_text("", encoding="utf-8")
    parse_arguments(["--data_dir", "data", "--output_dir", str(d / "run")])


def resume_from_nothing(d: Path):
    parse_arguments(["--data_dir", "data", "--output_dir", str(d), "--resume_from_checkpoint", str(d / "checkpoint-9")])


def misspelled_setting(d: Path):
    (d / "run.yaml").write_text("data_dir: data\nwarmup_step: 400\n", encoding="utf-8")
    parse_arguments(["--config", str(d / "run.yaml")])


def config_file(text: str) -> Callable[[Path], None]:
    def parse(d: Path):
        (d / "run.yaml").write_text(text, encoding="utf-8")
        parse_arguments(["--config", str(d / "run.yaml"), "--data_dir", "data", "--output_dir", str(d)])

    return parse


def arguments(*flags: str) -> Callable[[Path], None]:
    return lambda d: parse_arguments(["--data_dir", "data", "--output_dir", str(d), *flags])


def config(**fields) -> Callable[[Path], None]:
    return lambda d: VanillaTransformerConfig(**fields)


def model_call(**change: str) -> Callable[[Path], None]:
    def call(d: Path):
        input_ids, _, labels = random_batch()
        names = {"input_ids": input_ids, "labels": labels, "torch": torch}
        inputs = {"input_ids": input_ids, "labels": labels}
        inputs.update({name: eval(expression, {}, names) for name, expression in change.items()})
        tiny_model()(**inputs)

    return call


def generate_with(**settings) -> Callable[[Path], None]:
    def call(d: Path):
        input_ids, attention_mask, _ = random_batch()
        tiny_model().generate(input_ids, attention_mask=attention_mask, **settings)

    return call


def generation_config_file(text: str) -> Callable[[Path], None]:
    def load(d: Path):
        tiny_model().save_pretrained(d / "model")
        (d / "model" / "generation_config.json").write_text(text, encoding="utf-8")
        AutoModelForSeq2SeqLM.from_pretrained(d / "model")

    return load


def non_string(d: Path):
    tokenizer = word_tokenizer(["a dog"])
    TranslationPipeline(model=tiny_model(vocab_size=len(tokenizer)), tokenizer=tokenizer)(["a dog", 3])


def average_into(target: str) -> Callable[[Path, Path], None]:
    def call(d: Path, run: Path):
        copy = shutil.copytree(run, d / "run", ignore=shutil.ignore_patterns("*.safetensors", "optimizer.pt"))
        for checkpoint in copy.glob("checkpoint-*"):
            shutil.copy(run / checkpoint.name / "model.safetensors", checkpoint)
        average_main(["--run_dir", str(copy), "--output_dir", str(copy / target)])

    return call


def train_into_a_project_folder(d: Path):
    (d / "project").mkdir()
    (d / "project" / "README.md").write_text("# My project\n", encoding="utf-8")
    with mock.patch.object(sys, "argv", ["vt-train", *SMOKE, "--output_dir", str(d / "project")]):
        train_cli()


def average_none(d: Path, run: Path):
    average_main(["--run_dir", str(run), "--last", "0", "--output_dir", str(d / "averaged")])


def tune_nan_length_penalty(d: Path, run: Path):
    tune_main([str(run), "--length_penalty", "nan"])


def translate_same_file(d: Path, run: Path):
    (d / "in.txt").write_text("a dog\n", encoding="utf-8")
    translate_main(["--model", str(run), "--input", str(d / "in.txt"), "--output", str(d / "in.txt")])


def translate_no_folder(d: Path, run: Path):
    translate_main(["--model", str(d / "runs" / "nowhere"), "a dog"])


def translate_a_run_still_training(d: Path, run: Path):
    for checkpoint in run.glob("checkpoint-*"):  # a run's folder before training ends: its checkpoints alone
        shutil.copytree(checkpoint, d / "run" / checkpoint.name)
    translate_main(["--model", str(d / "run"), "a dog"])


def translate_no_tokenizer(d: Path, run: Path):
    shutil.copytree(run, d / "model", ignore=shutil.ignore_patterns("tokenizer.json", "checkpoint-*"))
    translate_main(["--model", str(d / "model"), "a dog"])


def translate_weights_cut_short(d: Path, run: Path):
    shutil.copytree(run, d / "model", ignore=shutil.ignore_patterns("checkpoint-*"))
    weights = d / "model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    translate_main(["--model", str(d / "model"), "a dog"])


def translate_binary(d: Path, run: Path):
    (d / "picture.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    translate_main(["--model", str(run), "--input", str(d / "picture.png")])


def visualize_into_missing_folder(d: Path, run: Path):
    visualize_main(["attention", "--model", str(run), "--source", "a dog", "--output", str(d / "nowhere" / "a.png")])


def export_not_ours(d: Path):
    (d / "config.json").write_text('{"model_type": "marian"}', encoding="utf-8")
    export_main(["ctranslate2", str(d), str(d / "out")])


def export_inexpressible(d: Path, run: Path):
    tiny_model(vocab_size=120, decoder_attention_heads=2).save_pretrained(d / "model")
    shutil.copy(run / "tokenizer.json", d / "model")
    export_main(["ctranslate2", str(d / "model"), str(d / "out")])


def translate_zero_batch(d: Path, run: Path):
    positive_int("0")


def translate_folder_as_input(d: Path, run: Path):
    translate_main(["--model", str(run), "--input", str(d)])


def translate_missing_input(d: Path, run: Path):
    translate_main(["--model", str(d / "runs" / "nowhere"), "--input", str(d / "sentences.txt")])


def translate_nan_length_penalty(d: Path, run: Path):
    translate_main(["--model", str(run), "--length_penalty", "nan", "a dog"])


def translate_unknown_device(d: Path, run: Path):
    translate_main(["--model", str(run), "--device", "tpu", "a dog"])


def translate_export_without_engine(d: Path, run: Path):
    export_main(["ctranslate2", str(run), str(d / "ct2")])
    translate_main(["--model", str(d / "ct2"), "a dog"])


def translate_beyond_exported_positions(d: Path, run: Path):
    export_main(["ctranslate2", str(run), str(d / "ct2"), "--max_positions", "4"])
    translate_main(["--engine", "ctranslate2", "--model", str(d / "ct2"), "a dog runs on the grass"])


def export_without_weights(d: Path, run: Path):
    shutil.copytree(run, d / "model", ignore=shutil.ignore_patterns("model.safetensors", "checkpoint-*"))
    export_main(["ctranslate2", str(d / "model"), str(d / "out")])


def export_over_the_model(d: Path, run: Path):
    copy = shutil.copytree(run, d / "run")  # a copy: were the check gone, the export would delete the folder
    export_main(["ctranslate2", str(copy), str(copy), "--force"])


def export_an_export(d: Path, run: Path):
    export_main(["ctranslate2", str(run), str(d / "ct2")])
    export_main(["ctranslate2", str(d / "ct2"), str(d / "out")])


def model_copy(d: Path, run: Path) -> Path:
    return shutil.copytree(run, d / "model", ignore=shutil.ignore_patterns("checkpoint-*", "averaged"))


def swapped_tokens(text: bytes) -> bytes:
    """The tokenizer.json of another vocabulary of the same size: two tokens trade ids."""
    tokenizer = json.loads(text)
    vocab = tokenizer["model"]["vocab"]
    first, second = sorted(vocab, key=vocab.get)[10:12]
    vocab[first], vocab[second] = vocab[second], vocab[first]
    return json.dumps(tokenizer).encode()


def tokenizer_file(change: Callable[[bytes], bytes], command: str = "translate") -> Callable[[Path, Path], None]:
    """`command` on a copy of the run whose tokenizer.json is `change`d."""

    def call(d: Path, run: Path):
        model = model_copy(d, run)
        (model / "tokenizer.json").write_bytes(change((run / "tokenizer.json").read_bytes()))
        if command == "export":
            export_main(["ctranslate2", str(model), str(d / "out")])
        translate_main(["--model", str(model), "a dog"])

    return call


def more_tokens_than_the_model(d: Path, run: Path):
    model = model_copy(d, run)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.add_tokens(["zebra", "giraffe"])
    tokenizer.save_pretrained(model)
    translate_main(["--model", str(model), "a dog"])


def config_without_model_type(d: Path, run: Path):
    model = model_copy(d, run)
    settings = json.loads((model / "config.json").read_text(encoding="utf-8"))
    del settings["model_type"]
    (model / "config.json").write_text(json.dumps(settings), encoding="utf-8")
    translate_main(["--model", str(model), "a dog"])


def damaged_export(damage: Callable[[Path, Path], None]) -> Callable[[Path, Path], None]:
    def call(d: Path, run: Path):
        export_main(["ctranslate2", str(run), str(d / "ct2")])
        damage(d / "ct2", run)
        translate_main(["--engine", "ctranslate2", "--model", str(d / "ct2"), "a dog"])

    return call


def cut_model_bin(ct2: Path, run: Path):
    (ct2 / "model.bin").write_bytes((ct2 / "model.bin").read_bytes()[:10_000])


def another_tokenizer_json(ct2: Path, run: Path):
    (ct2 / "tokenizer.json").write_bytes(swapped_tokens((ct2 / "tokenizer.json").read_bytes()))


def ctranslate2_on(device: str) -> Callable[[Path, Path], None]:
    def call(d: Path, run: Path):
        export_main(["ctranslate2", str(run), str(d / "ct2")])
        translate_main(["--engine", "ctranslate2", "--model", str(d / "ct2"), "--device", device, "a dog"])

    return call


@contextlib.contextmanager
def unwritable(folder: Path):
    """A folder that nothing may write into: read-only, and immutable too for root, whom permissions do not stop."""
    folder.chmod(0o555)
    immutable = os.geteuid() == 0 and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    try:
        yield folder
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)


def export_into_unwritable(d: Path, run: Path):
    with unwritable(d):
        export_main(["ctranslate2", str(run), str(d / "ct2")])


def train(d: Path, *flags: str) -> None:
    with mock.patch.object(sys, "argv", ["vt-train", *SMOKE, "--output_dir", str(d / "run"), *flags]):
        train_cli()


def train_into_unwritable(d: Path):
    with unwritable(d):
        train(d)


def train_with(*flags: str) -> Callable[[Path], None]:
    return lambda d: train(d, *flags)


def full_disk_at_a_checkpoint(d: Path):
    # What torch.save raised when a checkpoint's optimizer.pt met a full disk (a 2 MB tmpfs).
    full = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
    with mock.patch("torch.save", side_effect=full):
        train(d)


def fine_tune_missing_folder(d: Path):
    train(d, "--model_name_or_path", str(d / "nowhere"))


def fine_tune_unreachable_hub_model(d: Path):
    with mock.patch.object(huggingface_hub.constants, "HF_HUB_OFFLINE", True):
        train(d, "--model_name_or_path", "someone/nowhere")


def fine_tune_on_text_the_vocabulary_cannot_write(d: Path, run: Path):
    (d / "data").mkdir()
    for prefix in ("train", "val", "test"):
        (d / "data" / f"{prefix}.en").write_text("".join(en + "\n" for en, _ in PAIRS), encoding="utf-8")
        (d / "data" / f"{prefix}.zh").write_text("我是一个学生。\n" * len(PAIRS), encoding="utf-8")
    train(d, "--model_name_or_path", str(run), "--data_dir", str(d / "data"), "--target_lang", "zh")


def average_other_vocabularies(d: Path, run: Path):
    other = model_copy(d, run / "checkpoint-100")
    (other / "tokenizer.json").write_bytes(swapped_tokens((other / "tokenizer.json").read_bytes()))
    average_main(["--checkpoints", str(run / "checkpoint-80"), str(other), "--output_dir", str(d / "averaged")])


def average_cut_checkpoint(d: Path, run: Path):
    cut = model_copy(d, run / "checkpoint-100")
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:5000])
    average_main(["--checkpoints", str(run / "checkpoint-80"), str(cut), "--output_dir", str(d / "averaged")])


def diversify(d: Path, settings: str) -> None:
    """vt-diversify with a pipeline of smoke-sized stages on the tiny corpus, and `settings` added to its config."""
    smoke = ROOT / "training/configs/smoke.yaml"
    config = d / "pipeline.yaml"
    stages = "".join(f"{stage}: {{config: {smoke}, max_steps: 20}}\n" for stage in ("forward", "backward"))
    config.write_text(f"data_dir: {ROOT / 'examples/tiny'}\noutput_dir: {d / 'out'}\n{stages}{settings}")
    diversify_main(["--config", str(config)])


def diversify_beside_an_earlier_runs_output(d: Path):
    (d / "out" / "diversified").mkdir(parents=True)  # what an earlier forward model's translations made
    diversify(d, "")


def visualize_empty_source(d: Path, run: Path):
    visualize_main(["attention", "--model", str(run), "--source", "\u200b", "--output", str(d / "a.png")])


@contextlib.contextmanager
def without(package: str, *importers: str) -> Iterator[None]:
    """As in a Python where `package` (an optional dependency) is not installed, and the modules `importers`, which
    import it when they are imported, not imported yet. Afterwards only these names are put back: a module imported
    meanwhile stays (onnx's extension aborts the process when it is imported a second time)."""
    blocked = [package, *(name for name in sys.modules if name.startswith(f"{package}."))]
    saved = {name: sys.modules.get(name) for name in (*blocked, *importers)}
    try:
        for name in blocked:
            sys.modules[name] = None  # importing it raises ImportError
        for name in importers:
            sys.modules.pop(name, None)
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for name in importers:  # one imported again became its package's attribute too
            parent, _, child = name.rpartition(".")
            if saved[name] is not None and parent in sys.modules:
                setattr(sys.modules[parent], child, saved[name])


def export_without_ctranslate2(d: Path, run: Path):
    with without("ctranslate2", "vanilla_transformer.export"):
        export_main(["ctranslate2", str(run), str(d / "out")])


def export_onnx_with_torch_2_9(d: Path, run: Path):
    with mock.patch.object(torch, "__version__", "2.9.1+cu128"):
        export_main(["onnx", str(run), str(d / "out")])


def export_without_onnxscript(d: Path, run: Path):
    with without("onnxscript"):
        export_main(["onnx", str(run), str(d / "out")])


def translate_without_ctranslate2(d: Path, run: Path):
    with without("ctranslate2"):
        translate_main(["--engine", "ctranslate2", "--model", str(run), "a dog"])


def visualize_without_matplotlib(d: Path):
    with without("matplotlib"):  # named before the model folder (not there) is read
        visualize_main(["attention", "--model", str(d / "run"), "--source", "a dog", "--output", str(d / "a.png")])


def train_without_schedulefree(d: Path):
    flags = ["--optim", "schedule_free_adamw", "--lr_scheduler_type", "constant", "--output_dir", str(d / "run")]
    with (
        mock.patch("vanilla_transformer.training.arguments.is_schedulefree_available", return_value=False),
        mock.patch.object(sys, "argv", ["vt-train", *SMOKE, *flags]),
    ):
        train_cli()


def train_on_a_spreadsheet_without_openpyxl(d: Path):
    (d / "pairs.xlsx").write_bytes(b"")  # refused before the file is read
    flags = ["--config", SMOKE[1], "--train_file", str(d / "pairs.xlsx"), "--output_dir", str(d / "run")]
    with without("openpyxl"), mock.patch.object(sys, "argv", ["vt-train", *flags]):
        train_cli()


def train_on_a_catalogue_without_polib(d: Path):
    (d / "de.po").write_bytes(b"")  # refused before the file is read
    flags = ["--config", SMOKE[1], "--train_file", str(d / "de.po"), "--output_dir", str(d / "run")]
    with without("polib"), mock.patch.object(sys, "argv", ["vt-train", *flags]):
        train_cli()


def curves_without_matplotlib(d: Path, run: Path):
    with without("matplotlib"):
        curves_main([str(run), "--output", str(d / "curves.png")])


def demo_without_gradio(d: Path, run: Path):
    with without("gradio", "vanilla_transformer.tools.demo"):
        importlib.import_module("vanilla_transformer.tools.demo").main([str(run)])


BUSY_PORT = 47861


def demo(*flags: str) -> Callable[[Path, Path], None]:
    return lambda d, run: demo_main([str(run), *flags])


def demo_on_a_busy_port(d: Path, run: Path):
    with contextlib.ExitStack() as stack:
        with contextlib.suppress(OSError):  # in use already: as good
            stack.enter_context(socket.create_server(("127.0.0.1", BUSY_PORT)))
        demo_main([str(run), "--port", str(BUSY_PORT)])


def pipeline_batch_size(d: Path):
    tokenizer = word_tokenizer(["a dog"])
    TranslationPipeline(model=tiny_model(vocab_size=len(tokenizer)), tokenizer=tokenizer, batch_size="4")


def all_labels_ignored(d: Path):
    input_ids, _, labels = random_batch()
    tiny_model()(input_ids=input_ids, labels=torch.full_like(labels, -100))


# (where, input, what raises it): the rows of the table, in its order.
CASES = [
    ("training data", "`train.en` has 3 lines, `train.de` 2", mismatched_files),
    ("training data", "a line that is not UTF-8 (Latin-1 `été`)", invalid_utf8),
    ("training data", "a UTF-16 file with a broken character (half a surrogate pair)", broken_utf16),
    ("training data", "binary data", binary),
    ("training data", "a `.gz` file cut off while copying", cut_off_gzip),
    ("training data", "empty files", empty_files),
    ("training data", "`--train_file train.en`, one side of line-aligned files", one_side_as_the_training_file),
    ("training data", "a TSV line without a tab", tsv_without_tab),
    (
        "training data",
        "a TSV whose last 300 of 1,500 lines hold a third column (an attribution added part-way)",
        tsv_whose_columns_change_part_way,
    ),
    ("training data", "a CSV whose header row names no language (`text,translation`)", csv_without_the_target_column),
    (
        "training data",
        "Tatoeba's `cmn-eng.tsv` (English first) with `--source_lang zh --target_lang en`, no `--tsv_languages`",
        tsv_in_the_other_order,
    ),
    ("training data", "a TSV of 300 pairs, no validation file (1,000 held out by default)", too_few_pairs_to_hold_out),
    (
        "training data",
        'a TSV whose first column holds row numbers (pandas\' `to_csv(sep="\\t", header=False)`), no `--tsv_languages`',
        row_numbers_as_a_language,
    ),
    ("training data", "a JSONL value that is not a string", jsonl_number),
    ("training data", "a JSONL line that is not JSON", jsonl_not_json),
    ("training data", "a TMX file cut off in a translation unit", tmx_cut_off),
    (
        "training data",
        "a TMX file whose units hold `zh-CN` and `zh-TW` segments, `--target_lang zh`",
        tmx_of_two_chinese_variants,
    ),
    ("training data", "an XLIFF document none of whose units is translated yet", xliff_not_translated_yet),
    ("training data", "`--data_dir` and `--train_file` both on the command line", two_sources),
    ("training data", "`--source_lang de --target_lang de`", one_language_for_both_sides),
    ("training data", "`--tsv_languages en en de`", a_tsv_column_language_named_twice),
    (
        "training data",
        "`--data_dir` names no folder (a relative one is named with the folder it was looked for in)",
        no_data_dir,
    ),
    ("training data", "`--max_source_length 2`: every pair is longer", every_pair_too_long),
    ("training data", "`--dataset_name wmt14` with the Hub out of reach", unreachable_hub_dataset),
    (
        "training data",
        "`--dataset_name` a dataset without a training split (FLORES's `dev` and `devtest`)",
        dataset_without_a_training_split,
    ),
    ("vt-train", "a misspelled setting in the YAML config", misspelled_setting),
    ("vt-train", "`--output_dir` names a file", output_dir_a_file),
    ("vt-train", "`--resume_from_checkpoint` names no checkpoint", resume_from_nothing),
    ("vt-train", "`--preset huge`", arguments("--preset", "huge")),
    ("vt-train", "`--max_tokens 0`", arguments("--max_tokens", "0")),
    ("vt-train", "`--layers -1`", arguments("--layers", "-1")),
    ("vt-train", "`--max_tokens lots`", arguments("--max_tokens", "lots")),
    ("vt-train", "`--bpe_dropout 1.5`", arguments("--bpe_dropout", "1.5")),
    ("vt-train", "`--r_drop_alpha -5`", arguments("--r_drop_alpha", "-5")),
    (
        "vt-train",
        "`--bpe_dropout 0.1 --model_type unigram`",
        arguments("--bpe_dropout", "0.1", "--model_type", "unigram"),
    ),
    ("vt-train", "YAML `max_tokens: true`", config_file("max_tokens: true\n")),
    ("vt-train", "YAML `max_steps: [8]`", config_file("max_steps: [8]\n")),
    ("vt-train", "a YAML key given twice", config_file("max_steps: 5\nmax_steps: 6\n")),
    ("vt-train", "`--config A --config B`", arguments("--config", "a.yaml", "--config", "b.yaml")),
    ("vt-train", "`--fp16` on a CPU", arguments("--fp16")),
    ("configuration", "`dropout=1.5`", config(dropout=1.5)),
    ("configuration", "`scale_embedding='false'` (a string in config.json)", config(scale_embedding="false")),
    ("configuration", "`d_model=0`", config(d_model=0)),
    ("configuration", "`vocab_size=3` (below the special ids)", config(vocab_size=3)),
    ("configuration", "`decoder_ffn_dim='2048'`", config(decoder_ffn_dim="2048")),
    ("model", "a token id outside the vocabulary", model_call(input_ids="input_ids + 99")),
    ("model", "labels for 2 sentences, input_ids for 3", model_call(labels="labels[:2]")),
    ("model", "labels and decoder_input_ids of other lengths", model_call(decoder_input_ids="labels[:, :3]")),
    ("model", "float input_ids", model_call(input_ids="input_ids.float()")),
    ("model", "an empty batch", model_call(input_ids="input_ids[:0]", labels="labels[:0]")),
    ("model", "`generate(num_beams=0)`", generate_with(num_beams=0)),
    ("model", "`generate(length_penalty=float('nan'))`", generate_with(length_penalty=float("nan"))),
    ("model", "`generate(max_new_tokens=2.5)`", generate_with(max_new_tokens=2.5)),
    ("model", "a broken `generation_config.json`", generation_config_file('{"num_beams": 4,')),
    ("model", "`generation_config.json` with `eos_token_id: 500`", generation_config_file('{"eos_token_id": 500}')),
    ("pipeline", "`translator(['a dog', 3])`", non_string),
    ("vt-train", "`--output_dir` a folder of other files (`README.md`)", train_into_a_project_folder),
    ("vt-average-checkpoints", "`--output_dir RUN` (the run itself)", average_into(".")),
    ("vt-average-checkpoints", "`--output_dir RUN/checkpoint-80`", average_into("checkpoint-80")),
    ("vt-average-checkpoints", "`--last 0`", average_none),
    ("vt-tune-decoding", "`--length_penalty nan`", tune_nan_length_penalty),
    ("vt-translate", "`--output` is the `--input` file", translate_same_file),
    ("vt-translate", "`--model` names no folder", translate_no_folder),
    ("vt-translate", "`--model` names a run still training (its checkpoints alone)", translate_a_run_still_training),
    ("vt-translate", "a folder without `tokenizer.json`", translate_no_tokenizer),
    ("vt-translate", "a model folder whose weights file was cut short", translate_weights_cut_short),
    ("vt-translate", "a binary `--input` file", translate_binary),
    ("vt-translate", "`--batch_size 0`", translate_zero_batch),
    ("vt-translate", "`--input` names a folder", translate_folder_as_input),
    ("vt-translate", "`--input` names no file (found before the model is loaded)", translate_missing_input),
    ("vt-translate", "`--length_penalty nan`", translate_nan_length_penalty),
    ("vt-translate", "`--device tpu`", translate_unknown_device),
    ("vt-translate", "a CTranslate2 export without `--engine ctranslate2`", translate_export_without_engine),
    ("vt-translate", "a sentence longer than the export's `--max_positions`", translate_beyond_exported_positions),
    ("vt-visualize", "`--output` in a folder that does not exist", visualize_into_missing_folder),
    ("vt-export", "a folder of another model type", export_not_ours),
    ("vt-export", "a setting CTranslate2 cannot express", export_inexpressible),
    ("vt-export", "a model folder without its weights", export_without_weights),
    ("vt-export", "a CTranslate2 export as the model", export_an_export),
    ("vt-export", "`--force` with the model folder as the output", export_over_the_model),
    ("vt-translate", "a `tokenizer.json` cut short", tokenizer_file(lambda text: text[:300])),
    ("vt-translate", "a binary `tokenizer.json`", tokenizer_file(lambda text: bytes(range(256)) * 8)),
    ("vt-translate", "an empty `tokenizer.json`", tokenizer_file(lambda text: b"")),
    ("vt-translate", "`{}` as `tokenizer.json`", tokenizer_file(lambda text: b"{}")),
    ("vt-translate", "the `tokenizer.json` of another vocabulary of the same size", tokenizer_file(swapped_tokens)),
    ("vt-translate", "a `tokenizer.json` with more tokens than the model", more_tokens_than_the_model),
    ("vt-translate", "a `config.json` without `model_type`", config_without_model_type),
    ("vt-translate", "`--engine ctranslate2`: a `model.bin` cut short", damaged_export(cut_model_bin)),
    (
        "vt-translate",
        "`--engine ctranslate2`: an export without `tokenizer.json`",
        damaged_export(lambda ct2, run: (ct2 / "tokenizer.json").unlink()),
    ),
    (
        "vt-translate",
        "`--engine ctranslate2`: an export without `config.json`",
        damaged_export(lambda ct2, run: (ct2 / "config.json").unlink()),
    ),
    (
        "vt-translate",
        "`--engine ctranslate2`: another vocabulary's `tokenizer.json`",
        damaged_export(another_tokenizer_json),
    ),
    ("vt-translate", "`--engine ctranslate2 --device cpu:1`", ctranslate2_on("cpu:1")),
    ("vt-export", "a `tokenizer.json` cut short", tokenizer_file(lambda text: text[:300], "export")),
    ("vt-export", "the `tokenizer.json` of another vocabulary", tokenizer_file(swapped_tokens, "export")),
    ("vt-export", "an output folder that cannot be written (read-only, immutable)", export_into_unwritable),
    ("vt-train", "an output folder that cannot be written (read-only, immutable)", train_into_unwritable),
    ("vt-train", "a full disk while writing a checkpoint", full_disk_at_a_checkpoint),
    ("vt-train", "`--vocab_size 5` (fewer than the corpus's characters)", train_with("--vocab_size", "5")),
    ("vt-train", "`--vocab_size 100000` (more than the corpus holds)", train_with("--vocab_size", "100000")),
    ("vt-train", "`--model_name_or_path` names a missing folder", fine_tune_missing_folder),
    ("vt-train", "`--model_name_or_path` a Hub id, the Hub out of reach", fine_tune_unreachable_hub_model),
    (
        "vt-train",
        "`--model_name_or_path` RUN (English→German) on pairs whose targets are Chinese",
        fine_tune_on_text_the_vocabulary_cannot_write,
    ),
    ("vt-average-checkpoints", "checkpoints of other vocabularies", average_other_vocabularies),
    ("vt-average-checkpoints", "a checkpoint whose weights were cut short", average_cut_checkpoint),
    ("vt-diversify", "a misspelled setting in the pipeline's config", lambda d: diversify(d, "fine_tuen: {}\n")),
    (
        "vt-diversify",
        "`deadline_minutes: 90m` in the pipeline's config",
        lambda d: diversify(d, "deadline_minutes: 90m\n"),
    ),
    (
        "vt-diversify",
        "a stage to train beside files an earlier run of it made",
        diversify_beside_an_earlier_runs_output,
    ),
    ("vt-visualize", "`--source` of characters the vocabulary drops (U+200B)", visualize_empty_source),
    ("vt-demo", "`--port 70000`", demo("--port", "70000")),
    ("vt-demo", "a port in use", demo_on_a_busy_port),
    ("vt-demo", "`--host nosuch.invalid`", demo("--host", "nosuch.invalid")),
    ("pipeline", "`batch_size='4'`", pipeline_batch_size),
    ("vt-export", "`ctranslate2` without CTranslate2 installed (the serve extra)", export_without_ctranslate2),
    ("vt-export", "`onnx` without onnxscript installed (the onnx extra)", export_without_onnxscript),
    ("vt-export", "`onnx` with torch 2.9.1 installed", export_onnx_with_torch_2_9),
    ("vt-translate", "`--engine ctranslate2` without CTranslate2 installed", translate_without_ctranslate2),
    ("vt-visualize", "matplotlib not installed (the viz extra)", visualize_without_matplotlib),
    ("vt-curves", "matplotlib not installed (the viz extra)", curves_without_matplotlib),
    ("vt-train", "`--optim schedule_free_adamw` without schedulefree installed", train_without_schedulefree),
    (
        "vt-train",
        "`--train_file pairs.xlsx` without openpyxl installed (the excel extra)",
        train_on_a_spreadsheet_without_openpyxl,
    ),
    ("vt-train", "`--train_file de.po` without polib installed (the po extra)", train_on_a_catalogue_without_polib),
    ("vt-demo", "Gradio not installed (the demo extra)", demo_without_gradio),
    ("model", "labels that are all -100", all_labels_ignored),
]


def message(case: Callable, folder: Path, run: Path) -> str:
    """The one line that the case ends in (it must end in an error), with the temporary folder written DIR."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            case(folder, run) if case.__code__.co_argcount == 2 else case(folder)
    except SystemExit as error:  # argparse prints its message and exits with a number
        text = error.code if isinstance(error.code, str) else stderr.getvalue().strip().splitlines()[-1]
    except (ValueError, TypeError, argparse.ArgumentTypeError) as error:
        text = f"{type(error).__name__}: {error}"
    else:
        raise AssertionError(f"{case} raised nothing")
    assert "\n" not in text and "Traceback" not in text
    text = re.sub(r"\.partial-\d+", ".partial-PID", text)  # the process id of a half-written folder
    return text.replace(str(folder), "DIR").replace(str(run), "RUN").replace("|", "\\|")


def test_the_document_tables_what_bad_input_gets(smoke_run, tmp_path):
    rows = ["| where | input | what it gets |", "|---|---|---|"]
    for number, (where, description, case) in enumerate(CASES):
        folder = tmp_path / str(number)
        folder.mkdir()
        rows.append(f"| {where} | {description} | {message(case, folder, smoke_run[0])} |")
    table = "\n".join(rows)
    document = DOCUMENT.read_text(encoding="utf-8")
    before, rest = document.split(TABLE_START)
    written, after = rest.split(TABLE_END)
    if os.environ.get("VT_WRITE_RELIABILITY_DOC"):
        DOCUMENT.write_text(f"{before}{TABLE_START}\n{table}\n{TABLE_END}{after}", encoding="utf-8")
    assert written.strip("\n") == table, "the table is out of date: see this file's docstring"


def test_every_console_script_turns_errors_into_one_line():
    """Each installed command is wrapped by `one_line_errors`: the rows above call the same functions."""
    scripts = [entry for entry in entry_points(group="console_scripts") if entry.value.startswith("vanilla_")]
    assert {entry.name for entry in scripts} >= {"vt-train", "vt-translate", "vt-export", "vt-demo", "vt-visualize"}
    wrapper = one_line_errors(print).__code__
    for entry in scripts:
        assert entry.load().__code__ is wrapper, entry.name


def test_the_machines_errors_are_named_and_bugs_keep_their_traceback():
    def failing(error: BaseException):
        def main(argv):
            raise error

        return one_line_errors(main)

    cases = {
        OSError(errno.ENOSPC, "No space left on device", "/data/run/trainer_state.json"): (
            "error: /data/run/trainer_state.json: the disk is full: free some space and run the same command again."
        ),
        PermissionError(errno.EACCES, "Permission denied", "/data/run"): (
            "error: /data/run: Permission denied: the folder is read-only, immutable or not yours: choose another "
            "folder, or change its permissions."
        ),
        SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"): (
            "error: writing a file failed (Error while serializing: I/O error: No space left on device (os error "
            "28)), as on a full disk: free some space and run the same command again."
        ),
    }
    for error, expected in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            failing(error)(None)
        assert exit_info.value.code == expected
    with pytest.raises(SystemExit) as exit_info:
        failing(KeyboardInterrupt())(None)
    assert exit_info.value.code == 130
    with pytest.raises(RuntimeError, match="a bug"):
        failing(RuntimeError("a bug"))(None)
    with pytest.raises(KeyError):
        failing(KeyError("a bug"))(None)


def test_a_console_script_ends_in_one_line_in_a_real_process(smoke_run, tmp_path):
    broken = shutil.copytree(smoke_run[0], tmp_path / "model", ignore=shutil.ignore_patterns("checkpoint-*"))
    (broken / "tokenizer.json").write_text("{}", encoding="utf-8")
    script = Path(sys.executable).with_name("vt-translate")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "vanilla_transformer.tools.translate"]
    result = subprocess.run([*command, "--model", str(broken), "a dog"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {broken / 'tokenizer.json'} is not a tokenizer that can be read (Model missing. at line 1 column 2): "
        "copy it again."
    )
