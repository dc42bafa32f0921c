"""The translate CLI: arguments, streamed stdin or files in batches, order kept, empty lines kept."""

import io
import platform
import shutil
import subprocess
import sys

import huggingface_hub.constants
import pytest
import torch

from vanilla_transformer.tools.translate import chunks, main
from vanilla_transformer.training.text_files import CorpusError

from .helpers import FAULTS_OF_BLOCKS_MAPPED_ANEW, ROOT, page_faults_of_freed_blocks, translate

SOURCES = ["A dog sleeps in the park.", "", "The man waits by the lake.", "A cat runs on the grass.", "The girl sits."]


def test_arguments_are_translated_to_stdout(smoke_run, capsys):
    folder, _ = smoke_run
    sentences = ["A dog sleeps in the park.", "The man waits by the lake."]
    main(["--model", str(folder), *sentences])
    assert capsys.readouterr().out.splitlines() == translate(folder, sentences)


def test_threads_set_the_generate_engines_torch_threads_too(smoke_run, capsys):
    before = torch.get_num_threads()
    try:
        main(["--model", str(smoke_run[0]), "--threads", "1", "A dog sleeps in the park."])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_stdin_is_streamed_in_batches_in_order_with_empty_lines_kept(smoke_run, capsys, monkeypatch):
    folder, _ = smoke_run
    main(["--model", str(folder), *SOURCES])
    one_by_one = capsys.readouterr().out.splitlines()
    monkeypatch.setattr(sys, "stdin", stdin("".join(s + "\n" for s in SOURCES).encode()))
    main(["--model", str(folder), "--batch_size", "2"])
    streamed = capsys.readouterr().out.splitlines()
    assert streamed == one_by_one  # batching (and the padding it brings) changes nothing
    assert len(streamed) == len(SOURCES) and streamed[1] == "" and streamed[0] == translate(folder, SOURCES[:1])[0]


