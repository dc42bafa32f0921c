"""Training loss and validation BLEU against wall-clock time, from the Trainer's log of one or more runs.

    vt-curves runs/multi30k_en_de --output docs/images/multi30k_curves.png
    vt-curves runs/tatoeba_en_zh runs/tatoeba_zh_en --output docs/images/tatoeba_curves.png

The log is the `log_history` in the newest checkpoint's trainer_state.json; `TranslationTrainer.log` stamps every
entry with `elapsed_s`, the seconds since training began.
"""

import argparse
from pathlib import Path

from transformers import TrainerState
from transformers.trainer_utils import get_last_checkpoint

from vanilla_transformer.training import one_line_errors
from vanilla_transformer.visualization import pyplot


def read_log_history(run_dir: str | Path) -> list[dict]:
    """The log entries of the newest checkpoint in `run_dir` that carry a wall-clock time."""
    checkpoint = get_last_checkpoint(str(run_dir)) if Path(run_dir).is_dir() else None
    if checkpoint is None:
        raise FileNotFoundError(f"{run_dir}: no checkpoint-* folder with a trainer_state.json to read the log from.")
    history = TrainerState.load_from_json(str(Path(checkpoint) / "trainer_state.json")).log_history
    timed = [entry for entry in history if "elapsed_s" in entry]
    if not timed:
        raise ValueError(f"{checkpoint}: the log has no elapsed_s (trained before TranslationTrainer stamped it).")
    return timed


def curve(history: list[dict], key: str) -> tuple[list[float], list[float]]:
    """(minutes, values) of the entries that have `key`."""
    entries = [entry for entry in history if key in entry]
    return [entry["elapsed_s"] / 60 for entry in entries], [entry[key] for entry in entries]


def plot_curves(run_dirs: list[str | Path], output: str | Path) -> Path:
    """Two panels, one line per run: training loss (label-smoothed) and validation BLEU, against minutes."""
    plt = pyplot()
    figure, (loss_axis, bleu_axis) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for run_dir in run_dirs:
        history = read_log_history(run_dir)
        name = Path(run_dir).name
        loss_axis.plot(*curve(history, "loss"), label=name)
        bleu_axis.plot(*curve(history, "eval_bleu"), marker="o", label=name)
    loss_axis.set(title="Training loss (label-smoothed cross-entropy)", xlabel="minutes", ylabel="loss")
    bleu_axis.set(title="Validation sacreBLEU (beam 4)", xlabel="minutes", ylabel="BLEU")
    for axis in (loss_axis, bleu_axis):
        axis.grid(alpha=0.3)
        axis.legend()
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=120)
    plt.close(figure)
    return Path(output)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", help="Output folders of training.train runs.")
    parser.add_argument("--output", required=True, help="The PNG file to write.")
    args = parser.parse_args(argv)
    print(plot_curves(args.run_dirs, args.output))


if __name__ == "__main__":
    main()
