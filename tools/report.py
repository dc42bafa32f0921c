"""The results tables of finished runs as markdown, read from their results.json (what README.md and
docs/experiments.md show).

vt-report runs/multi30k_en_de runs/tatoeba_en_zh runs/tatoeba_zh_en
"""

import argparse
import json
from pathlib import Path

from vanilla_transformer.training import one_line_errors, score_cells

from .curves import read_log_history


def read_report(run_dir: str | Path) -> dict:
    path = Path(run_dir) / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: is {run_dir} the output folder of a finished training run?")
    return json.loads(path.read_text(encoding="utf-8"))


def run_table(run_dir: str | Path) -> str:
    """One row per (model, split): every evaluated model (the last checkpoint, the averaged one, ...) and split."""
    report = read_report(run_dir)
    summary = report["summary"]
    lines = [
        f"**{Path(run_dir).name}**: {summary['steps']:,} steps ({summary['epochs']} epochs), "
        f"{summary['wall_time_s'] / 60:.0f} min wall time in all, "
        f"{summary['train_tokens_per_s']:,} training tokens/s (source + target, no padding)",
        "",
        "| model | split | sacreBLEU | chrF | tokenized BLEU |",
        "|---|---|---:|---:|---:|",
    ]
    for model, splits in report["results"].items():
        for split, scores in splits.items():
            lines.append(f"| {model} | {split} | {score_cells(scores)} |")
    evaluations = [entry for entry in read_log_history(run_dir) if "eval_bleu" in entry]
    if evaluations:
        curve = ", ".join(
            f"{e['eval_bleu']:.2f} (step {e['step']}, {e['elapsed_s'] / 60:.0f} min)" for e in evaluations
        )
        lines += ["", f"Validation sacreBLEU during training: {curve}"]
    return "\n".join(lines)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dirs", nargs="+", help="Output folders of finished training.train runs.")
    args = parser.parse_args(argv)
    print("\n\n".join(run_table(run_dir) for run_dir in args.run_dirs))


if __name__ == "__main__":
    main()
