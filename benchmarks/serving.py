"""Serving a trained folder: our generate() against CTranslate2 (float32 and int8), and MarianMTModel.generate() at
identical shapes; BLEU and sentences per second on a test set.

    data=../shared/data/multi30k
    python benchmarks/serving.py --model runs/multi30k_en_de \\
        --source $data/test_2016_flickr.en.gz --reference $data/test_2016_flickr.de.gz --sentences 500

Every engine translates the same sentences in the same batches (`--batch-size`, formed as vt-translate forms them:
sentences of similar length, from 16 batches of lines at a time) with beam 4 and length penalty 0.6 (or the folder's
generation settings), on `--threads` CPU threads (torch and CTranslate2 alike), through vt-translate's engines,
so the tokenizer and the output limit (source length + 50) are the same.

MarianMTModel cannot hold this model's weights when it is pre-LN (Marian is post-LN only), so its row times a
randomly initialised MarianMTModel of the same shape (d_model, layers, heads, FFN width, vocabulary) made to produce,
for each batch, exactly as many tokens as our model produced (min_new_tokens = max_new_tokens); the row "our
generate(), same lengths" does the same with our model, so that these two rows compare equal work.

Each engine runs in processes of its own, as under `vt-translate`: in a process where torch had run any parallel CPU
operation, CTranslate2 with two threads sharing each batch (vt-translate's setting then) translated 3.6x slower (2
cores of an AMD EPYC, torch 2.13.0, ctranslate2 4.8.5), and one process for all rows had put CTranslate2 float32 at
1.3x our generate() instead of ~5x. The two "same lengths" rows share their processes and take turns. A row's figure
is the median of 2 passes over the sentences in each of `--rounds` processes, with freed memory kept as vt-translate
keeps it (training.allocator) and, on an AMD CPU, MKL's Intel kernels (training.mkl_kernels).
"""

import argparse
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from itertools import cycle, islice
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_marian import Shape, build_models  # noqa: E402

from vanilla_transformer.pipeline_vanilla_transformer import shortest_first, source_token_count  # noqa: E402
from vanilla_transformer.tools.export import export_ctranslate2  # noqa: E402
from vanilla_transformer.tools.translate import ENGINES, SORT_BATCHES, Translator, chunks, parse_arguments  # noqa: E402
from vanilla_transformer.training import (  # noqa: E402
    read_lines,
    reuse_freed_memory,
    translation_scores,
    use_mkl_intel_kernels,
)


def file_batches(lines: list[str], batch_size: int, length: Callable[[str], int]) -> list[list[int]]:
    """The line numbers of each batch that vt-translate forms of a file: SORT_BATCHES batches of lines at a time,
    shortest first."""
    window, batches = batch_size * SORT_BATCHES, []
    for start in range(0, len(lines), window):
        order = [start + row for row in shortest_first([length(line) for line in lines[start : start + window]])]
        batches += [order[first : first + batch_size] for first in range(0, len(order), batch_size)]
    return batches


def timed(translate: Translator, sources: list[str], batch_size: int) -> tuple[list[str], float]:
    """The translations of `sources`, read as vt-translate reads a file, and the seconds they took."""
    started = time.perf_counter()
    hypotheses = [text for lines in chunks(sources, batch_size * SORT_BATCHES) for text in translate(lines)]
    return hypotheses, time.perf_counter() - started


def engine(model: str, *flags: str) -> Translator:
    """An engine of vanilla_transformer.tools.translate, set up exactly as the vt-translate command line would."""
    args = parse_arguments(["--model", model, "--device", "cpu", *flags])
    return ENGINES[args.engine](args)


def same_length_generate(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, lengths: list[int], num_beams: int, batch_size: int
) -> Translator:
    """generate() over vt-translate's batches, forced to produce lengths[k] tokens for the k-th batch (end-of-sentence
    suppressed); round after round."""
    remaining = cycle(lengths)
    length = source_token_count(tokenizer)

    def translate(lines: list[str]) -> list[str]:
        for batch in file_batches(lines, batch_size, length):
            tokens = next(remaining)
            inputs = tokenizer([lines[row] for row in batch], return_tensors="pt", padding=True)
            with torch.inference_mode():
                model.generate(**inputs, num_beams=num_beams, min_new_tokens=tokens, max_new_tokens=tokens)
        return ["" for _ in lines]

    return translate


def row_translator(
    row: str, model: str, num_beams: int, threads: int, lengths: list[int], batch_size: int
) -> Translator:
    """The translator that a row (see ROW_GROUPS) times; `model` is the folder it reads."""
    common = ["--num_beams", str(num_beams)]
    if row == "our generate(), fp32":
        return engine(model, *common)
    if row.startswith("CTranslate2"):
        return engine(model, "--engine", "ctranslate2", "--threads", str(threads), *common)
    translating = AutoModelForSeq2SeqLM.from_pretrained(model).eval()
    if row.startswith("MarianMTModel"):
        c = translating.config
        shape = Shape(c.d_model, c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim, c.vocab_size)
        translating = build_models(shape, dropout=0.0)["Marian"].eval()
    return same_length_generate(translating, AutoTokenizer.from_pretrained(model), lengths, num_beams, batch_size)


