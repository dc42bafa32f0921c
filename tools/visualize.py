r"""The pictures of `vanilla_transformer.visualization` from the command line (needs `pip install .[viz]`).

vt-visualize attention --model runs/multi30k_en_de --source "Two dogs play in the snow." \
    --kind cross --output cross_attention.png             # without --target: the model's own translation
vt-visualize positional-encoding --output pe.png
vt-visualize pe-curves --output pe_curves.png
vt-visualize pe-distance --output pe_distance.png
vt-visualize parameters                   # the markdown parameter table of the README
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from vanilla_transformer.pipeline_vanilla_transformer import text_preparation
from vanilla_transformer.training import one_line_errors
from vanilla_transformer.visualization import (
    ATTENTION_KINDS,
    attention_maps,
    parameter_table,
    plot_attention,
    plot_positional_curves,
    plot_positional_distance,
    plot_positional_encoding,
    pyplot,
)

from .translate import load_model_folder, positive_int

if TYPE_CHECKING:  # matplotlib is the viz extra's
    from matplotlib.figure import Figure


def attention_figure(args: argparse.Namespace) -> Figure:
    model, tokenizer = load_model_folder(args.model, torch.device("cpu"))
    target = text_preparation(tokenizer, "target")(args.target) if args.target else None  # as the model writes
    maps = attention_maps(model, tokenizer, args.source, target)
    print(f"source: {' '.join(maps.source_tokens)}\ntarget: {' '.join(maps.target_tokens)}")
    return plot_attention(maps, args.kind, args.layers)


FIGURES = {
    "attention": attention_figure,
    "positional-encoding": lambda args: plot_positional_encoding(args.d_model, args.length),
    "pe-curves": lambda args: plot_positional_curves(args.d_model, args.length),
    "pe-distance": lambda args: plot_positional_distance(args.d_model, args.length),
}


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    attention = commands.add_parser("attention", help="Heatmaps of one kind of attention, per layer and head.")
    attention.add_argument("--model", required=True, help="A model folder written by training.train.")
    attention.add_argument("--source", required=True, help="The source sentence.")
    attention.add_argument("--target", help="The target sentence (default: the model's own translation).")
    attention.add_argument("--kind", choices=sorted(ATTENTION_KINDS), default="cross")
    attention.add_argument("--layers", type=int, nargs="+", help="Layers to show, from 0 (default: all).")
    for name, help_text in (
        ("positional-encoding", "The PE matrix as a heatmap (positions x dimensions)."),
        ("pe-curves", "PE against position for a few dimensions."),
        ("pe-distance", "PE(pos) . PE(pos + k) against k for several pos."),
    ):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("--d_model", type=positive_int, default=128)
        command.add_argument("--length", type=positive_int, default=100, help="Positions (or distances) to show.")
    for command in commands.choices.values():
        command.add_argument("--output", required=True, help="The PNG file to write.")
    parameters = commands.add_parser("parameters", help="Print the parameter table (markdown) of base and big.")
    parameters.add_argument("--vocab_size", type=int, default=37000)
    return parser.parse_args(argv)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    if args.command == "parameters":
        print(parameter_table(args.vocab_size))
        return
    pyplot()  # without matplotlib, the extra is named before a model is loaded and run
    figure = FIGURES[args.command](args)  # ValueError: a layer the model does not have, say
    # The file named, as named: matplotlib adds ".png" to a name without a suffix.
    figure.savefig(args.output, dpi=120, format=Path(args.output).suffix[1:] or "png")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
