"""No command deletes what it was not asked to replace, and a run killed at any moment restarts by itself."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

import vanilla_transformer.export
import vanilla_transformer.training.average_checkpoints
from vanilla_transformer.tools.export import main as export_main
from vanilla_transformer.training.arguments import ModelArguments, VocabularyArguments, parse_arguments
from vanilla_transformer.training.average_checkpoints import main as average_main
from vanilla_transformer.training.data import CorpusError, load_parallel_corpus
from vanilla_transformer.training.train import OutputFolderError, check_output_folder, load_or_train_tokenizer
from vanilla_transformer.training.train import main as train_main

from .helpers import ROOT, SMOKE, SUBPROCESS_DEADLINE_S


def listing(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def run_copy(smoke_run, tmp_path) -> Path:
    """A copy of the smoke run's folder, free to be damaged."""
    return Path(shutil.copytree(smoke_run[0], tmp_path / "run"))


@pytest.mark.parametrize("target", [".", "checkpoint-80", "checkpoint-80/..", "README.md"])
def test_averaging_never_deletes_the_run_or_its_checkpoints(run_copy, target, monkeypatch, capsys):
    before = listing(run_copy)
    monkeypatch.chdir(run_copy)
    with pytest.raises(SystemExit) as exit_info:
        average_main(["--run_dir", str(run_copy), "--last", "2", "--output_dir", target])
    assert str(exit_info.value).startswith("error: --output_dir ")
    assert any(why in str(exit_info.value) for why in ("this reads", "is not a model folder"))
    assert listing(run_copy) == before


def test_averaging_replaces_an_earlier_averaged_model_and_a_failure_keeps_it(run_copy, monkeypatch):
    averaged = run_copy / "averaged"
    assert (averaged / "model.safetensors").exists()
    average_main(["--run_dir", str(run_copy), "--last", "3", "--output_dir", str(averaged)])
    three = load_file(averaged / "model.safetensors")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(vanilla_transformer.training.average_checkpoints, "save_file", full_disk)
    with pytest.raises(SystemExit, match="^error: the disk is full"):
        average_main(["--run_dir", str(run_copy), "--last", "2", "--output_dir", str(averaged)])
    assert load_file(averaged / "model.safetensors").keys() == three.keys()
    for name, tensor in load_file(averaged / "model.safetensors").items():
        assert tensor.equal(three[name])
    assert [p.name for p in run_copy.iterdir() if p.name.startswith(".averaged")] == []  # no partial folder left