def measured_rows(
    folders: dict[str, str],
    sources: list[str],
    batch_size: int,
    threads: int,
    num_beams: int,
    lengths: list[int],
    passes: int = 2,
) -> dict[str, tuple[list[str], list[float]]]:
    """For each row named in `folders` (and the folder it reads): its translations and the seconds of each of
    `passes` passes over the sources, the rows taking turns (which goes first alternates). Run as vt-translate runs:
    with MKL's Intel kernels on an AMD CPU and freed memory kept (tools.translate.main)."""
    use_mkl_intel_kernels()  # before the first matrix product, where MKL makes its choice
    torch.set_num_threads(threads)
    reuse_freed_memory()
    translators = {
        row: row_translator(row, folder, num_beams, threads, lengths, batch_size) for row, folder in folders.items()
    }
    hypotheses: dict[str, list[str]] = {}
    seconds: dict[str, list[float]] = {row: [] for row in folders}
    for pass_index in range(passes):
        for row in list(folders)[:: 1 if pass_index % 2 == 0 else -1]:
            hypotheses[row], spent = timed(translators[row], sources, batch_size)
            seconds[row].append(spent)
    return {row: (hypotheses[row], seconds[row]) for row in folders}


# Rows timed together in one process; each group in a process of its own.
ROW_GROUPS = [
    ["our generate(), fp32"],
    ["CTranslate2 float32"],
    ["CTranslate2 int8"],
    ["our generate(), same lengths", "MarianMTModel.generate(), same lengths"],
]


def in_own_process(function: Callable, *args: object) -> object:
    """function(*args), run in a fresh Python process (spawned, so that it inherits no thread pools)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as process:
        return process.submit(function, *args).result()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A model folder written by training.train.")
    parser.add_argument("--source", required=True, help="Source sentences, one a line (.gz allowed).")
    parser.add_argument("--reference", required=True, help="Reference translations, line-aligned with --source.")
    parser.add_argument("--target-lang", default="de", help="For sacreBLEU's tokenizer (zh for Chinese).")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="Processes per engine, each with 2 passes.")
    args = parser.parse_args(argv)
    sources = list(islice(read_lines(args.source), args.sentences))
    references = list(islice(read_lines(args.reference), args.sentences))
    settings = (sources, args.batch_size, args.threads, args.num_beams)

    seconds: dict[str, list[float]] = {row: [] for group in ROW_GROUPS for row in group}
    translations: dict[str, list[str]] = {}
    lengths: list[int] = []
    with tempfile.TemporaryDirectory() as exports:
        folders = {row: args.model for row in seconds}
        for quantization in ("float32", "int8"):
            folder = export_ctranslate2(args.model, Path(exports) / quantization, quantization=quantization)
            folders[f"CTranslate2 {quantization}"] = str(folder)
        # Processes of one machine differ by up to a fifth in speed (where their threads land): every group runs in
        # `rounds` processes, and which group goes first alternates.
        for round_index in range(args.rounds):
            for group in ROW_GROUPS[:: 1 if round_index % 2 == 0 else -1]:
                measured = in_own_process(measured_rows, {row: folders[row] for row in group}, *settings, lengths)
                for row, (hypotheses, times) in measured.items():
                    translations[row] = hypotheses
                    seconds[row] += times
                if not lengths:
                    # Tokens per batch as our model produced them: the longest translation of the batch, with its end.
                    tokenizer = AutoTokenizer.from_pretrained(args.model)
                    ids = tokenizer(translations["our generate(), fp32"])["input_ids"]
                    batched = file_batches(sources, args.batch_size, source_token_count(tokenizer))
                    lengths = [max(len(ids[number]) for number in numbers) for numbers in batched]

    rows: dict[str, tuple[float | None, float]] = {}
    for row, times in seconds.items():
        bleu = None
        if not row.endswith("same lengths"):
            bleu = translation_scores(translations[row], references, args.target_lang)["bleu"]
        rows[row] = (bleu, statistics.median(times))
    print(
        f"{len(sources)} sentences, batches of {args.batch_size}, beam {args.num_beams}, {args.threads} threads, "
        f"median of {2 * args.rounds} passes in {args.rounds} processes per engine"
    )
    print("\n| engine | sacreBLEU | sentences/s | vs our generate() |\n|---|---:|---:|---:|")
    base = len(sources) / rows["our generate(), fp32"][1]
    for name, (bleu, median_seconds) in rows.items():
        speed = len(sources) / median_seconds
        print(f"| {name} | {'' if bleu is None else f'{bleu:.2f}'} | {speed:.1f} | {speed / base:.2f}x |")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
