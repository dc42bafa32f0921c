"""The benchmarks run, time the same work for both settings, and report every figure."""

import re
import sys

import pytest
import torch
from transformers import AutoTokenizer

from vanilla_transformer.training.mkl_kernels import amd_cpu_with_avx2, vendor_check

from .helpers import ROOT, shared_data

sys.path.insert(0, str(ROOT / "benchmarks"))

import compare_marian  # noqa: E402
import corpus_scale  # noqa: E402
import dropout_speed  # noqa: E402
import mkl_kernels  # noqa: E402
import softmax_speed  # noqa: E402
import step_profile  # noqa: E402
import training_speed  # noqa: E402

MICRO = compare_marian.Shape(d_model=32, layers=1, heads=2, ffn_dim=64, vocab_size=100)


def test_both_models_have_the_same_shape_and_generate_the_same_number_of_tokens(smoke_run):
    models = compare_marian.build_models(MICRO)
    ours, marian = models["ours"], models["Marian"]
    # Marian also holds two fixed sinusoidal tables (not trained); its final_logits_bias is a buffer.
    assert ours.num_parameters(only_trainable=True) == marian.num_parameters(only_trainable=True)
    trained = AutoTokenizer.from_pretrained(smoke_run[0])  # a vocabulary that training.train made
    assert (compare_marian.PAD, compare_marian.EOS) == (trained.pad_token_id, trained.eos_token_id)
    assert ours.config.eos_token_id == marian.config.eos_token_id == compare_marian.EOS
    batch = compare_marian.random_batch(MICRO, 3, 8, seed=0)
    assert (batch["attention_mask"] == 0).any() and (batch["labels"] == -100).any()
    for model in models.values():
        for beams in (1, 4):
            output = compare_marian.generate_step(model.eval(), batch, beams, new_tokens=5)()
            assert output.shape == (3, 1 + 5)  # the start token + exactly 5 new ones, end-of-sentence suppressed


def test_synthetic_comparison_reports_every_metric_with_ratios():
    table = compare_marian.compare(
        MICRO, "fp32", rounds=1, train_batch=(4, 8), train_steps=2, new_tokens=4, attn="sdpa"
    )
    for metric in compare_marian.SPEEDS:
        ours, marian, ratio = table[metric]
        assert ours > 0 and marian > 0
        torch.testing.assert_close(ratio, ours / marian)  # one round: the median ratio is the ratio
    ours_memory, marian_memory, _ = table["training memory MB"]
    assert 0 < ours_memory and 0 < marian_memory
    assert table["ours: cached / uncached greedy b1"][0] > 0


def test_real_data_mode_counts_padding_and_token_batches_pad_less(capsys):
    results = compare_marian.real_data_paths(
        str(ROOT / "examples/tiny"), steps=7, max_tokens=512, vocab_size=120, profile_steps=1
    )
    ours, marian = results.values()
    assert ours["pairs per batch"] == marian["pairs per batch"]
    assert 0 <= ours["padding %"] < marian["padding %"] < 100
    assert ours["tokens/s"] > 0 and marian["tokens/s"] > 0
    compare_marian.print_real_data(results, 7)
    out = capsys.readouterr().out
    assert "ours / Marian end to end" in out
    assert "#### Profile: ours" in out and "aten::mm" in out  # the matrix products of the profiled step


def test_serving_benchmark_prints_every_engine_with_bleu_and_speed(smoke_run, capsys):
    import serving

    test = ROOT / "examples/tiny/test"
    serving.main(["--model", str(smoke_run[0]), "--source", f"{test}.en", "--reference", f"{test}.de"]
                 + ["--sentences", "6", "--batch-size", "4", "--rounds", "1"])  # fmt: skip
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0][2:] for row in rows[1:]] == [
        "our generate(), fp32",
        "CTranslate2 float32",
        "CTranslate2 int8",
        "our generate(), same lengths",
        "MarianMTModel.generate(), same lengths",
    ]
    bleu = {row.split(" | ")[0][2:]: row.split(" | ")[1] for row in rows[1:]}
    assert bleu["CTranslate2 float32"] == bleu["our generate(), fp32"] != ""  # the same translations


def test_training_speed_times_the_second_half_of_a_runs_steps(tmp_path, monkeypatch, capsys):
    config, data = ROOT / "training" / "configs" / "smoke.yaml", ROOT / "examples" / "tiny"
    command = ["--config", str(config), "--data_dir", str(data), "--output_dir", str(tmp_path), "--max_steps", "6"]
    monkeypatch.setattr(sys, "argv", ["training_speed.py", *command])
    training_speed.main()
    printed = capsys.readouterr().out
    assert re.search(
        r"processes 1, .*max_tokens 512 a process, r_drop_alpha 0.0, fused output loss True, muon False, "
        r"random-bits dropout True, MKL's Intel kernels True, target-vocabulary softmax False: "
        r"[\d.]+ steps/s, [\d,]+ padded tokens/s a side \(steps 3-6;",
        printed,
    ), printed


