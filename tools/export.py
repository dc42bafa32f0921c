"""Export a trained model folder to CTranslate2, the inference engine that serves OpenNMT and Marian models.

vt-export ctranslate2 runs/multi30k_en_de runs/multi30k_en_de-ct2 --quantization int8
vt-translate --engine ctranslate2 --model runs/multi30k_en_de-ct2 "A dog runs on the grass."

The conversion is `vanilla_transformer.export`; this command puts its folder in place without losing anything:
--force replaces an earlier export only, never the model folder, the run holding it, `.` or a folder of yours.
"""

import argparse
from pathlib import Path

from vanilla_transformer.export import (
    CTRANSLATE2_FILES,
    DEFAULT_MAX_POSITIONS,
    QUANTIZATIONS,
    ExportError,
    write_ctranslate2,
)
from vanilla_transformer.training import one_line_errors, replacement_problem, write_folder


def export_ctranslate2(
    model_dir: str | Path,
    output_dir: str | Path,
    quantization: str | None = None,
    max_positions: int = DEFAULT_MAX_POSITIONS,
    force: bool = False,
) -> Path:
    """Write the CTranslate2 model of `model_dir` to `output_dir`, with its tokenizer and generation config."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        raise ExportError(f"{output_dir} exists: choose a new folder, or pass --force to replace it.")
    problem = replacement_problem(output_dir, [Path(model_dir)], "a CTranslate2 model", CTRANSLATE2_FILES)
    if problem:
        raise ExportError(problem)
    # Written beside the target and renamed when complete: an interrupted export leaves no half folder behind.
    write_folder(output_dir, lambda folder: write_ctranslate2(model_dir, folder, quantization, max_positions))
    return output_dir


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    engines = parser.add_subparsers(dest="engine", required=True, metavar="ENGINE")
    ct2 = engines.add_parser("ctranslate2", help="A CTranslate2 model folder (translate it with vt-translate).")
    ct2.add_argument("model_dir", help="A model folder written by training.train (or save_pretrained).")
    ct2.add_argument("output_dir", help="Where to write the CTranslate2 model.")
    ct2.add_argument("--quantization", choices=QUANTIZATIONS, help="Weight type (default: the model's, float32).")
    ct2.add_argument(
        "--max_positions",
        type=int,
        default=DEFAULT_MAX_POSITIONS,
        help=f"Longest source or output in tokens (default {DEFAULT_MAX_POSITIONS}).",
    )
    ct2.add_argument("--force", action="store_true", help="Replace output_dir if it exists.")
    args = parser.parse_args(argv)
    output = export_ctranslate2(args.model_dir, args.output_dir, args.quantization, args.max_positions, args.force)
    print(f"CTranslate2 model ({args.quantization or 'float32'}): {output}")


if __name__ == "__main__":
    main()
