"""Translate with a trained model folder.

python -m training.translate --model runs/multi30k_en_de "A dog runs on the grass." "Two men play football."
python -m training.translate --model runs/multi30k_en_de < source.txt > translations.txt
python -m training.translate --model runs/multi30k_en_de --input source.txt --output translations.txt

Lines are read and translated in batches as they come (memory stays bounded, output order is input order); an
empty line gives an empty line, and a line ends at "\n" only (a lone "\r" inside a sentence stays in it). Beam
size and length default to the folder's generation_config.json.
"""

import argparse
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

import vanilla_transformer  # noqa: F401  (registers the model type, so no remote code is needed)

from .text_files import CorpusError, decode_lines, read_lines


class ModelFolderError(ValueError):
    """The --model argument names no loadable model; the message says what is missing."""


def batches(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def translate_batch(model, tokenizer, sentences: list[str], **generate_kwargs) -> list[str]:
    """Translations of `sentences`, in order; blank sentences give "" without running the model."""
    texts = [s for s in sentences if s.strip()]
    if not texts:
        return ["" for _ in sentences]
    inputs = tokenizer(texts, return_tensors="pt", padding=True).to(model.device)
    with torch.inference_mode():
        generated = model.generate(**inputs, **generate_kwargs)
    translations = iter(tokenizer.batch_decode(generated, skip_special_tokens=True))
    return [next(translations).strip() if s.strip() else "" for s in sentences]


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_model_folder(name: str, device: torch.device) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer of a local folder or a Hub id, or a ModelFolderError that says what is missing."""
    folder = Path(name)
    if folder.is_dir():
        for needed, what in (("config.json", "the model's configuration"), ("tokenizer.json", "its vocabulary")):
            if not (folder / needed).is_file():
                raise ModelFolderError(f"{folder} has no {needed} ({what}): it is not a model folder from training.")
    elif folder.exists():
        raise ModelFolderError(f"--model {name}: a file; give the model's folder.")
    elif folder.is_absolute() or name.startswith(".") or name.count("/") > 1:  # a path, not a Hub id (user/model)
        raise ModelFolderError(f"--model {name}: no such folder.")
    try:
        model = AutoModelForSeq2SeqLM.from_pretrained(name).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as error:
        if folder.is_dir():
            raise
        reason = str(error).strip().splitlines()[0]
        raise ModelFolderError(f"--model {name}: no such folder here, nor a model on the Hub ({reason})") from None
    return model, tokenizer


def input_lines(args: argparse.Namespace) -> Iterable[str]:
    """The sentences: the command's arguments, else the --input file, else standard input (lines end at "\n")."""
    if args.texts:
        return args.texts
    if args.input:
        return read_lines(args.input)
    if sys.stdin.isatty():
        print("Reading sentences from standard input, one a line (end with Ctrl-D)...", file=sys.stderr)
    return decode_lines(sys.stdin.buffer, "standard input")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vt-translate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("texts", nargs="*", help="Sentences to translate (default: read lines from --input or stdin).")
    parser.add_argument("--model", required=True, help="A model folder written by training.train (or a Hub id).")
    parser.add_argument("--input", help="A file of sentences, one a line (default: stdin).")
    parser.add_argument("--output", help="Write translations here (default: stdout); shows a progress bar.")
    parser.add_argument("--num_beams", type=positive_int, help="Beam size (default: the model's generation config).")
    parser.add_argument("--max_new_tokens", type=positive_int, help="Length limit (default: source length + 50).")
    parser.add_argument("--batch_size", type=positive_int, default=32)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, ... (default: cuda if available).")
    args = parser.parse_args(argv)
    if args.input and args.output and os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        parser.error(f"--output {args.output} is the --input file: writing would erase the sentences before reading.")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    try:
        model, tokenizer = load_model_folder(args.model, resolve_device(args.device))
        generate_kwargs = {
            k: v for k, v in (("num_beams", args.num_beams), ("max_new_tokens", args.max_new_tokens)) if v
        }
        lines = input_lines(args)
        with open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout) as sink:
            with tqdm(unit=" lines", disable=args.output is None) as progress:
                for batch in batches(lines, args.batch_size):
                    for translation in translate_batch(model, tokenizer, batch, **generate_kwargs):
                        sink.write(translation + "\n")
                    sink.flush()
                    progress.update(len(batch))
    except (CorpusError, ModelFolderError, OSError) as error:  # OSError: an --output that cannot be written
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    main()
