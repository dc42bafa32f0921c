"""training.train end to end: the Hub-ready folder, fine-tuning, averaging, resume after a kill, two processes."""

import dataclasses
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq
from transformers.utils import logging as hf_logging

from vanilla_transformer.tools.curves import curve, plot_curves, read_log_history
from vanilla_transformer.tools.report import run_table
from vanilla_transformer.training.arguments import TranslationTrainingArguments, parse_arguments
from vanilla_transformer.training.average_checkpoints import last_checkpoints
from vanilla_transformer.training.average_checkpoints import main as average_main
from vanilla_transformer.training.hub import hub_files
from vanilla_transformer.training.recipe import TranslationTrainer
from vanilla_transformer.training.train import base_model_tokenizer
from vanilla_transformer.training.train import cli as train_cli
from vanilla_transformer.training.train import main as train_main

from .helpers import (
    FAULTS_OF_BLOCKS_MAPPED_ANEW,
    PAIRS,
    ROOT,
    SMOKE,
    SUBPROCESS_DEADLINE_S,
    free_port,
    page_faults_of_freed_blocks,
    shared_data,
    tiny_model,
    translate,
    word_tokenizer,
)


def test_smoke_run_writes_a_hub_ready_folder_that_translates(smoke_run):
    output, report = smoke_run
    assert report["summary"]["steps"] == 100
    assert set(report["results"]) == {"last", "averaged (last 2)"}
    assert report["results"]["averaged (last 2)"]["test"]["bleu"] > 20  # the tiny corpus is learnable in 100 steps
    assert hub_files(output) == [
        "README.md",
        "config.json",
        "configuration_vanilla_transformer.py",
        "generation_config.json",
        "input_checks.py",
        "model.safetensors",
        "modeling_vanilla_transformer.py",
        "pipeline_vanilla_transformer.py",
        "results.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "transformers_versions.py",
    ]
    config = json.loads((output / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("VanillaTransformerForConditionalGeneration")
    assert config.get("use_cache", True) and "use_cache" not in (output / "README.md").read_text()  # decodes cached
    assert set(report["summary"]["validation_bleu"]) == set(report["results"])  # each model's score, named
    generation = json.loads((output / "generation_config.json").read_text())
    assert generation["num_beams"] == 4 and generation["length_penalty"] == 0.6
    assert generation["max_length_beyond_source"] == 50 and "max_length" not in generation
    tokenizer = AutoTokenizer.from_pretrained(output)
    assert (config["pad_token_id"], config["eos_token_id"]) == (tokenizer.pad_token_id, tokenizer.eos_token_id)
    # A training sentence ("Ein Hund schläft im Park."): 100 steps learn its subject; the rest of a model this small
    # flips between the corpus's dog sentences with the draw of batches and dropout masks.
    (translation,) = translate(output, ["A dog sleeps in the park."])
    assert translation.startswith("Ein Hund "), translation


def test_the_card_has_parseable_metadata_with_the_real_results(smoke_run):
    output, report = smoke_run
    card = (output / "README.md").read_text(encoding="utf-8")
    front_matter = yaml.safe_load(card.split("---")[1])
    assert front_matter["language"] == ["en", "de"] and front_matter["pipeline_tag"] == "translation"
    results = front_matter["model-index"][0]["results"]
    bleu = {r["dataset"]["split"]: r["metrics"][0]["value"] for r in results}
    assert bleu["test"] == round(report["results"]["averaged (last 2)"]["test"]["bleu"], 2)
    assert "{{" not in card and "{%" not in card  # every template field was filled


def test_the_card_is_about_its_own_model_alone_and_valid_for_the_hub(smoke_run):
    from huggingface_hub import ModelCard

    output, report = smoke_run
    card = ModelCard.load(output / "README.md")  # parses and checks the metadata as the Hub's client does
    assert card.data.eval_results and {result.dataset_split for result in card.data.eval_results} == {
        "validation",
        "test",
    }
    assert card.data.datasets is None  # local files are no Hub dataset id
    text = card.text
    assert f"# {output.name}\n" in text and f"vt-export ctranslate2 {output.name} {output.name}-ct2" in text
    for other in ("Multi30K", "Tatoeba", "run 14", "wu2021", "47 minutes", "How the configuration was chosen"):
        assert other not in text, other
    steps, bleu = report["summary"]["steps"], report["results"]["averaged (last 2)"]["test"]["bleu"]
    assert f"{steps:,} steps" in text and f"{bleu:.2f}" in text and "| label smoothing | 0.1 |" in text
    assert "4+4 layers" not in text and "2+2 layers, d_model 64" in text  # the smoke model's own shape


def test_the_cards_languages_are_the_codes_the_hub_takes_with_regions_apart(tmp_path):
    """The Hub's metadata check takes only lowercase ISO 639 codes in `language`: "de-DE" there is an error shown on
    the model's page; a code with a region goes in `language_bcp47`."""
    from huggingface_hub import ModelCard

    data = tmp_path / "data"
    data.mkdir()
    for path in (ROOT / "examples/tiny").iterdir():  # the tiny corpus with its German named de-DE
        shutil.copy(path, data / path.name.replace(".de", ".de-DE"))
    output = tmp_path / "run"
    train_main(
        [*SMOKE, "--data_dir", str(data), "--target_lang", "de-DE", "--max_steps", "4", "--output_dir", str(output)]
    )
    card = ModelCard.load(output / "README.md")
    assert card.data.language == ["en", "de"] and card.data.language_bcp47 == ["de-DE"]


def test_the_cards_settings_name_the_schedule_and_weight_decay_word_late_and_layer_dropout_only_where_used():
    from vanilla_transformer.training.train import card_settings

    config = {"vocab_size": 120, "dropout": 0.1}
    assert card_settings(parse_arguments(SMOKE), config)["schedule"] == "inverse_sqrt"  # was SchedulerType.INVERSE_SQRT
    decay = ["--lr_scheduler_type", "warmup_stable_decay", "--lr_scheduler_kwargs", '{"num_decay_steps": 30}']
    schedule = card_settings(parse_arguments([*SMOKE, *decay]), config)["schedule"]
    assert schedule == "warmup_stable_decay (num_decay_steps 30)"
    assert "weight decay" not in card_settings(parse_arguments(SMOKE), config)
    settings = card_settings(parse_arguments([*SMOKE, "--weight_decay", "0.01"]), config)
    assert settings["weight decay"] == 0.01 and settings["optimizer"] == "Adam(0.9, 0.98, 1e-09)"
    assert "word dropout" not in card_settings(parse_arguments(SMOKE), config)
    assert card_settings(parse_arguments([*SMOKE, "--word_dropout", "0.1"]), config)["word dropout"] == 0.1
    assert "late dropout" not in card_settings(parse_arguments(SMOKE), config)
    late = card_settings(parse_arguments([*SMOKE, "--late_dropout_steps", "2000"]), config)["late dropout"]
    assert late == "none for the first 2,000 steps"
    assert "LayerDrop" not in card_settings(parse_arguments(SMOKE), config)
    assert card_settings(parse_arguments([*SMOKE, "--layer_drop", "0.1"]), config)["LayerDrop"] == 0.1
    schedule_free = [*SMOKE, "--optim", "schedule_free_adamw", "--lr_scheduler_type", "constant"]
    optimizer = card_settings(parse_arguments(schedule_free), config)["optimizer"]
    assert optimizer == "schedule_free_adamw(0.9, 0.98, 1e-09), schedule-free (Defazio et al., 2024)"
    optimizer = card_settings(parse_arguments([*SMOKE, "--muon"]), config)["optimizer"]
    assert optimizer == "Muon (Jordan et al., 2024) for the layers' matrices, Adam(0.9, 0.98, 1e-09) for the rest"
    assert "exponential average of the weights" not in card_settings(parse_arguments(SMOKE), config)
    ema = card_settings(parse_arguments([*SMOKE, "--ema_decay", "0.999"]), config)["exponential average of the weights"]
    assert ema == "decay 0.999"


def test_yaml_config_gives_defaults_and_flags_override_it():
    model, data, vocabulary, training = parse_arguments([*SMOKE, "--max_steps", "7", "--output_dir", "elsewhere"])
    assert (model.d_model, vocabulary.vocab_size, data.test_prefixes) == (64, 120, ["test"])
    assert (training.max_steps, training.output_dir) == (7, "elsewhere")
    assert (training.adam_beta2, training.adam_epsilon, training.label_smoothing_factor) == (0.98, 1e-9, 0.1)


def training_configs() -> list[Path]:
    """The shipped vt-train configs (not vt-diversify's, whose stages tests/test_diversify.py parses)."""
    configs = sorted((ROOT / "training/configs").glob("*.yaml"))
    return [path for path in configs if "forward" not in yaml.safe_load(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("config", training_configs(), ids=lambda path: path.stem)
def test_every_shipped_config_parses_into_the_values_its_file_states(config):
    """A shipped config with a misspelt key, a refused value or a comment that swallowed its value fails here, not
    after a user has waited for its data to load."""
    stated = yaml.safe_load(config.read_text(encoding="utf-8"))
    parsed = {}
    for arguments in parse_arguments(["--config", str(config)]):
        parsed.update(vars(arguments))
    for name in ("vocab_size", "dropout", "max_steps", "learning_rate", "warmup_steps", "max_tokens"):
        if name in stated:
            assert parsed[name] == stated[name], name


@pytest.mark.parametrize("name", ["tatoeba_zh_en", "tatoeba_zh_en.yaml", "training/configs/tatoeba_zh_en.yaml"])
def test_a_shipped_config_is_found_by_name_outside_the_repository(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)  # as after `pip install vanilla-transformer`: no training/configs here
    data = parse_arguments(["--config", name, "--train_file", "cmn.txt"])[1]
    assert (data.source_lang, data.target_lang, data.tsv_languages, data.train_file) == (
        "zh",
        "en",
        ["en", "zh"],
        ["cmn.txt"],
    )
    (tmp_path / "tatoeba_zh_en.yaml").write_text("source_lang: de\n")  # a file of one's own comes first
    assert parse_arguments(["--config", "tatoeba_zh_en.yaml"])[1].source_lang == "de"
    with pytest.raises(SystemExit, match=r"no config file tatoeba\.yaml, and no shipped config .*\(multi30k_en_de, "):
        parse_arguments(["--config", "tatoeba.yaml"])


def test_each_stack_can_have_its_own_depth_and_it_wins_over_layers():
    model = parse_arguments([*SMOKE, "--layers", "3", "--encoder_layers", "5", "--output_dir", "x"])[0]
    config = model.model_config()
    assert (config.encoder_layers, config.decoder_layers) == (5, 3)
    with pytest.raises(SystemExit, match=re.escape("decoder_layers=0: must be a whole number of at least 1")):
        parse_arguments([*SMOKE, "--decoder_layers", "0"])


def test_a_data_source_on_the_command_line_replaces_the_configs(tmp_path):
    data = parse_arguments([*SMOKE[:2], "--train_file", "pairs.tsv", "--output_dir", "elsewhere"])[1]
    assert (data.train_file, data.data_dir) == (["pairs.tsv"], None)  # the config's data_dir gives way


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--preset", "huge"], "--preset 'huge': use 'base' or 'big'"),
        (["--layers", "-2"], "encoder_layers=-2: must be a whole number of at least 1"),
        (["--dropout", "1.5"], "dropout=1.5: a dropout probability"),
        (["--max_tokens", "0"], "--max_tokens 0: must be at least 1"),
        (["--num_beams", "0"], "--num_beams 0: must be at least 1"),
        (["--curriculum_steps", "-5"], "--curriculum_steps -5: must be at least 0"),
        (["--word_dropout", "1.0"], "--word_dropout 1.0: must be in [0, 1) (0: off)"),
        (["--late_dropout_steps", "-1"], "--late_dropout_steps -1: must be at least 0"),
        (["--layer_drop", "1.0"], "--layer_drop 1.0: must be in [0, 1) (0: off)"),
        (["--torch_compile_backend", "cudagraphs"], "--torch_compile_backend cudagraphs replays the CUDA graph"),
        (["--cuda_graphs", "--use_cpu", "true"], "--cuda_graphs needs a CUDA GPU: leave it out."),
        (["--optim", "schedule_free_adamw"], "--optim schedule_free_adamw sets its own rate (a warmup over"),
        (["--muon", "--optim", "adafactor"], "--muon steps the layers' matrices with Muon and the rest with torch"),
        (["--ema_decay", "1.0"], "--ema_decay 1.0: must be in [0, 1) (0: off)"),
        (
            ["--ema_decay", "0.99", "--optim", "schedule_free_adamw", "--lr_scheduler_type", "constant"],
            "--ema_decay with --optim schedule_free_adamw: the optimizer keeps an average of its own",
        ),
        (
            ["--load_best_model_at_end", "true", "--eval_strategy", "steps"],  # smoke.yaml averages 2 checkpoints
            "--load_best_model_at_end ships the checkpoint that validated best, --average_checkpoints and",
        ),
        (["--max_tokens", "lots"], "argument --max_tokens/--max-tokens: invalid int value: 'lots'"),
    ],
)
def test_bad_arguments_end_in_one_line_naming_the_value_before_any_work(flags, message):
    with pytest.raises(SystemExit, match=re.escape(f"error: {SMOKE[1]} with the command line: {message}")):
        parse_arguments([*SMOKE, *flags])


def test_a_python_that_cannot_score_the_evaluation_is_told_so_before_training(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sacremoses", None)  # a Python without sacremoses: the tokenized BLEU fails
    with pytest.raises(ValueError, match=r"scoring translations into 'de': the tokenized BLEU .* pip install sacremo"):
        train_main([*SMOKE, "--output_dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()  # before the vocabulary, the data and the training


@pytest.mark.parametrize("code", ["ja", "jpn"])
def test_a_python_without_mecab_is_told_so_before_training_into_japanese(tmp_path, monkeypatch, code):
    monkeypatch.setattr("sacrebleu.tokenizers.tokenizer_ja_mecab.MeCab", None)  # as sacreBLEU leaves it without MeCab
    # The extra that installs MeCab is named by the two-letter code, whatever code the user gave.
    message = rf"scoring translations into '{code}': sacreBLEU's ja-mecab tokenizer .* pip install 'sacrebleu\[ja\]'"
    with pytest.raises(ValueError, match=message):
        train_main([*SMOKE, "--target_lang", code, "--output_dir", str(tmp_path / "run")])
    assert not (tmp_path / "run").exists()


def test_help_describes_the_command_and_trainer_settings_the_recipe_replaces_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        parse_arguments(["--help"])
    printed = capsys.readouterr().out
    assert printed.startswith("usage: vt-train") and "--config FILE" in printed and "Hub-ready" in printed
    sections = ["\nmodel (", "\ndata (", "\nvocabulary (", "\ntraining: the recipe's settings"]
    assert [printed.index(section) for section in sections] == sorted(printed.index(s) for s in sections)
    training = printed[printed.index(sections[-1]) :]
    # Python 3.13's argparse writes "--max_tokens, --max-tokens MAX_TOKENS", earlier ones "--max_tokens MAX_TOKENS".
    names = ("max_tokens", "lr_scale", "num_beams", "average_checkpoints")
    assert all(re.search(rf"--{name}[ ,]", training) for name in names)
    with pytest.raises(SystemExit, match=r"--per_device_train_batch_size has no effect here: .*--max_tokens"):
        parse_arguments([*SMOKE, "--per_device_train_batch_size", "8"])
    for flag, value in (("train_sampling_strategy", "group_by_length"), ("dataloader_drop_last", "true")):
        with pytest.raises(SystemExit, match=rf"--{flag} has no effect here: training batches"):
            parse_arguments([*SMOKE, f"--{flag}", value])
    with pytest.raises(SystemExit, match=r"--auto_find_batch_size has no effect here: .*a smaller --max_tokens"):
        parse_arguments([*SMOKE, "--auto_find_batch_size", "true"])
    # Seq2SeqTrainer's decoding settings reach its evaluations only, which would then score another decoding.
    for flag, value, instead in (("generation_num_beams", "1", "--num_beams"), ("generation_max_length", "6", "--max")):
        with pytest.raises(SystemExit, match=rf"--{flag} would change how the evaluations decode.*give {instead}"):
            parse_arguments([*SMOKE, f"--{flag}", value])
    config = tmp_path / "run.yaml"
    config.write_text("lr_scheduler_type: cosine\n", encoding="utf-8")  # the Trainer's schedules: a setting like any
    assert parse_arguments(["--config", str(config)])[-1].lr_scheduler_type == "cosine"
    assert parse_arguments(SMOKE)[-1].lr_scheduler_type == "inverse_sqrt"  # §5.3 by default


def test_config_values_are_typed_checked_and_overridden_by_the_command_line(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        "data_dir: examples/tiny\nmax_tokens: 512\nshare_embeddings: false\ntest_prefixes: [test, val]\n",
        encoding="utf-8",
    )
    model_args, data_args, _, args = parse_arguments(["--config", str(config), "--output_dir", str(tmp_path)])
    assert (args.max_tokens, model_args.share_embeddings, data_args.test_prefixes) == (512, False, ["test", "val"])
    assert parse_arguments(["--config", str(config), "--max_tokens", "64"])[-1].max_tokens == 64
    for bad, message in (("max_tokens: lots", "invalid int value: 'lots'"), ("max_tokens: 0", "must be at least 1")):
        config.write_text(f"data_dir: examples/tiny\n{bad}\n", encoding="utf-8")
        with pytest.raises(SystemExit, match=re.escape(f"error: {config} with the command line: ") + ".*" + message):
            parse_arguments(["--config", str(config)])


def test_a_misspelled_config_setting_names_the_file_and_the_setting(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("data_dir: examples/tiny\nmax_tokenz: 512\n", encoding="utf-8")
    with pytest.raises(
        SystemExit, match=r"run\.yaml: unknown setting\(s\) 'max_tokenz' \(did you mean 'max_tokens'\?\)"
    ):
        parse_arguments(["--config", str(config)])


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("max_tokens: true\n", "argument --max_tokens/--max-tokens: invalid int value: 'true'"),  # was a 1-token budget
        ("max_steps: 8.5\n", "argument --max_steps/--max-steps: invalid int value: '8.5'"),
        ("max_steps: [8]\n", r"max_steps: \[8\] is not one value; max_steps takes one"),
        ("max_steps: {steps: 8}\n", r"max_steps: \{'steps': 8\} is not one value; max_steps takes one"),
        ("max_steps: 5\nwarmup_steps: 2\nmax_steps: 6\n", "'max_steps' is given twice \\(again on line 3\\)"),
    ],
)
def test_config_values_are_checked_as_the_command_lines_are(tmp_path, yaml_text, message):
    config = tmp_path / "run.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(SystemExit, match=message):
        parse_arguments(["--config", str(config), "--data_dir", "examples/tiny"])


def test_a_config_mapping_reaches_the_schedule_that_reads_it(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(
        "data_dir: examples/tiny\nwarmup_steps: 20\nlr_scheduler_type: warmup_stable_decay\n"
        "lr_scheduler_kwargs: {num_decay_steps: 4, decay_type: linear}\n",
        encoding="utf-8",
    )
    args = parse_arguments(["--config", str(config), "--output_dir", str(tmp_path / "run")])[-1]
    assert args.lr_scheduler_kwargs == {"num_decay_steps": 4, "decay_type": "linear"}  # refused before
    trainer = TranslationTrainer(model=tiny_model(), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=100)
    rates = []
    for _ in range(100):
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
        rates.append(trainer.lr_scheduler.get_last_lr()[0])
    peak = trainer.optimizer.defaults["lr"]
    assert rates[80] == pytest.approx(peak) and rates[97] == pytest.approx(peak / 2) and rates[-1] == 0


def test_one_word_for_a_list_is_a_list_of_one_and_a_second_config_is_refused(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("test_prefixes: test\n", encoding="utf-8")  # iterated letter by letter before
    assert parse_arguments(["--config", str(config), "--data_dir", "examples/tiny"])[1].test_prefixes == ["test"]
    with pytest.raises(SystemExit, match="--config is given twice"):  # the second was ignored before
        parse_arguments(["--config", str(config), "--config", "missing.yaml"])


def test_bf16_is_left_to_a_measurement_unless_a_flag_says(tmp_path, monkeypatch):
    def parsed(*flags: str):
        return parse_arguments([*SMOKE, "--output_dir", str(tmp_path / "run"), *flags])[-1]

    assert parsed().bf16 is None and parsed().mixed_precision == "no"  # undecided: the Trainer would read it as off
    assert parsed("--bf16").bf16 is True and parsed("--bf16").mixed_precision == "bf16"
    assert parsed("--bf16", "false").bf16 is False
    with monkeypatch.context() as machine, pytest.raises(SystemExit, match="--fp16 needs a CUDA GPU"):
        machine.setattr(torch.cuda, "is_available", lambda: False)
        parsed("--fp16")  # on a CPU it was silently ignored
    args = parsed()
    args.set_bf16(False)
    assert (args.bf16, args.mixed_precision) == (False, "no")
    args.set_bf16(True)
    assert (args.bf16, args.mixed_precision) == (True, "bf16")
    # What the Trainer's accelerator then runs with: the decision taken after parsing is the one that trains.
    assert TranslationTrainer(model=tiny_model(), args=args).accelerator.mixed_precision == "bf16"
    assert TranslationTrainer(model=tiny_model(), args=parsed()).accelerator.mixed_precision == "no"


def test_the_fused_output_loss_and_random_bits_dropout_are_left_to_the_trainer_unless_a_flag_says(tmp_path):
    def trainer(*flags: str) -> TranslationTrainer:
        args = parse_arguments([*SMOKE, "--output_dir", str(tmp_path / "run"), "--use_cpu", "true", *flags])[-1]
        return TranslationTrainer(model=tiny_model(), args=args)

    assert trainer().args.fused_output_loss is None and trainer().fuse_output_loss  # one CPU process: on
    assert trainer("--fused_output_loss").fuse_output_loss
    assert not trainer("--fused_output_loss", "false").fuse_output_loss
    assert not trainer("--r_drop_alpha", "1").fuse_output_loss
    default = trainer()
    assert default.args.random_bits_dropout is None and default.random_bits_dropout  # a CPU: on
    assert trainer("--random_bits_dropout").random_bits_dropout
    kept = trainer("--random_bits_dropout", "false")
    assert not kept.random_bits_dropout
    dropouts = {type(module) for module in kept.model.modules() if isinstance(module, torch.nn.Dropout)}
    assert dropouts == {torch.nn.Dropout}


def probe_batch(model) -> dict:
    """A batch of the run's kind (training.train.typical_batch): token-budget batches of padded pairs."""
    from datasets import Dataset

    from vanilla_transformer.training.train import typical_batch

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    features = [tokenizer(source, text_target=target) for source, target in PAIRS]
    dataset = Dataset.from_list([dict(feature) for feature in features])
    return typical_batch(dataset, DataCollatorForSeq2Seq(tokenizer, model=model), max_tokens=24)


def test_the_probe_batch_is_a_middle_token_budget_batch_of_the_run(model):
    from vanilla_transformer.training.batching import TokenBudgetBatchSampler

    batch = probe_batch(model)
    assert set(batch) == {"input_ids", "attention_mask", "labels", "decoder_input_ids"}
    lengths = [len(source.split()) + 2 for source, _ in PAIRS]  # words, "." and </s>
    assert batch["input_ids"].numel() <= 24 and batch["input_ids"].shape[0] >= 2
    assert batch["input_ids"].shape[1] in lengths
    sampler = TokenBudgetBatchSampler(lengths, [len(target.split()) + 2 for _, target in PAIRS], max_tokens=24)
    assert batch["input_ids"].shape[0] == len(sampler.batches[len(sampler) // 2])


def test_bf16_asked_for_on_a_cpu_that_emulates_it_is_warned_of(tmp_path, monkeypatch, caplog):
    import vanilla_transformer.training.arguments as arguments

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for flags, instructions, warned in (
        (["--bf16"], set(), True),
        (["--bf16"], {"amx_bf16"}, False),
        ([], set(), False),  # left to the probe, which never picks bf16 there
        (["--bf16", "false"], set(), False),
    ):
        monkeypatch.setattr(arguments, "cpu_bf16_instructions", lambda found=instructions: found)
        caplog.clear()
        with caplog.at_level("WARNING", logger="vanilla_transformer.training.arguments"):
            parse_arguments([*SMOKE, "--output_dir", str(tmp_path / "run"), *flags])
        assert ("--bf16 on a CPU without AMX or AVX512-BF16" in caplog.text) is warned, (flags, instructions)


def test_cpu_bf16_needs_the_instructions_and_a_faster_training_step(monkeypatch, tmp_path, model):
    import vanilla_transformer.training.precision as precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    probed = []
    for flags, speedup, expected in (
        (set(), 5.0, False),  # no bf16 instructions: emulated, never probed
        ({"avx512_bf16"}, 1.7, True),  # the AMD EPYC of the issue, a model whose step gains
        ({"amx_bf16"}, 0.8, False),  # the instructions, but the step is slower (the Multi30K Tiny: casts cost more)
    ):
        monkeypatch.setattr(precision, "cpu_bf16_instructions", lambda flags=flags: flags)
        monkeypatch.setattr(precision, "bf16_step_speedup", lambda model, batch, s=speedup: probed.append(s) or s)
        assert precision.bf16_trains_faster(model, lambda: {}) is expected
    assert probed == [1.7, 0.8]
    monkeypatch.undo()
    capabilities = {"avx512_bf16": True, "amx_bf16": False, "avx2": True}  # as torch.cpu.get_capabilities() says
    # torch 2.8 has no get_capabilities: there no CPU is taken to have the instructions.
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: capabilities, raising=False)
    assert precision.cpu_bf16_instructions() == {"avx512_bf16"}
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {"avx2": True})
    assert precision.cpu_bf16_instructions() == set()
    monkeypatch.delattr(torch.cpu, "get_capabilities")
    assert precision.cpu_bf16_instructions() == set()


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="flush-to-zero is x86's")
def test_training_reads_and_writes_subnormal_floats_as_zero_unless_told_not_to(smoke_run, tmp_path):
    subnormal = torch.finfo(torch.float32).tiny / 4  # a float32 below the smallest normal one
    try:
        assert torch.tensor(subnormal).item() == 0  # the smoke run trained with the default
        train_main([*SMOKE, "--flush_denormal", "false", "--max_steps", "2", "--output_dir", str(tmp_path / "run")])
        assert torch.tensor(subnormal).item() == pytest.approx(subnormal)
    finally:
        torch.set_flush_denormal(False)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt() is glibc's")
def test_memory_a_step_frees_is_reused_without_faulting_its_pages_in_again():
    default = page_faults_of_freed_blocks("")
    reused = page_faults_of_freed_blocks(
        "from vanilla_transformer.training.allocator import reuse_freed_memory\nassert reuse_freed_memory()"
    )
    assert default > FAULTS_OF_BLOCKS_MAPPED_ANEW
    assert reused < default / 100


def test_the_allocator_is_left_alone_where_the_c_library_is_not_glibc(monkeypatch):
    import vanilla_transformer.training.allocator as allocator

    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("", ""))
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda name: pytest.fail("mallopt() called outside glibc"))
    assert allocator.reuse_freed_memory() is False
    monkeypatch.undo()
    assert parse_arguments([*SMOKE, "--reuse_freed_memory", "false"])[3].reuse_freed_memory is False
    assert parse_arguments(SMOKE)[3].reuse_freed_memory is True


def test_the_bf16_probe_times_real_steps_and_leaves_no_trace(model):
    """The probe trains a copy with an Adam of its own: the run that follows is the same as without it."""
    from vanilla_transformer.training.precision import bf16_step_speedup

    batch = probe_batch(model)
    weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    random_state = torch.random.get_rng_state()
    assert bf16_step_speedup(model, batch) > 0
    assert torch.equal(torch.random.get_rng_state(), random_state)
    assert all(torch.equal(tensor, weights[name]) for name, tensor in model.state_dict().items())
    assert all(parameter.grad is None for parameter in model.parameters())
    assert not model.training


def test_batches_take_few_shapes_under_torch_compile_and_workers_default_to_the_device(model):
    from vanilla_transformer.training.train import batch_collator

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    features = [tokenizer(source, text_target=target) for source, target in PAIRS[:3]]
    for flags, multiple in (([], None), (["--torch_compile", "true"], 8)):
        args = parse_arguments([*SMOKE, "--output_dir", "elsewhere", *flags])[-1]
        batch = batch_collator(tokenizer, model, args)(features)
        if multiple:
            assert batch["input_ids"].shape[1] % 8 == 0 and batch["labels"].shape[1] % 8 == 0
        else:
            assert batch["input_ids"].shape[1] == max(len(f["input_ids"]) for f in features)
    assert args.dataloader_num_workers == (2 if torch.cuda.is_available() else 0)  # on a CPU its cores train
    assert parse_arguments([*SMOKE, "--dataloader_num_workers", "3"])[-1].dataloader_num_workers == 3
    # Unpinned on a GPU too: with persistent workers torch 2.11 waited 5 s for each worker at exit (pytorch#81794).
    defaults = {f.name: f.default for f in dataclasses.fields(TranslationTrainingArguments)}
    assert defaults["dataloader_pin_memory"] is False


def test_smoke_run_on_real_multi30k_pairs(tmp_path):
    data = shared_data() / "multi30k"
    flags = ["--data_dir", str(data), "--test_prefixes", "test_2016_flickr", "--max_train_samples", "300"]
    flags += ["--max_eval_samples", "20", "--vocab_size", "400", "--max_steps", "20", "--average_checkpoints", "0"]
    report = train_main([*SMOKE, *flags, "--output_dir", str(tmp_path / "run")])
    assert set(report["results"]["last"]) == {"validation", "test_2016_flickr"}
    assert len(translate(tmp_path / "run", ["Two dogs play in the snow."])) == 1


def test_the_exponential_average_is_evaluated_after_the_averaged_model_and_ships(tmp_path):
    from vanilla_transformer.training.exponential_average import EXPONENTIAL_AVERAGE

    output = tmp_path / "run"
    report = train_main([*SMOKE, "--max_steps", "40", "--ema_decay", "0.9", "--output_dir", str(output)])
    assert list(report["results"]) == ["last", "averaged (last 2)", "exponential average"]
    assert report["summary"]["shipped_model"] == "exponential average"
    shipped = AutoModelForSeq2SeqLM.from_pretrained(output).state_dict()  # tied weights under each of their names
    average = load_file(output / "checkpoint-40" / EXPONENTIAL_AVERAGE)
    assert average.keys() and all(torch.equal(shipped[name], tensor) for name, tensor in average.items())
    assert not (output / "averaged" / EXPONENTIAL_AVERAGE).exists()  # a model folder, not a checkpoint
    assert "| exponential average of the weights | decay 0.9 |" in (output / "README.md").read_text()
    assert all(set(splits) == {"validation", "test"} for splits in report["results"].values())


def test_without_test_every_model_only_the_shipped_model_translates_the_test_sets(tmp_path):
    flags = ["--max_steps", "40", "--ema_decay", "0.9", "--test_every_model", "false"]
    report = train_main([*SMOKE, *flags, "--output_dir", str(tmp_path / "run")])
    results = report["results"]
    assert list(results) == ["last", "averaged (last 2)", "exponential average"]
    assert set(results["last"]) == set(results["averaged (last 2)"]) == {"validation"}
    assert set(results["exponential average"]) == {"validation", "test"}
    assert set(report["summary"]["validation_bleu"]) == set(results)  # all three still compared on validation
    flags = ["--max_steps", "40", "--average_checkpoints", "0", "--test_every_model", "false"]
    report = train_main([*SMOKE, *flags, "--output_dir", str(tmp_path / "alone")])
    assert set(report["results"]["last"]) == {"validation", "test"}  # the last checkpoint ships: tested


def test_load_best_model_at_end_ships_the_best_checkpoint_under_its_name(tmp_path):
    output = tmp_path / "run"
    flags = ["--max_steps", "40", "--eval_strategy", "steps", "--eval_steps", "20", "--average_checkpoints", "0"]
    # The lowest BLEU as the best: the first checkpoint's, not the last, so the test can tell them apart.
    flags += ["--load_best_model_at_end", "true", "--metric_for_best_model", "bleu", "--greater_is_better", "false"]
    report = train_main([*SMOKE, *flags, "--output_dir", str(output)])
    best_label = "best (checkpoint-20)"
    assert report["summary"]["shipped_model"] == best_label and list(report["results"]) == [best_label]
    shipped = AutoModelForSeq2SeqLM.from_pretrained(output).state_dict()
    best = AutoModelForSeq2SeqLM.from_pretrained(output / "checkpoint-20").state_dict()
    assert all(torch.equal(shipped[name], tensor) for name, tensor in best.items())
    assert "The shipped model (best (checkpoint-20))" in (output / "README.md").read_text()


def validation_loss(folder: Path, pairs: list[tuple[str, str]]) -> float:
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    batch = DataCollatorForSeq2Seq(tokenizer, model=model)([tokenizer(s, text_target=t) for s, t in pairs])
    with torch.no_grad():
        return model(**batch).loss.item()


def test_fine_tuning_reuses_the_vocabulary_and_lowers_the_loss_on_new_data(smoke_run, tmp_path):
    start, _ = smoke_run
    new_data = tmp_path / "data"
    new_data.mkdir()
    for split in ("train", "val"):
        for i, lang in enumerate(("en", "de")):
            (new_data / f"{split}.{lang}").write_text("".join(p[i] + "\n" for p in PAIRS), encoding="utf-8")
    output = tmp_path / "finetuned"
    flags = ["--model_name_or_path", str(start), "--data_dir", str(new_data), "--test_prefixes", "val"]
    train_main([*SMOKE, *flags, "--max_steps", "30", "--average_checkpoints", "0", "--output_dir", str(output)])
    assert (output / "tokenizer.json").read_text() == (start / "tokenizer.json").read_text()
    assert validation_loss(output, PAIRS) < validation_loss(start, PAIRS) - 0.5


def test_training_and_averaging_show_no_bar_for_the_weights_they_read_and_write(smoke_run, tmp_path, capfd):
    """transformers' bars, at each checkpoint written and each model folder read, would cut the Trainer's lines."""
    start, _ = smoke_run
    capfd.readouterr()
    shown = hf_logging.is_progress_bar_enabled()
    flags = ["--model_name_or_path", str(start), "--max_steps", "20", "--save_steps", "10"]
    train_main([*SMOKE, *flags, "--output_dir", str(tmp_path / "run")])  # a folder read, two written, one averaged
    average_main(["--run_dir", str(tmp_path / "run"), "--last", "2", "--output_dir", str(tmp_path / "avg")])
    log = capfd.readouterr().err
    assert "20/20" in log  # the Trainer's own bar
    assert "Loading weights" not in log and "Writing model shards" not in log
    assert hf_logging.is_progress_bar_enabled() == shown  # as it was, for what the process does next (a download)


def test_a_base_folder_whose_tokenizer_pads_on_the_left_is_fine_tuned_on_batches_padded_on_the_right(
    smoke_run, tmp_path
):
    start, _ = smoke_run
    AutoTokenizer.from_pretrained(start, padding_side="left").save_pretrained(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["padding_side"] == "left"
    tokenizer = base_model_tokenizer(str(tmp_path))
    collator = DataCollatorForSeq2Seq(tokenizer, model=AutoModelForSeq2SeqLM.from_pretrained(start))
    batch = collator([tokenizer(s, text_target=t) for s, t in PAIRS[3:6]])
    assert (batch["labels"][:, 0] != -100).all() and (batch["attention_mask"][:, 0] == 1).all()


def test_a_model_trained_with_the_targets_softmax_is_fine_tuned_with_it_and_keeps_the_tokens_it_writes(tmp_path):
    start, new_data = tmp_path / "start", tmp_path / "data"
    train_main([*SMOKE, "--target_vocabulary_softmax", "true", "--max_steps", "10", "--output_dir", str(start)])
    new_data.mkdir()
    for split in ("train", "val"):
        for i, lang in enumerate(("en", "de")):
            (new_data / f"{split}.{lang}").write_text("".join(p[i] + "\n" for p in PAIRS[:2]), encoding="utf-8")
    flags = ["--model_name_or_path", str(start), "--data_dir", str(new_data), "--test_prefixes", "val"]
    with pytest.raises(SystemExit, match=r"was trained with --target_vocabulary_softmax .*: fine-tune it with"):
        parse_arguments([*SMOKE, *flags, "--output_dir", str(tmp_path / "plain")])

    def suppressed(folder: Path) -> set[int]:
        return set(json.loads((folder / "generation_config.json").read_text())["suppress_tokens"])

    output = tmp_path / "finetuned"
    flags += ["--target_vocabulary_softmax", "true", "--max_steps", "2", "--average_checkpoints", "0"]
    train_main([*SMOKE, *flags, "--output_dir", str(output)])
    assert suppressed(output) <= suppressed(start)  # every token the first model wrote, and the new targets'


def test_fine_tuning_refuses_text_prepared_otherwise_than_the_vocabulary_learned_it(smoke_run, tmp_path):
    start, _ = smoke_run  # its vocabulary was learned on the text as it is (--preprocess none)
    output = tmp_path / "lowercased"
    flags = ["--model_name_or_path", str(start), "--preprocess", "lowercase_tokenized", "--output_dir", str(output)]
    with pytest.raises(
        ValueError,
        match=rf"{re.escape(str(start))}: its vocabulary was learned on text prepared "
        r"with --preprocess none, and this run asks for --preprocess lowercase_tokenized",
    ):
        train_main([*SMOKE, *flags, "--max_steps", "2"])
    assert not output.exists() or not any(output.iterdir())  # nothing trained, nothing recorded


def test_averaging_two_checkpoints_gives_the_elementwise_mean(smoke_run, tmp_path):
    output, _ = smoke_run
    checkpoints = last_checkpoints(output, 2)
    assert [c.name for c in checkpoints] == ["checkpoint-80", "checkpoint-100"]
    known = []
    for value, checkpoint in zip((1.0, 4.0), checkpoints, strict=True):
        copy = tmp_path / checkpoint.name
        subprocess.run(["cp", "-r", str(checkpoint), str(copy)], check=True)
        weights = load_file(copy / "model.safetensors")
        weights = {
            name: torch.full_like(t, value) + torch.arange(t.numel()).view(t.shape) for name, t in weights.items()
        }
        save_file(weights, copy / "model.safetensors", metadata={"format": "pt"})
        known.append(weights)
    average_main(
        ["--checkpoints", *(str(tmp_path / c.name) for c in checkpoints), "--output_dir", str(tmp_path / "avg")]
    )
    averaged = load_file(tmp_path / "avg" / "model.safetensors")
    for name, tensor in averaged.items():
        torch.testing.assert_close(tensor, (known[0][name] + known[1][name]) / 2)
    assert not (tmp_path / "avg" / "optimizer.pt").exists()
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "avg")
    embedding = "model.encoder.embeddings.embed_tokens.weight"
    torch.testing.assert_close(model.model.encoder.embeddings.embed_tokens.weight, averaged[embedding])


def run_training(args: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.Popen(
        args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs
    )


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path):
    output = tmp_path / "run"
    command = [sys.executable, "-m", "vanilla_transformer.training.train", *SMOKE, "--output_dir", str(output)]
    command += ["--max_steps", "60", "--save_steps", "10", "--average_checkpoints", "0", "--max_eval_samples", "2"]
    process = run_training(command)
    deadline = time.time() + SUBPROCESS_DEADLINE_S
    while not (output / "checkpoint-20" / "trainer_state.json").exists():
        assert process.poll() is None and time.time() < deadline, process.communicate()[0][-3000:]
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (output / "model.safetensors").exists(), "the run finished before it could be killed"
    killed_at = max(int(p.name.split("-")[1]) for p in output.glob("checkpoint-*"))
    assert killed_at < 60

    resumed = run_training(command)
    log = resumed.communicate(timeout=SUBPROCESS_DEADLINE_S)[0]
    assert resumed.returncode == 0, log[-3000:]
    assert f"Resuming from {output / f'checkpoint-{killed_at}'}" in log
    assert "missing keys" not in log  # the tied copies, not saved, are tied again without an alarm
    state = json.loads((output / "checkpoint-60" / "trainer_state.json").read_text())
    assert state["global_step"] == 60
    # The wall clock of the log goes on from the checkpoint's instead of starting again at 0.
    clock = [entry["elapsed_s"] for entry in state["log_history"] if "elapsed_s" in entry]
    assert len(clock) == len(state["log_history"]) and clock == sorted(clock)


def test_loss_curve_against_time_is_drawn_from_the_log(smoke_run, tmp_path):
    output, report = smoke_run
    minutes, losses = curve(read_log_history(output), "loss")
    assert losses == [entry["loss"] for entry in report["summary"]["loss_history"]]
    assert minutes == sorted(minutes) and minutes[-1] > 0
    picture = plot_curves([output], tmp_path / "curves.png")
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_time_limit_ends_training_at_a_logging_step_with_a_checkpoint(tmp_path):
    """--max_train_minutes: a time budget whatever the machine's speed; the run then evaluates and ships as usual."""
    output = tmp_path / "run"
    flags = ["--max_train_minutes", "0.0001", "--output_dir", str(output)]  # expired at the first logging step (10)
    report = train_main([*SMOKE, *flags])
    assert report["summary"]["steps"] == 10
    assert [path.name for path in sorted(output.glob("checkpoint-*"))] == ["checkpoint-10"]
    assert (output / "model.safetensors").exists() and "test" in report["results"]["last"]
    with pytest.raises(SystemExit, match="--max_train_minutes -1.0: must be positive"):
        parse_arguments([*SMOKE, "--max_train_minutes", "-1"])


def test_report_tables_every_model_and_split_of_a_finished_run(smoke_run, tmp_path):
    output, report = smoke_run
    table = run_table(output)
    for model, splits in report["results"].items():
        for split, scores in splits.items():
            assert f"| {model} | {split} | {scores['bleu']:.2f} | {scores['chrf']:.2f} |" in table
    assert f"{report['summary']['steps']} steps" in table
    with pytest.raises(FileNotFoundError, match="results.json"):
        run_table(tmp_path)


@pytest.mark.slow
def test_two_processes_give_the_loss_of_one_and_only_rank_0_writes(tmp_path):
    common = [*SMOKE, "--dropout", "0", "--max_steps", "3", "--logging_steps", "1", "--save_strategy", "no"]
    common += ["--average_checkpoints", "0", "--per_device_eval_batch_size", "4", "--max_tokens", "256"]
    one = run_training(
        [sys.executable, "-m", "vanilla_transformer.training.train", *common, "--gradient_accumulation_steps", "2"]
        + ["--output_dir", str(tmp_path / "one")]
    )
    two = run_training(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port())]
        + ["-m", "vanilla_transformer.training.train", *common, "--output_dir", str(tmp_path / "two")]
    )
    logs = {
        name: process.communicate(timeout=SUBPROCESS_DEADLINE_S)[0] for name, process in (("one", one), ("two", two))
    }
    for name, process in (("one", one), ("two", two)):
        assert process.returncode == 0, logs[name][-4000:]
    assert logs["two"].count("== training summary ==") == 1  # only rank 0 reports and writes the folder
    # DDP's search for parameters without a gradient is off (every parameter has one); torch warns when it is on.
    assert "find_unused_parameters=True" not in logs["two"]

    def losses(run: str) -> list[float]:
        history = json.loads((tmp_path / run / "results.json").read_text())["summary"]["loss_history"]
        return [entry["loss"] for entry in history]

    assert len(losses("one")) == 3
    assert losses("two") == pytest.approx(losses("one"), rel=1e-3)
    results = json.loads((tmp_path / "two" / "results.json").read_text())["results"]["last"]
    assert results["validation"]["translations"] == 10  # exactly the evaluation set, no duplicated samples


def test_the_cli_reports_bad_data_in_one_line(tmp_path):
    (tmp_path / "train.en").write_text("a\nb\n", encoding="utf-8")
    (tmp_path / "train.de").write_text("a\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "vanilla_transformer.training.train",
        "--data_dir",
        str(tmp_path),
        "--output_dir",
        str(tmp_path / "o"),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert "error: " in result.stderr and "train.en has 2 lines but" in result.stderr
    assert "Traceback" not in result.stderr


def test_publish_uploads_exactly_the_hub_files(smoke_run, monkeypatch):
    from vanilla_transformer.training import hub

    folder, _ = smoke_run
    calls = []

    class RecordingApi:  # the Hub is unreachable here: record what huggingface_hub would be asked to do
        def __init__(self, token=None):
            calls.append(("init", token))

        def create_repo(self, repo_id, **kwargs):
            calls.append(("create_repo", repo_id, kwargs))

        def upload_folder(self, **kwargs):
            calls.append(("upload_folder", kwargs))
            return "https://huggingface.co/me/model/commit/0"

    monkeypatch.setattr(hub, "HfApi", RecordingApi)
    assert hub.publish(folder, "me/model", token="t") == "https://huggingface.co/me/model/commit/0"
    assert calls[0] == ("init", "t")
    assert calls[1] == ("create_repo", "me/model", {"repo_type": "model", "private": False, "exist_ok": True})
    upload = calls[2][1]
    assert upload["repo_id"] == "me/model" and upload["folder_path"] == str(folder)
    assert upload["ignore_patterns"] == hub.NOT_PUBLISHED
    assert not any(name.startswith(("checkpoint-", "averaged", "runs/")) for name in hub_files(folder))


def test_a_failed_upload_ends_in_one_line_that_says_where_the_model_is(tmp_path, monkeypatch, capsys):
    from vanilla_transformer.training import hub

    class UnreachableHub:  # huggingface_hub's HTTP client raises errors of its own, not OSError
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            raise type("ConnectError", (Exception,), {})("[Errno -2] Name or service not known")

    monkeypatch.setattr(hub, "HfApi", UnreachableHub)
    run = tmp_path / "run"
    failure = f"publishing {run} to the Hub as me/smoke failed (ConnectError: [Errno -2] Name or service not known)"
    kept = f"The trained model is in {run}: the same command run again "
    with pytest.raises(SystemExit, match=re.escape(f"error: {failure}. {kept}") + r".* without training\.$"):
        train_cli([*SMOKE, "--output_dir", str(run), "--push_to_hub", "--hub_model_id", "me/smoke"])
    assert (run / "results.json").is_file() and "== training summary ==" in capsys.readouterr().out
