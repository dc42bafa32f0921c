"""Translate with a trained model folder.

python -m training.translate --model runs/multi30k_en_de "A dog runs on the grass." "Two men play football."
python -m training.translate --model runs/multi30k_en_de < source.txt > translations.txt
python -m training.translate --model runs/multi30k_en_de --input source.txt --output translations.txt

Lines are read and translated in batches as they come (memory stays bounded, output order is input order); an
empty line gives an empty line. Beam size and length default to the folder's generation_config.json.
"""

import argparse
import sys
from collections.abc import Iterable, Iterator
from contextlib import nullcontext

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import vanilla_transformer  # noqa: F401  (registers the model type, so no remote code is needed)


def batches(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line.rstrip("\r\n"))
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("texts", nargs="*", help="Sentences to translate (default: read lines from --input or stdin).")
    parser.add_argument("--model", required=True, help="A model folder written by training.train (or a Hub id).")
    parser.add_argument("--input", help="A file of sentences, one a line (default: stdin).")
    parser.add_argument("--output", help="Write translations here (default: stdout); shows a progress bar.")
    parser.add_argument("--num_beams", type=int, help="Beam size (default: the model's generation config, 4).")
    parser.add_argument("--max_new_tokens", type=int, help="Length limit (default: source length + 50, §6.1).")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, ... (default: cuda if available).")
    args = parser.parse_args(argv)

    device = resolve_device(args.device)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    generate_kwargs = {k: v for k, v in (("num_beams", args.num_beams), ("max_new_tokens", args.max_new_tokens)) if v}

    with (
        open(args.input, encoding="utf-8") if args.input else nullcontext(sys.stdin) as source,
        open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout) as sink,
    ):
        lines = args.texts or source
        with tqdm(unit=" lines", disable=args.output is None) as progress:
            for batch in batches(lines, args.batch_size):
                for translation in translate_batch(model, tokenizer, batch, **generate_kwargs):
                    sink.write(translation + "\n")
                sink.flush()
                progress.update(len(batch))


if __name__ == "__main__":
    main()