def test_files_in_and_out(smoke_run, tmp_path):
    folder, _ = smoke_run
    (tmp_path / "in.txt").write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "vanilla_transformer.tools.translate",
        "--model",
        str(folder),
        "--input",
        str(tmp_path / "in.txt"),
    ]
    result = subprocess.run([*command, "--output", str(tmp_path / "out.txt")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "5 lines" in result.stderr  # the progress bar, shown when writing to a file
    assert "Loading weights" not in result.stderr  # transformers' bar, shown before
    written = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
    assert written[0] == translate(folder, SOURCES[:1])[0] and len(written) == len(SOURCES)


def test_lines_read_before_a_reading_error_are_still_translated():
    def read():
        yield from ["a a", "b", "c"]
        raise CorpusError("line 4 is not UTF-8")

    read_in_chunks = chunks(read(), 2)
    assert next(read_in_chunks) == ["a a", "b"] and next(read_in_chunks) == ["c"]
    with pytest.raises(CorpusError, match="line 4"):
        next(read_in_chunks)


def test_sentences_batched_by_length_are_written_in_input_order(smoke_run, tmp_path, capsys, monkeypatch):
    from vanilla_transformer import TranslationPipeline

    folder, _ = smoke_run
    given = []
    call = TranslationPipeline.__call__
    monkeypatch.setattr(
        TranslationPipeline, "__call__", lambda self, texts, **kw: given.append(texts) or call(self, texts, **kw)
    )
    sentences = ["A dog.", "A man in a red shirt sits on a bench by the lake.", "", "The girl sits.", "Two dogs run."]
    (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    outputs = []
    for sort_batches in ("1", "4"):
        main(
            ["--model", str(folder), "--input", str(tmp_path / "in.txt"), "--batch_size", "2"]
            + ["--sort_batches", sort_batches]
        )
        outputs.append(capsys.readouterr().out.splitlines())
    assert given[:3] == [sentences[:2], sentences[2:4], sentences[4:]]  # one batch of lines at a time
    assert given[3:] == [sentences]  # four batches of lines at a time: the pipeline orders them by length
    assert outputs[0] == outputs[1] and outputs[0][2] == ""
    assert [outputs[0][1], outputs[0][4]] == translate(folder, [sentences[1], sentences[4]])


def stdin(data: bytes) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")


def test_a_carriage_return_inside_a_line_gives_one_translation_per_line(smoke_run, capsys, monkeypatch):
    folder, _ = smoke_run
    monkeypatch.setattr(sys, "stdin", stdin(b"A dog sleeps\rin the park.\r\nThe girl sits.\n"))
    main(["--model", str(folder)])
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_the_input_file_is_never_overwritten(smoke_run, tmp_path, capsys):
    folder, _ = smoke_run
    source = tmp_path / "in.txt"
    source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
    (tmp_path / "link.txt").symlink_to(source)
    for output in (source, tmp_path / "link.txt"):
        with pytest.raises(SystemExit):
            main(["--model", str(folder), "--input", str(source), "--output", str(output)])
        assert "is the --input file: writing would erase the sentences" in capsys.readouterr().err
        assert source.read_text(encoding="utf-8") == "\n".join(SOURCES) + "\n"


def test_a_utf16_input_file_as_windows_tools_save_it(smoke_run, tmp_path, capsys):
    folder, _ = smoke_run
    sentences = [s for s in SOURCES if s][:2]
    (tmp_path / "in.txt").write_bytes("".join(s + "\r\n" for s in sentences).encode("utf-16"))
    main(["--model", str(folder), "--input", str(tmp_path / "in.txt")])
    assert capsys.readouterr().out.splitlines() == translate(folder, sentences)


def test_bad_input_ends_in_one_line_naming_it(smoke_run, tmp_path, monkeypatch, capsys):
    folder, _ = smoke_run
    monkeypatch.setattr(sys, "stdin", stdin(b"\x89PNG\r\n\x1a\n\x00\x00"))
    with pytest.raises(SystemExit, match=r"error: standard input, line 1: not UTF-8 text \(byte 0x89"):
        main(["--model", str(folder)])
    with pytest.raises(SystemExit, match=r"error: --model .*nowhere: no such folder\.$"):
        main(["--model", str(tmp_path / "nowhere"), "a dog"])
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # read at import: the variable is too late
    with pytest.raises(SystemExit, match=r"error: --model runs/nowhere: no such folder here, nor a model on the Hub"):
        main(["--model", "runs/nowhere", "a dog"])
    broken = shutil.copytree(folder, tmp_path / "no-tokenizer", ignore=shutil.ignore_patterns("tokenizer.json"))
    with pytest.raises(SystemExit, match=r"no-tokenizer has no tokenizer\.json \(the model's vocabulary\)"):
        main(["--model", str(broken), "a dog"])
    for flag in ("--batch_size", "--num_beams", "--max_new_tokens", "--sort_batches", "--threads"):
        with pytest.raises(SystemExit):
            main(["--model", str(folder), flag, "0", "a dog"])
        assert f"argument {flag}: 0: must be at least 1" in capsys.readouterr().err


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt() is glibc's")
def test_vt_translate_keeps_the_memory_decoding_frees(smoke_run):
    """Decoding steps allocate and free vocabulary-sized tensors: after vt-translate, freed blocks are reused without
    their pages being mapped and zeroed again (training.allocator); without it, they are."""
    translated = (
        f"from vanilla_transformer.tools.translate import main\nmain(['--model', {str(smoke_run[0])!r}, 'a dog runs'])"
    )
    assert page_faults_of_freed_blocks(translated) < FAULTS_OF_BLOCKS_MAPPED_ANEW / 100
    training = "vanilla_transformer.training"
    switched_off = f"import {training}\n{training}.reuse_freed_memory = lambda: False"
    translated_without = f"{switched_off}\n{translated}"
    assert page_faults_of_freed_blocks(translated_without) > FAULTS_OF_BLOCKS_MAPPED_ANEW


def test_vt_translate_asks_for_mkls_intel_kernels_unless_told_not_to(smoke_run, monkeypatch, capsys):
    import vanilla_transformer.tools.translate as translate_tool

    calls = []
    monkeypatch.setattr(translate_tool, "use_mkl_intel_kernels", lambda: calls.append("asked") or False)
    main(["--model", str(smoke_run[0]), "--mkl_intel_kernels", "false", "a dog runs"])
    assert calls == []
    main(["--model", str(smoke_run[0]), "a dog runs"])
    assert calls == ["asked"]
    first, second = capsys.readouterr().out.splitlines()
    assert first == second and first  # the same translation either way