def run(command: list[str], **environment: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", **environment}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUBPROCESS_DEADLINE_S)


# Trainer._save_checkpoint writes the model, then the optimizer and scheduler, then trainer_state.json: dying in
# between leaves a checkpoint folder with weights and no state, as a kill -9 or a full disk does.
DIE_WHILE_SAVING = """
import os, signal, sys
from transformers import Trainer
from vanilla_transformer.training.train import cli

save_optimizer = Trainer._save_optimizer_and_scheduler

def save_then_die(self, output_dir):
    if self.state.global_step == int(os.environ["DIE_AT_STEP"]):
        os.kill(os.getpid(), signal.SIGKILL)
    save_optimizer(self, output_dir)

Trainer._save_optimizer_and_scheduler = save_then_die
sys.argv = ["train", *sys.argv[1:]]
cli()
"""


def test_training_never_writes_over_a_folder_that_is_not_a_run(run_copy, tmp_path):
    """The run writes README.md, config.json, tokenizer.json ... into --output_dir: a folder of other files or the model
    being fine-tuned is refused before anything is written; an earlier run's folder is resumed, an empty one filled."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# My project\n", encoding="utf-8")
    (project / "notes.txt").write_text("keep me\n", encoding="utf-8")
    before = listing(tmp_path)
    with pytest.raises(
        OutputFolderError, match=r"holds files that are not a training run's \(README\.md, notes\.txt\)"
    ):
        train_main([*SMOKE, "--output_dir", str(project)])
    with pytest.raises(OutputFolderError, match=r"is the model that --model_name_or_path fine-tunes"):
        train_main([*SMOKE, "--model_name_or_path", str(run_copy), "--output_dir", str(run_copy)])
    assert listing(tmp_path) == before
    (project / "results.json").write_text('{"accuracy": 0.9}\n', encoding="utf-8")  # somebody else's results
    with pytest.raises(OutputFolderError, match=r"holds files that are not a training run's"):
        check_output_folder(project, None)
    (tmp_path / "empty").mkdir()
    finished = Path(shutil.copytree(run_copy, tmp_path / "finished", ignore=shutil.ignore_patterns("checkpoint-*")))
    (finished / "vocabulary_training.json").unlink()  # as a fine-tuning run leaves it: its results.json marks it
    for earlier_run in (run_copy, finished, tmp_path / "empty", tmp_path / "new"):
        check_output_folder(earlier_run, None)  # a finished run (run again, it resumes), empty, new


def test_a_run_is_not_resumed_with_settings_other_than_it_was_started_with(tmp_path):
    """A finished run started again with another learning rate trained nothing and shipped the old model under a card
    claiming the new rate; a larger --max_steps (training on) or other evaluations are no such change."""
    output = tmp_path / "run"
    arguments = [*SMOKE, "--output_dir", str(output), "--max_steps", "10", "--save_steps", "10"]
    arguments += ["--average_checkpoints", "0", "--max_eval_samples", "2"]
    train_main(arguments)
    for flags, named in (
        (["--lr_scale", "0.5"], "lr_scale 0.3 -> 0.5"),
        # The schedule's arguments shape it as its type does; their default is None or {} by release.
        (["--lr_scheduler_kwargs", '{"timescale": 5}'], r"lr_scheduler_kwargs (None|\{\}) -> \{'timescale': 5\}"),
        (["--max_tokens", "256", "--dropout", "0.3"], "dropout None -> 0.3, max_tokens 512 -> 256"),
    ):
        with pytest.raises(OutputFolderError, match=rf"holds a run started with other settings \({named}\)"):
            train_main([*arguments, *flags])
    assert train_main([*arguments, "--max_steps", "20", "--eval_strategy", "no"])["summary"]["steps"] == 20


def test_half_written_folders_of_killed_processes_are_cleaned_and_those_of_running_ones_kept(tmp_path):
    from vanilla_transformer.training.folders import write_folder

    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead, alive = tmp_path / f".out.partial-{int(exited.stdout)}", tmp_path / f".out.partial-{os.getppid()}"
    for left in (dead, alive):
        left.mkdir()
        (left / "model.bin").write_bytes(b"half")
    write_folder(tmp_path / "out", lambda folder: folder.mkdir() or (folder / "done").write_text("yes"))
    assert (tmp_path / "out" / "done").read_text() == "yes"
    assert not dead.exists() and alive.exists()  # a process that still runs may be writing it


@pytest.mark.parametrize("target", ["run", ".", "..", "run/checkpoint-80", "notes"])
def test_exporting_with_force_never_deletes_the_model_its_run_or_other_folders(run_copy, target, monkeypatch):
    """vt-export --force replaces an earlier export only: the model folder itself, the folder holding it, `.`, a
    checkpoint or a folder of the user's are refused (the --force of CTranslate2's converter deletes any folder)."""
    (run_copy.parent / "notes").mkdir()
    (run_copy.parent / "notes" / "todo.txt").write_text("keep me\n", encoding="utf-8")
    before = listing(run_copy.parent)
    monkeypatch.chdir(run_copy.parent / "notes" if target == "." else run_copy.parent)
    with pytest.raises(SystemExit) as exit_info:
        export_main(["ctranslate2", str(run_copy), target, "--force"])
    assert str(exit_info.value).startswith("error: ")
    assert any(why in str(exit_info.value) for why in ("this reads", "is not a CTranslate2 model"))
    assert listing(run_copy.parent) == before


def test_exporting_with_force_replaces_an_earlier_export_and_a_failure_keeps_it(run_copy, tmp_path, monkeypatch):
    export = tmp_path / "ct2"
    export_main(["ctranslate2", str(run_copy), str(export), "--quantization", "int8"])
    int8 = listing(export)
    export_main(["ctranslate2", str(run_copy), str(export), "--force"])
    assert listing(export)["model.bin"] > int8["model.bin"]  # float32 weights now

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    float32 = listing(export)
    monkeypatch.setattr(vanilla_transformer.export, "record_max_positions", full_disk)
    with pytest.raises(SystemExit, match="^error: the disk is full"):
        export_main(["ctranslate2", str(run_copy), str(export), "--force", "--quantization", "int8"])
    assert listing(export) == float32
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no partial or old folder


# Killed while writing the model folder at the end: tokenizer_config.json truncated (0 bytes), as a kill -9 in the
# middle of the write leaves it.
DIE_WHILE_WRITING_THE_MODEL = """
import os, signal, sys
import vanilla_transformer.training.hub as hub
import vanilla_transformer.training.train as train

def truncate_then_die(folder):
    open(os.path.join(folder, "tokenizer_config.json"), "w").close()
    os.kill(os.getpid(), signal.SIGKILL)

