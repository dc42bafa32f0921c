"""tools.compare_models: models scored on a run's validation set, differences tested by paired bootstrap."""

import pytest

from vanilla_transformer.tools import compare_models
from vanilla_transformer.tools.compare_models import main, paired_bootstrap
from vanilla_transformer.training import DataArguments
from vanilla_transformer.training.average_checkpoints import last_checkpoints

REFERENCES = [f"Ein Hund läuft über die Wiese Nummer {number}." for number in range(300)]


def test_a_large_difference_is_significant_and_a_one_sentence_one_is_not():
    wrong_half = [text if number % 2 else "Eine Katze schläft." for number, text in enumerate(REFERENCES)]
    one_changed = ["Eine Katze schläft.", *REFERENCES[1:]]
    rows = paired_bootstrap(
        {"perfect": REFERENCES, "half wrong": wrong_half, "one changed": one_changed}, REFERENCES, "de"
    )
    perfect, half_wrong, one = rows
    assert perfect["bleu"] == pytest.approx(100.0) and "p_value" not in perfect
    assert half_wrong["difference"] == pytest.approx(half_wrong["bleu"] - 100.0)
    assert half_wrong["difference"] < -10
    assert half_wrong["p_value"] < 0.01
    assert -1 < one["difference"] < 0 and one["p_value"] > 0.05
    assert 0 < half_wrong["ci"] < 10


def test_identical_translations_are_not_called_different():
    rows = paired_bootstrap({"a": REFERENCES[:100], "b": REFERENCES[:100]}, REFERENCES[:100], "de")
    assert rows[1]["difference"] == 0 and rows[1]["p_value"] == 1.0


def test_the_run_scores_of_its_models_are_reproduced_and_compared(smoke_run, capsys):
    folder, report = smoke_run
    newest = str(last_checkpoints(folder, 1)[0])  # the run's last model
    main(["--run", str(folder), newest, str(folder / "averaged"), "--batch_size", "32"])
    table = capsys.readouterr().out.split("\n\n")[-1].strip().splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[2:]]
    assert [row[0] for row in rows] == [newest, str(folder / "averaged")]
    # The same validation BLEU as the run's own evaluation of its last and its averaged model.
    last, averaged = (scores["validation"]["bleu"] for scores in report["results"].values())
    assert [row[1] for row in rows] == [f"{last:.2f}", f"{averaged:.2f}"]
    difference = float(rows[1][1]) - float(rows[0][1])  # of the rounded scores: within a rounding of the printed one
    assert abs(float(rows[1][3]) - difference) <= 0.011
    assert 0 < float(rows[1][4]) <= 1


def test_a_folder_that_is_not_a_run_is_an_error(smoke_run, tmp_path):
    folder, _ = smoke_run
    with pytest.raises(SystemExit, match="results.json does not exist"):
        main(["--run", str(tmp_path), str(folder), str(folder / "averaged")])


def test_one_model_is_nothing_to_compare(smoke_run):
    folder, _ = smoke_run
    with pytest.raises(SystemExit):
        main(["--run", str(folder), str(folder), str(folder)])


def test_a_python_without_mecab_is_told_so_before_anything_is_translated(smoke_run, monkeypatch):
    folder, _ = smoke_run
    monkeypatch.setattr("sacrebleu.tokenizers.tokenizer_ja_mecab.MeCab", None)  # as sacreBLEU leaves it without MeCab
    monkeypatch.setattr(compare_models, "run_data_arguments", lambda run: (DataArguments(target_lang="ja"), 1))
    monkeypatch.setattr(compare_models, "run_translator", None)  # translating would fail differently
    message = r"error: scoring translations into 'ja': .* pip install 'sacrebleu\[ja\]'; nothing was translated\.$"
    with pytest.raises(SystemExit, match=message):
        compare_models.main(["--run", str(folder), str(folder), str(folder / "averaged")])