def test_the_corpus_scale_benchmark_times_each_phase_before_training_and_the_peak_memory(tmp_path, capsys):
    data = shared_data() / "multi30k"
    command = ["--data_dir", str(data), "--pairs", "400", "--work_dir", str(tmp_path), "--max_steps", "2"]
    corpus_scale.main([*command, "--vocab_size", "600", "--evaluation_pairs", "5"])
    printed = capsys.readouterr().out
    assert re.fullmatch(
        r"400 pairs: \d+ s in all, peak memory [\d.]+ GiB\n"
        r"  reading: \d+ s\n  vocabulary: \d+ s\n  tokenizing: \d+ s\n",
        printed,
    ), printed
    english = (tmp_path / "corpus_400" / "train.en").read_text().splitlines()
    assert len(english) == 400 and len((tmp_path / "corpus_400" / "val.de").read_text().splitlines()) == 5


@pytest.mark.parametrize(
    ("script", "heading", "kinds"),
    [
        (dropout_speed, r"\d+ dropout modules", ("torch's bernoulli_", "random bits")),
        (softmax_speed, r"\d+ of 120 tokens in the training targets", ("every token", "the targets' tokens")),
    ],
)
def test_an_alternated_benchmark_times_both_settings_on_the_same_batches(
    script, heading, kinds, tmp_path, monkeypatch, capsys
):
    config, data = ROOT / "training" / "configs" / "smoke.yaml", ROOT / "examples" / "tiny"
    command = ["--config", str(config), "--data_dir", str(data), "--output_dir", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", ["speed.py", *command, "--blocks", "2", "--steps_per_block", "3"])
    script.main()
    printed = capsys.readouterr().out
    assert re.search(rf"^{heading}, \d+ threads, 2 blocks of 3 steps$", printed, re.M), printed
    for kind in kinds:
        assert re.search(rf"^{kind}: [\d.]+ ms a step \(median; blocks [\d.]+-[\d.]+\)$", printed, re.M), printed
    ratio = re.search(r"^(.+) against (.+): [\d.]+ times as fast \(the blocks' median\)$", printed, re.M)
    assert ratio and kinds[1].startswith(ratio[1]) and kinds[0].endswith(ratio[2]), printed


def test_step_profile_times_a_steps_parts_then_profiles_the_last_steps(tmp_path, monkeypatch, capsys):
    config, data = ROOT / "training" / "configs" / "smoke.yaml", ROOT / "examples" / "tiny"
    command = ["--config", str(config), "--data_dir", str(data), "--output_dir", str(tmp_path), "--max_steps", "12"]
    monkeypatch.setattr(sys, "argv", ["step_profile.py", *command, "--profile_steps", "3", "--rows", "5"])
    step_profile.main()
    printed = capsys.readouterr().out
    assert re.search(r"^\d+ threads; steps 7-9: [\d.]+ ms a step \(mean\)$", printed, re.M), printed
    shares = [int(share) for share in re.findall(r"^[a-z_, ]+: [\d.]+ ms \((\d+)%; median [\d.]+\)$", printed, re.M)]
    assert len(shares) == 4 and 98 <= sum(shares) <= 102, printed  # the four parts make the whole step
    assert "torch.profiler, steps 10-12:" in printed and "Self CPU time total" in printed, printed
    # Which operators lead depends on the machine's load: the table's rows are operators, five of them.
    row = r"^.+?(?:\s+[\d.]+%\s+[\d.]+[mu]?s){2}\s+[\d.]+[mu]?s\s+\d+\s*$"  # name, self %, self, total %, ...
    assert len(re.findall(row, printed, re.M)) == 5, printed
    monkeypatch.setattr(sys, "argv", ["step_profile.py", *command, "--profile_steps", "6"])
    with pytest.raises(SystemExit, match="--profile_steps 6: give from 1 to under half of --max_steps"):
        step_profile.main()


def test_the_mkl_benchmark_times_every_product_under_both_kernels(capsys):
    mkl_kernels.main(["--rounds", "1", "--repeats", "1", "--threads", "1"])
    printed = capsys.readouterr().out
    applied = re.search(r"the remedy applied on this CPU: (True|False)", printed).group(1)
    assert applied == str(amd_cpu_with_avx2() and vendor_check() is not None)
    rows = re.findall(r"^\| (\d+x\d+x\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$", printed, re.M)
    assert [row[0] for row in rows] == ["x".join(map(str, shape)) for shape in mkl_kernels.SHAPES]
    half = 0.005  # every figure is printed to two decimals, the ratio from the unrounded times
    for _, own, intel, ratio, openblas in rows:
        own, intel, ratio = float(own), float(intel), float(ratio)
        assert own > 0 and intel > 0 and float(openblas) > 0
        assert (own - half) / (intel + half) - half <= ratio <= (own + half) / (intel - half) + half