hub.make_tokenizer_config_portable = truncate_then_die
sys.argv = ["train", *sys.argv[1:]]
train.cli()
"""


@pytest.mark.slow
def test_a_run_killed_while_writing_its_model_folder_finishes_when_run_again(tmp_path):
    output = tmp_path / "run"
    arguments = [*SMOKE, "--output_dir", str(output), "--max_steps", "20", "--average_checkpoints", "0"]
    killed = run([sys.executable, "-c", DIE_WHILE_WRITING_THE_MODEL, *arguments])
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert json.loads((output / "tokenizer_config.json").read_text())  # the run folder's own copy is whole
    finished = run([sys.executable, "-m", "vanilla_transformer.training.train", *arguments])
    assert finished.returncode == 0, finished.stderr[-3000:]
    for name in ("config.json", "tokenizer_config.json", "generation_config.json", "results.json"):
        assert json.loads((output / name).read_text()), name
    assert json.loads((output / "results.json").read_text())["summary"]["steps"] == 20
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]  # no half-written folder left


@pytest.mark.slow
def test_a_run_killed_while_writing_a_checkpoint_resumes_from_the_last_complete_one(tmp_path):
    output = tmp_path / "run"
    arguments = [*SMOKE, "--output_dir", str(output), "--max_steps", "40", "--save_steps", "10"]
    arguments += ["--average_checkpoints", "2", "--max_eval_samples", "2"]
    killed = run([sys.executable, "-c", DIE_WHILE_SAVING, *arguments], DIE_AT_STEP="30")
    assert killed.returncode == -9, killed.stdout[-2000:] + killed.stderr[-2000:]
    assert (output / "checkpoint-30" / "model.safetensors").exists()
    assert not (output / "checkpoint-30" / "trainer_state.json").exists()

    resumed = run([sys.executable, "-m", "vanilla_transformer.training.train", *arguments])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "checkpoint-30 is incomplete (no trainer_state.json)" in resumed.stderr
    assert f"Resuming from {output / 'checkpoint-20'}" in resumed.stderr
    state = json.loads((output / "checkpoint-40" / "trainer_state.json").read_text())
    assert state["global_step"] == 40
    assert (output / "checkpoint-30" / "trainer_state.json").exists()  # written again by the resumed run
    results = json.loads((output / "results.json").read_text())
    assert results["summary"]["steps"] == 40 and "averaged (last 2)" in results["results"]

    # Once more: nothing is left to train, and the summary still counts the time and tokens of the whole run.
    again = run([sys.executable, "-m", "vanilla_transformer.training.train", *arguments])
    assert again.returncode == 0, again.stderr[-3000:]
    summary = json.loads((output / "results.json").read_text())["summary"]
    trained_s = max(entry["elapsed_s"] for entry in state["log_history"])
    assert summary["steps"] == 40 and summary["wall_time_s"] >= trained_s
    assert summary["train_tokens_per_s"] == pytest.approx(results["summary"]["train_tokens_per_s"], rel=0.5)


def test_a_finished_run_started_again_trains_no_step_past_max_steps_and_ships_the_same_model(tmp_path):
    # 32 steps end mid-epoch (the smoke corpus makes 5 batches an epoch); transformers' loop trained a 33rd step on
    # resuming from checkpoint-32, and the averaged model took it in.
    from vanilla_transformer.training.train import main as train_main

    arguments = [*SMOKE, "--output_dir", str(tmp_path / "run"), "--max_steps", "32", "--save_steps", "16"]
    first = train_main([*arguments, "--max_eval_samples", "4"])
    weights = load_file(tmp_path / "run" / "model.safetensors")
    again = train_main([*arguments, "--max_eval_samples", "4"])
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-16", "checkpoint-32"]
    assert again["summary"]["steps"] == 32 and again["results"] == first["results"]
    for name, tensor in load_file(tmp_path / "run" / "model.safetensors").items():
        assert tensor.equal(weights[name]), name
    # A time budget spent before the resume is spent: no step more (it trained on to the next logging step, 40).
    out_of_time = train_main([*arguments[:-4], "--max_steps", "64", "--max_train_minutes", "0.0001"])
    assert out_of_time["summary"]["steps"] == 32


def test_a_vocabulary_left_in_the_output_folder_is_reused_only_for_the_same_settings_and_data(run_copy, tmp_path):
    changed = run(
        [
            sys.executable,
            "-m",
            "vanilla_transformer.training.train",
            *SMOKE,
            "--output_dir",
            str(run_copy),
            "--vocab_size",
            "100",
        ]
    )
    assert changed.returncode == 1
    assert "tokenizer.json was trained with" in changed.stderr and "'vocab_size': 120" in changed.stderr
    assert "'vocab_size': 100" in changed.stderr and "Traceback" not in changed.stderr

    # Without checkpoints, a finished model of the old vocabulary is not trained over with another (it was)...
    settings = VocabularyArguments(vocab_size=100)
    corpus = load_parallel_corpus(parse_arguments([*SMOKE, "--output_dir", "x"])[1], seed=1)
    finished = Path(shutil.copytree(run_copy, tmp_path / "finished", ignore=shutil.ignore_patterns("checkpoint-*")))
    with pytest.raises(CorpusError, match=r"and the trained model in .* belong to the old vocabulary"):
        load_or_train_tokenizer(ModelArguments(), settings, corpus, finished, resuming=False)
    # ... but a vocabulary with neither checkpoints nor a model (a run killed early) belongs to nothing: a new one.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "vocabulary_training.json"):
        shutil.copy(run_copy / name, fresh / name)
    tokenizer = load_or_train_tokenizer(ModelArguments(), settings, corpus, fresh, resuming=False)
    assert len(tokenizer) == 100
    assert len(load_or_train_tokenizer(ModelArguments(), settings, corpus, fresh, resuming=True)) == 100  # reused
    other_data = corpus.copy()
    other_data["train"] = corpus["train"].select(range(50))
    with pytest.raises(CorpusError, match="on 130 pairs .* this command asks for .* on 50 pairs"):
        load_or_train_tokenizer(ModelArguments(), settings, other_data, fresh, resuming=True)
