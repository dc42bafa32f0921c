"""Checkpoint averaging (§6.1: "a single model obtained by averaging the last 5 checkpoints").

vt-average-checkpoints --run_dir RUN --last 5 --output_dir RUN/averaged
vt-average-checkpoints --checkpoints RUN/checkpoint-800 RUN/checkpoint-1000 --output_dir OUT

The output folder is the newest checkpoint's model folder (config, generation config, tokenizer, code) with its
weights replaced by the element-wise mean, saved as a run's own folder is (with the translation pipeline's code); it
loads with `from_pretrained` like any model folder. It is written under a temporary name and renamed when complete,
so a killed or failed run leaves any earlier folder as it was; an existing folder is only replaced when it is a model
folder (never a run, a checkpoint or a folder holding them).
"""

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer.folder_checks import check_tokenizer_file, numbered_checkpoints

from .checkpoints import EXPONENTIAL_AVERAGE, WEIGHTS, why_incomplete
from .console import one_line_errors, transformers_bars_off
from .folders import replacement_problem, write_folder
from .hub import save_translation_folder

# What a Trainer checkpoint holds besides the model: not part of a model folder.
TRAINER_FILES = (
    "optimizer.pt",
    "scheduler.pt",
    "trainer_state.json",
    "training_args.bin",
    "rng_state*",
    "scaler.pt",
    EXPONENTIAL_AVERAGE,
)


class AveragingError(ValueError):
    """The checkpoints cannot be averaged, or the output folder cannot be written without losing something."""


def last_checkpoints(run_dir: Path, count: int) -> list[Path]:
    """The `count` newest complete `checkpoint-STEP` folders of a Trainer run, oldest first."""
    checkpoints = [c for c in numbered_checkpoints(run_dir) if why_incomplete(c) is None]
    if not checkpoints:
        raise AveragingError(f"No complete checkpoint-STEP folders in {run_dir}.")
    return checkpoints[-count:]


def read_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(checkpoint / WEIGHTS)
    except SafetensorError:  # cut short by a kill or a full disk, or damaged in a copy; the wording varies by release
        raise AveragingError(f"{checkpoint / WEIGHTS} cannot be read, cut short or damaged: leave it out.") from None


def check_one_vocabulary(checkpoints: Sequence[Path]) -> None:
    """The checkpoints' tokenizers hold the same tokens under the same ids: the mean of two models trained on other
    vocabularies is no model (their weights of one id stand for other tokens)."""
    reference = None
    for checkpoint in checkpoints:
        if not (checkpoint / "tokenizer.json").is_file():
            continue
        check_tokenizer_file(checkpoint)
        vocabulary = Tokenizer.from_file(str(checkpoint / "tokenizer.json")).get_vocab()
        if reference is None:
            reference = (checkpoint, vocabulary)
        elif vocabulary != reference[1]:
            raise AveragingError(
                f"{checkpoint} and {reference[0]} hold other vocabularies: average checkpoints of one run."
            )


def average_weights(checkpoints: Sequence[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the checkpoints' weights, accumulated in float64 and stored in each tensor's dtype."""
    total: dict[str, torch.Tensor] = {}
    for checkpoint in checkpoints:
        weights = read_weights(checkpoint)
        if total and weights.keys() != total.keys():
            raise AveragingError(f"{checkpoint / WEIGHTS} holds other tensors than {checkpoints[0] / WEIGHTS}.")
        for name, tensor in weights.items():
            total[name] = total.get(name, 0) + tensor.double()
    reference = read_weights(checkpoints[-1])
    return {name: (tensor / len(checkpoints)).to(reference[name].dtype) for name, tensor in total.items()}


def write_averaged_model(checkpoints: Sequence[Path], output_dir: Path) -> Path:
    """A model folder at `output_dir`: the newest checkpoint's files, with the averaged weights."""
    for checkpoint in checkpoints:
        if not (checkpoint / WEIGHTS).exists():
            raise AveragingError(f"{checkpoint} has no {WEIGHTS}.")
    model_folder = {"config.json", WEIGHTS}  # and not a checkpoint, which also holds trainer_state.json
    problem = replacement_problem(output_dir, checkpoints, "a model folder", model_folder, {"trainer_state.json"})
    if problem:
        raise AveragingError(f"--output_dir {problem}")
    check_one_vocabulary(checkpoints)
    output_dir = output_dir.resolve()  # renames need the real name ("." has none)
    averaged = average_weights(checkpoints)
    output_dir.parent.mkdir(parents=True, exist_ok=True)

    def write(folder: Path) -> None:
        shutil.copytree(checkpoints[-1], folder, ignore=shutil.ignore_patterns(*TRAINER_FILES, WEIGHTS))
        save_file(averaged, folder / WEIGHTS, metadata={"format": "pt"})
        # Saved again as a run's own folder is: with the translation pipeline's code, which checkpoints lack.
        model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
        save_translation_folder(model, tokenizer, folder)

    write_folder(output_dir, write)
    return output_dir


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-average-checkpoints", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run_dir", type=Path, help="A training output folder with checkpoint-STEP folders.")
    source.add_argument("--checkpoints", type=Path, nargs="+", help="Checkpoint folders to average.")
    parser.add_argument("--last", type=int, default=5, help="With --run_dir: how many of the newest to average.")
    parser.add_argument("--output_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.last < 1:
        parser.error(f"argument --last: {args.last}: must be at least 1")
    checkpoints = args.checkpoints or last_checkpoints(args.run_dir, args.last)
    with transformers_bars_off():
        write_averaged_model(checkpoints, args.output_dir)
    print(f"Averaged {len(checkpoints)} checkpoints ({', '.join(c.name for c in checkpoints)}) into {args.output_dir}")


if __name__ == "__main__":
    main()
