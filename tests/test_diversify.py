"""vt-diversify: data diversification's stages run as one command on the tiny corpus, resumed, and refused."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from vanilla_transformer.tools.diversify import fine_tune_cap, parse_arguments, read_pipeline, stage_settings
from vanilla_transformer.tools.diversify import main as diversify
from vanilla_transformer.training.arguments import parse_arguments as parse_arguments_of_vt_train

from .helpers import ROOT

TINY = ROOT / "examples/tiny"
NO_TEST_SPLIT = {"test_prefixes": [], "split_test_size": 0}
STAGE_FOLDERS = ("forward", "backward", "model")


def pipeline_config(folder: Path, **fine_tune: object) -> Path:
    """A pipeline of smoke-sized stages: 40 steps each way, a 20-step fine-tune, writing under `folder`/out."""
    smoke = str(ROOT / "training/configs/smoke.yaml")
    settings = {
        "data_dir": str(TINY),
        "output_dir": str(folder / "out"),
        "seed": 2,
        "forward": {"config": smoke, "max_steps": 40, **NO_TEST_SPLIT},
        "backward": {"config": smoke, "max_steps": 40, **NO_TEST_SPLIT},
        "fine_tune": {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": 5, "max_steps": 20, **fine_tune},
    }
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def diversified_run(tmp_path_factory) -> Path:
    """The pipeline run once (about half a minute: seven processes); its output folder."""
    folder = tmp_path_factory.mktemp("diversify")
    diversify(["--config", str(pipeline_config(folder))])
    return folder / "out"


def copy_of(run: Path, folder: Path) -> Path:
    """The run copied to `folder`/out, its stages' settings files naming the copy's folders."""
    copy = shutil.copytree(run, folder / "out")
    for settings in copy.glob("*.yaml"):
        settings.write_text(settings.read_text(encoding="utf-8").replace(str(run), str(copy)), encoding="utf-8")
    return copy


def before_the_fine_tune(run: Path, folder: Path) -> Path:
    """A copy of the run as it was before its fine-tune ran: its first stages and translations alone."""
    copy = copy_of(run, folder)
    (copy / "fine_tune.yaml").unlink()
    shutil.rmtree(copy / "model")
    return copy


def lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text(encoding="utf-8"))


@pytest.mark.slow
def test_the_final_pairs_are_the_pairs_and_each_models_translations_of_one_side(diversified_run):
    english, german = lines(TINY / "train.en"), lines(TINY / "train.de")
    forward, backward = lines(diversified_run / "train.forward.de"), lines(diversified_run / "train.backward.en")
    assert len(forward) == len(backward) == len(english) == 130 and forward != german
    folder = diversified_run / "diversified"
    assert lines(folder / "train.en") == english + english + backward
    assert lines(folder / "train.de") == german + forward + german
    for name in ("val.en", "val.de", "test.en", "test.de"):  # the corpus's own, to evaluate on
        assert (folder / name).read_bytes() == (TINY / name).read_bytes()


@pytest.mark.slow
def test_the_backward_model_swaps_the_languages_and_neither_holds_out_a_test_split(diversified_run):
    backward = yaml.safe_load((diversified_run / "backward.yaml").read_text(encoding="utf-8"))
    assert (backward["source_lang"], backward["target_lang"]) == ("de", "en")
    for stage in ("forward", "backward"):
        report = results(diversified_run / stage)
        assert report["summary"]["steps"] == 40 and set(report["results"]["last"]) == {"validation"}
        assert report["arguments"]["seed"] == 2


@pytest.mark.slow
def test_the_fine_tune_goes_on_from_the_forward_models_last_checkpoint_with_its_vocabulary(diversified_run):
    settings = yaml.safe_load((diversified_run / "fine_tune.yaml").read_text(encoding="utf-8"))
    assert settings["model_name_or_path"] == str(diversified_run / "forward" / "checkpoint-40")
    assert settings["data_dir"] == str(diversified_run / "diversified") and settings["max_steps"] == 20
    model = diversified_run / "model"
    assert (model / "tokenizer.json").read_bytes() == (diversified_run / "forward" / "tokenizer.json").read_bytes()
    report = results(model)
    assert report["summary"]["steps"] == 20 and {"validation", "test"} <= set(report["results"]["last"])
    assert "fine-tuned from" in (model / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_same_command_again_trains_nothing_and_other_settings_are_refused(diversified_run, capfd):
    config = diversified_run.parent / "pipeline.yaml"

    def finished() -> dict[str, int]:
        return {stage: (diversified_run / stage / "results.json").stat().st_mtime_ns for stage in STAGE_FOLDERS}

    before = finished()
    diversify(["--config", str(config)])
    assert "== vt-" not in capfd.readouterr().out and finished() == before
    with pytest.raises(SystemExit, match=r"forward.yaml holds the settings .* \(seed 2 -> 3\)"):
        diversify(["--config", str(config), "--seed", "3"])


@pytest.mark.slow
def test_a_failed_stage_is_named_and_the_finished_ones_are_kept(diversified_run, tmp_path, capfd):
    copy = before_the_fine_tune(diversified_run, tmp_path)
    config = pipeline_config(tmp_path, max_tokens=0)
    with pytest.raises(SystemExit, match=r"vt-train --config \S*fine_tune.yaml failed \(exit status 1"):
        diversify(["--config", str(config)])
    output = capfd.readouterr()
    assert "--max_tokens 0: must be at least 1" in output.err and output.out.count("== vt-train") == 1
    assert results(copy / "forward") == results(diversified_run / "forward")


@pytest.mark.slow
def test_a_deadline_shortens_the_fine_tunes_cap_and_a_begun_fine_tune_keeps_its_own(diversified_run, tmp_path, capfd):
    copy = before_the_fine_tune(diversified_run, tmp_path)
    config = pipeline_config(tmp_path, max_train_minutes=10)
    diversify(["--config", str(config), "--deadline_minutes", "0.5"])  # already past: the cap's floor, one minute
    assert yaml.safe_load((copy / "fine_tune.yaml").read_text(encoding="utf-8"))["max_train_minutes"] == 1.0
    assert results(copy / "model")["summary"]["steps"] == 20
    capfd.readouterr()
    diversify(["--config", str(config), "--deadline_minutes", "600"])  # another clock: the same fine-tune, kept
    assert "== vt-" not in capfd.readouterr().out


def test_the_deadline_shortens_a_cap_only_where_the_time_left_is_shorter():
    assert fine_tune_cap(10, deadline=86, elapsed=71.6) == 10
    assert fine_tune_cap(10, deadline=86, elapsed=80.04) == 6.0
    assert fine_tune_cap(0, deadline=86, elapsed=80) == 6.0  # no cap of its own: the time left
    assert fine_tune_cap(10, deadline=86, elapsed=89) == 1.0  # past the deadline: still a minute's fine-tune


@pytest.mark.slow
def test_a_stage_made_anew_refuses_to_reuse_what_its_earlier_self_made(diversified_run, tmp_path, capfd):
    copy = copy_of(diversified_run, tmp_path)
    shutil.rmtree(copy / "backward")  # deleted to be trained again: its translations would be stale
    with pytest.raises(SystemExit, match=r"backward is to be made anew, but \S*backward-ct2, \S*train.backward.en"):
        diversify(["--config", str(pipeline_config(tmp_path))])
    assert "== vt-" not in capfd.readouterr().out


@pytest.mark.parametrize(
    "name, text", [("multi30k_en_de_diversified", "lowercase_tokenized"), ("multi30k_en_de_diversified_cased", "none")]
)
def test_the_shipped_pipelines_stages_parse_into_the_settings_its_comments_state(tmp_path, monkeypatch, name, text):
    monkeypatch.chdir(tmp_path)  # named as a pip install names it: its stages' configs are found beside it
    pipeline = read_pipeline(parse_arguments(["--config", name]))
    stages = {}
    for stage, fixed in (("forward", {}), ("backward", {"source_lang": "de", "target_lang": "en"}), ("fine_tune", {})):
        settings = tmp_path / f"{stage}.yaml"
        settings.write_text(yaml.safe_dump(stage_settings(pipeline, stage, name, **fixed)), encoding="utf-8")
        model, data, _, training = parse_arguments_of_vt_train(["--config", str(settings)])
        stages[stage] = (
            data.source_lang,
            data.test_prefixes,
            data.split_test_size,
            training.max_steps,
            model.dropout,
            data.preprocess,
        )
    assert stages["forward"] == ("en", [], 0, 15860, 0.3, text)
    assert stages["backward"] == ("de", [], 0, 14000, 0.2, "none")  # the quick config's text: cased
    assert stages["fine_tune"] == ("en", ["test_2016_flickr", "test_2017_flickr"], 1000, 2800, 0.2, text)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"epochs": 3}, r"unknown setting\(s\) 'epochs'; it holds backward, data_dir, deadline_minutes, engine"),
        ({"fine_tuen": {}}, r"unknown setting\(s\) 'fine_tuen' \(did you mean 'fine_tune'\?\)"),
        ({"engine": "ct2"}, r"engine 'ct2': use one of auto, ctranslate2, generate"),
        ({"data_dir": "nowhere"}, r"--data_dir nowhere: no such folder in \S+ \(a relative path is read from where"),
        ({"deadline_minutes": "90m"}, r"deadline_minutes '90m': give a positive number of minutes"),
        ({"deadline_minutes": 0}, r"deadline_minutes 0: give a positive number of minutes"),
        ({"deadline_minutes": float("nan")}, r"deadline_minutes nan: give a positive number of minutes"),
        ({"deadline_minutes": float("inf")}, r"deadline_minutes inf: give a positive number of minutes"),
        ({"forward": {"max_steps": 40}}, r"'forward' needs a 'config'"),
        ({"backward": None}, r"no 'backward' setting"),
        ({"fine_tune": [1]}, r"'fine_tune' must be a mapping"),
        (
            {"fine_tune": {"preprocess": "lowercase_tokenized"}},
            r"the forward stage prepares its text with preprocess 'none' and the fine-tune with 'lowercase_tokenized'",
        ),
    ],
)
def test_a_malformed_pipeline_config_is_named_before_any_work(tmp_path, change, message):
    config = pipeline_config(tmp_path)
    settings = yaml.safe_load(config.read_text(encoding="utf-8")) | change
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    with pytest.raises(SystemExit, match=message):
        diversify(["--config", str(config)])
    assert not (tmp_path / "out").exists()
