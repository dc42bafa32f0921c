"""Export a trained model folder to CTranslate2 (the inference engine that serves OpenNMT and Marian models) or to
ONNX (onnxruntime, and onnxruntime-web in a browser).

vt-export ctranslate2 runs/multi30k_en_de runs/multi30k_en_de-ct2 --quantization int8
vt-translate --engine ctranslate2 --model runs/multi30k_en_de-ct2 "A dog runs on the grass."
vt-export onnx runs/multi30k_en_de runs/multi30k_en_de-onnx --quantization int8

The conversions are `vanilla_transformer.export` and `vanilla_transformer.export_onnx`; this command puts their
folder in place without losing anything: --force replaces an earlier export of the same kind only, never the model
folder, the run holding it, `.` or a folder of yours.
"""

import argparse
import functools
from collections.abc import Callable
from pathlib import Path

from vanilla_transformer.export_base import DEFAULT_MAX_POSITIONS, QUANTIZATIONS, ExportError
from vanilla_transformer.training import one_line_errors, replacement_problem, transformers_bars_off, write_folder


def export_ctranslate2(
    model_dir: str | Path,
    output_dir: str | Path,
    quantization: str | None = None,
    max_positions: int = DEFAULT_MAX_POSITIONS,
    force: bool = False,
) -> Path:
    """Write the CTranslate2 model of `model_dir` to `output_dir`, with its tokenizer and generation config."""
    from vanilla_transformer.export import CTRANSLATE2_FILES, write_ctranslate2  # needs CTranslate2

    write = functools.partial(write_ctranslate2, model_dir, quantization=quantization, max_positions=max_positions)
    return export_into(model_dir, output_dir, "a CTranslate2 model", CTRANSLATE2_FILES, write, force)


def export_onnx(
    model_dir: str | Path, output_dir: str | Path, quantization: str | None = None, force: bool = False
) -> Path:
    """Write the ONNX graphs of `model_dir` to `output_dir`, with its tokenizer and generation config."""
    from vanilla_transformer.export_onnx import ONNX_FILES, write_onnx

    write = functools.partial(write_onnx, model_dir, quantization=quantization)
    return export_into(model_dir, output_dir, "an ONNX export", ONNX_FILES, write, force)


def export_into(
    model_dir: str | Path,
    output_dir: str | Path,
    kind: str,
    marks: tuple[str, ...],
    write: Callable[[Path], Path],
    force: bool,
) -> Path:
    """`write(folder)` an export of `model_dir` and put it at `output_dir`, replacing only an earlier export."""
    output_dir = Path(output_dir)
    if output_dir.exists() and not force:
        raise ExportError(f"{output_dir} exists: choose a new folder, or pass --force to replace it.")
    problem = replacement_problem(output_dir, [Path(model_dir)], kind, marks)
    if problem:
        raise ExportError(problem)
    # Written beside the target and renamed when complete: an interrupted export leaves no half folder behind.
    write_folder(output_dir, write)
    return output_dir


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-export", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    engines = parser.add_subparsers(dest="engine", required=True, metavar="ENGINE")
    ct2 = engines.add_parser("ctranslate2", help="A CTranslate2 model folder (translate it with vt-translate).")
    onnx = engines.add_parser(
        "onnx", help="encoder.onnx and decoder.onnx, with attention weights (vt-site, onnxruntime)."
    )
    for command in (ct2, onnx):
        command.add_argument("model_dir", help="A model folder written by training.train (or save_pretrained).")
        command.add_argument("output_dir", help="Where to write the exported model.")
        command.add_argument("--force", action="store_true", help="Replace output_dir if it is an earlier export.")
    ct2.add_argument("--quantization", choices=QUANTIZATIONS, help="Weight type (default: the model's, float32).")
    ct2.add_argument(
        "--max_positions",
        type=int,
        default=DEFAULT_MAX_POSITIONS,
        help=f"Longest source or output in tokens (default {DEFAULT_MAX_POSITIONS}).",
    )
    onnx.add_argument("--quantization", choices=("int8",), help="int8 weights (default: float32).")
    args = parser.parse_args(argv)
    with transformers_bars_off():  # the model folder is read without transformers' bar: the output is the command's
        if args.engine == "onnx":
            engine = "ONNX"
            output = export_onnx(args.model_dir, args.output_dir, args.quantization, args.force)
        else:
            engine = "CTranslate2"
            output = export_ctranslate2(
                args.model_dir, args.output_dir, args.quantization, args.max_positions, args.force
            )
    print(f"{engine} model ({args.quantization or 'float32'}): {output}")


if __name__ == "__main__":
    main()
