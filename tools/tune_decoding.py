"""How many checkpoints to average, and which beam size and length penalty to decode with, judged on a finished run's
validation set (never on a test set): one row per choice, the best marked.

vt-tune-decoding runs/multi30k_en_de --average 1 5 10 --num_beams 4 --length_penalty 0.6 1.0

The run folder must still hold its checkpoints (`--save_total_limit` at least the largest --average). Averaging 1
is the newest checkpoint alone; 0 is the model the run shipped in its folder (with `--ema_decay`, the exponential
average, which no number of checkpoints gives). Each row decodes the whole validation set once (about 40 s for
Multi30K's 1,014 sentences with beam 4 on 2 CPU cores).
"""

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from datasets import DatasetDict

from vanilla_transformer import TranslationPipeline
from vanilla_transformer.training import (
    AveragingError,
    DataArguments,
    check_scoring,
    last_checkpoints,
    load_parallel_corpus,
    one_line_errors,
    preprocessed,
    record_text_preprocessing,
    translation_scores,
    write_averaged_model,
)

from .report import read_report
from .translate import finite_float, load_model_folder, non_negative_int, positive_int, resolve_device


def run_data_arguments(run_dir: Path) -> tuple[DataArguments, int]:
    """The data settings and seed of a finished run, from its report."""
    arguments = read_report(run_dir)["arguments"]
    return DataArguments(**arguments["data"]), arguments.get("seed", 1)


def validation_pairs(data_args: DataArguments, seed: int) -> tuple[list[str], list[str], str]:
    """(sources, references, target language) of the validation split the run was evaluated on (the run's seed
    chooses it where it was cut from the training data). The references are as training scored them; the sources
    are as the corpus has them, since the run's translation pipeline prepares them as training did (`run_translator`;
    tokenizing twice is not tokenizing once: "d' une" -> "d ' une")."""
    natural = load_parallel_corpus(replace(data_args, preprocess="none"), seed)["validation"]
    references = preprocessed(DatasetDict(validation=natural), data_args)["validation"]["target"]
    return list(natural["source"]), list(references), data_args.target_lang


def run_translator(folder: Path | str, data_args: DataArguments) -> TranslationPipeline:
    """The translation pipeline of a model folder, for the run's validation sources. A folder whose tokenizer does not
    say how its training text was prepared (written before tokenizers recorded it) is taken to share the run's."""
    model, tokenizer = load_model_folder(str(folder), resolve_device("auto"))
    if "text_preprocessing" not in tokenizer.init_kwargs:
        record_text_preprocessing(tokenizer, data_args.preprocess, data_args.source_lang, data_args.target_lang)
    return TranslationPipeline(model=model, tokenizer=tokenizer, device=model.device)


def averaged_model_folder(run_dir: Path, count: int, scratch: Path) -> Path:
    """A model folder with the mean weights of the run's `count` newest checkpoints (the newest one alone for 1, the
    run's shipped model for 0)."""
    if count == 0:
        return run_dir
    checkpoints = last_checkpoints(run_dir, count)
    if len(checkpoints) < count:
        raise AveragingError(f"{run_dir} holds {len(checkpoints)} complete checkpoints, not {count}.")
    return checkpoints[0] if count == 1 else write_averaged_model(checkpoints, scratch / f"average-{count}")


def translations(translator: TranslationPipeline, sources: list[str], batch: int, **decoding) -> list[str]:
    """The translation of every source, decoded with `decoding` (else the model's generation config); the pipeline
    decodes shortest sources first: a run's validation scored in 16 s instead of 22 s. Only translations that run into
    the length limit (source length + 50, the source padded to its batch's longest) can change by it: 4 of
    Multi30K's 1,014, each a runaway repetition cut shorter."""
    return [output["translation_text"].strip() for output in translator(sources, batch_size=batch, **decoding)]


def validation_scores(
    translator: TranslationPipeline, pairs: tuple[list[str], list[str], str], beams: int, penalty: float, batch: int
) -> dict:
    sources, references, target_lang = pairs
    hypotheses = translations(translator, sources, batch, num_beams=beams, length_penalty=penalty)
    return translation_scores(hypotheses, references, target_lang)


def model_label(count: int) -> str:
    """How a row names its model: the number of checkpoints averaged, or the run's shipped model for 0."""
    return str(count) if count else "shipped"


def markdown_table(rows: list[tuple[int, int, float, dict]]) -> str:
    best = max(rows, key=lambda row: row[3]["bleu"])
    lines = [
        "| checkpoints averaged | beam | length penalty | validation sacreBLEU | tokenized BLEU |",
        "|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        count, beams, penalty, scores = row
        tokenized = f"{scores['tokenized_bleu']:.2f}" if "tokenized_bleu" in scores else "–"
        bleu = f"{scores['bleu']:.2f}{' (best)' if row is best else ''}"
        lines.append(f"| {model_label(count)} | {beams} | {penalty} | {bleu} | {tokenized} |")
    return "\n".join(lines)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-tune-decoding",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", type=Path, help="The output folder of a finished training.train run.")
    parser.add_argument(
        "--average",
        type=non_negative_int,
        nargs="+",
        default=[1, 5],
        help="Checkpoints to average; 0: the model the run shipped (e.g. its exponential average).",
    )
    parser.add_argument("--num_beams", type=positive_int, nargs="+", default=[4])
    parser.add_argument("--length_penalty", type=finite_float, nargs="+", default=[0.6])
    parser.add_argument("--batch_size", type=positive_int, default=64)
    args = parser.parse_args(argv)

    rows = []
    data_args, seed = run_data_arguments(args.run_dir)
    check_scoring(data_args.target_lang, "nothing was translated")
    pairs = validation_pairs(data_args, seed)
    with tempfile.TemporaryDirectory() as scratch:
        for count in args.average:
            translator = run_translator(averaged_model_folder(args.run_dir, count, Path(scratch)), data_args)
            for beams in args.num_beams:
                for penalty in args.length_penalty:
                    scores = validation_scores(translator, pairs, beams, penalty, args.batch_size)
                    rows.append((count, beams, penalty, scores))
                    choice = f"average {model_label(count)}, beam {beams}, length penalty {penalty}"
                    print(f"{choice}: BLEU {scores['bleu']:.2f}")
    print("\n" + markdown_table(rows))


if __name__ == "__main__":
    main()
