"""The translate CLI: arguments, streamed stdin or files in batches, order kept, empty lines kept."""

import io
import subprocess
import sys

from training.translate import batches, main

from .conftest import ROOT, translate

SOURCES = ["A dog sleeps in the park.", "", "The man waits by the lake.", "A cat runs on the grass.", "The girl sits."]


def test_arguments_are_translated_to_stdout(smoke_run, capsys):
    folder, _ = smoke_run
    sentences = ["A dog sleeps in the park.", "The man waits by the lake."]
    main(["--model", str(folder), *sentences])
    assert capsys.readouterr().out.splitlines() == translate(folder, sentences)


def test_stdin_is_streamed_in_batches_in_order_with_empty_lines_kept(smoke_run, capsys, monkeypatch):
    folder, _ = smoke_run
    main(["--model", str(folder), *SOURCES])
    one_by_one = capsys.readouterr().out.splitlines()
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(s + "\n" for s in SOURCES)))
    main(["--model", str(folder), "--batch_size", "2"])
    streamed = capsys.readouterr().out.splitlines()
    assert streamed == one_by_one  # batching (and the padding it brings) changes nothing
    assert len(streamed) == len(SOURCES) and streamed[1] == "" and streamed[0] == translate(folder, SOURCES[:1])[0]


def test_files_in_and_out(smoke_run, tmp_path):
    folder, _ = smoke_run
    (tmp_path / "in.txt").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "training.translate", "--model", str(folder), "--input", str(tmp_path / "in.txt")]
    result = subprocess.run([*command, "--output", str(tmp_path / "out.txt")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "5 lines" in result.stderr  # the progress bar, shown when writing to a file
    written = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert written[0] == translate(folder, SOURCES[:1])[0] and written[0].startswith("Ein Hund")


def test_batches_keep_order_and_strip_newlines():
    assert list(batches(["a\n", "b\r\n", "c"], 2)) == [["a", "b"], ["c"]]
