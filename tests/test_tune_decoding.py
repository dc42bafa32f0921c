"""tools.tune_decoding: checkpoint averaging, beam and length penalty scored on a finished run's validation set."""

import sys

import pytest

from vanilla_transformer.tools import tune_decoding
from vanilla_transformer.tools.tune_decoding import main


def test_each_choice_is_scored_on_validation_as_the_run_scored_its_models(smoke_run, capsys):
    folder, report = smoke_run
    main([str(folder), "--average", "1", "2", "--length_penalty", "0.6", "1.0", "--batch_size", "32"])
    table = capsys.readouterr().out.split("\n\n")[-1].strip().splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[:3] for row in rows] == [["1", "4", "0.6"], ["1", "4", "1.0"], ["2", "4", "0.6"], ["2", "4", "1.0"]]
    assert sum("(best)" in row[3] for row in rows) == 1
    # The newest checkpoint is the run's last model, and the last two averaged are its averaged model (smoke.yaml:
    # average_checkpoints 2, beam 4, length penalty 0.6): the same validation scores as the run's own evaluation.
    last, averaged = (report["results"][model]["validation"]["bleu"] for model in report["results"])
    assert rows[0][3].split()[0] == f"{last:.2f}"
    assert rows[2][3].split()[0] == f"{averaged:.2f}"


def test_more_checkpoints_than_the_run_kept_is_an_error(smoke_run):
    folder, _ = smoke_run
    with pytest.raises(SystemExit, match="holds 3 complete checkpoints, not 10"):
        main([str(folder), "--average", "10"])


def test_average_0_scores_the_model_the_run_shipped(smoke_run, capsys):
    folder, report = smoke_run
    main([str(folder), "--average", "0", "--batch_size", "32"])
    table = capsys.readouterr().out.split("\n\n")[-1].strip().splitlines()
    row = [cell.strip() for cell in table[2].strip("|").split("|")]
    shipped = report["summary"]["shipped_model"]
    assert row[0] == "shipped"
    assert row[3].split()[0] == f"{report['results'][shipped]['validation']['bleu']:.2f}"


def test_a_python_that_cannot_score_is_told_so_before_anything_is_translated(smoke_run, monkeypatch):
    folder, _ = smoke_run
    monkeypatch.setitem(sys.modules, "sacremoses", None)  # a Python without sacremoses: the tokenized BLEU fails
    monkeypatch.setattr(tune_decoding, "run_translator", None)  # translating would fail differently
    message = r"error: scoring translations into 'de': the tokenized BLEU .* pip install sacremoses.*; nothing was tr"
    with pytest.raises(SystemExit, match=message):
        tune_decoding.main([str(folder)])
