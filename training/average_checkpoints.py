"""Checkpoint averaging (§6.1: "a single model obtained by averaging the last 5 checkpoints").

python -m training.average_checkpoints --run_dir RUN --last 5 --output_dir RUN/averaged
python -m training.average_checkpoints --checkpoints RUN/checkpoint-800 RUN/checkpoint-1000 --output_dir OUT

The output folder is the newest checkpoint's model folder (config, generation config, tokenizer, code) with its
weights replaced by the element-wise mean; it loads with `from_pretrained` like any model folder.
"""

import argparse
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"
# What a Trainer checkpoint holds besides the model: not part of a model folder.
TRAINER_STATE = ("optimizer.pt", "scheduler.pt", "trainer_state.json", "training_args.bin", "rng_state*", "scaler.pt")


def last_checkpoints(run_dir: Path, count: int) -> list[Path]:
    """The `count` newest `checkpoint-STEP` folders of a Trainer run, oldest first."""
    checkpoints = [p for p in run_dir.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    checkpoints.sort(key=lambda p: int(p.name.split("-")[1]))
    if not checkpoints:
        raise SystemExit(f"No checkpoint-STEP folders in {run_dir}.")
    return checkpoints[-count:]


def average_weights(checkpoints: Sequence[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the checkpoints' weights, accumulated in float64 and stored in each tensor's dtype."""
    total: dict[str, torch.Tensor] = {}
    for checkpoint in checkpoints:
        weights = load_file(checkpoint / WEIGHTS)
        if total and weights.keys() != total.keys():
            raise SystemExit(f"{checkpoint / WEIGHTS} holds other tensors than {checkpoints[0] / WEIGHTS}.")
        for name, tensor in weights.items():
            total[name] = total.get(name, 0) + tensor.double()
    reference = load_file(checkpoints[-1] / WEIGHTS)
    return {name: (tensor / len(checkpoints)).to(reference[name].dtype) for name, tensor in total.items()}


def write_averaged_model(checkpoints: Sequence[Path], output_dir: Path) -> Path:
    """A model folder at `output_dir`: the newest checkpoint's files, with the averaged weights."""
    for checkpoint in checkpoints:
        if not (checkpoint / WEIGHTS).exists():
            raise SystemExit(f"{checkpoint} has no {WEIGHTS}.")
    averaged = average_weights(checkpoints)
    if output_dir.exists():
        shutil.rmtree(output_dir)
    shutil.copytree(checkpoints[-1], output_dir, ignore=shutil.ignore_patterns(*TRAINER_STATE, WEIGHTS))
    save_file(averaged, output_dir / WEIGHTS, metadata={"format": "pt"})
    return output_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--run_dir", type=Path, help="A training output folder with checkpoint-STEP folders.")
    source.add_argument("--checkpoints", type=Path, nargs="+", help="Checkpoint folders to average.")
    parser.add_argument("--last", type=int, default=5, help="With --run_dir: how many of the newest to average.")
    parser.add_argument("--output_dir", type=Path, required=True)
    args = parser.parse_args(argv)
    checkpoints = args.checkpoints or last_checkpoints(args.run_dir, args.last)
    write_averaged_model(checkpoints, args.output_dir)
    print(f"Averaged {len(checkpoints)} checkpoints ({', '.join(c.name for c in checkpoints)}) into {args.output_dir}")


if __name__ == "__main__":
    main()
