"""Serving a trained folder: our generate() against CTranslate2 (float32 and int8), and MarianMTModel.generate() at
identical shapes; BLEU and sentences per second on a test set.

    data=../shared/data/multi30k
    python benchmarks/serving.py --model runs/multi30k_en_de \\
        --source $data/test_2016_flickr.en.gz --reference $data/test_2016_flickr.de.gz --sentences 500

Every engine translates the same sentences in the same batches (`--batch-size`, in input order) with beam 4 and
length penalty 0.6 (or the folder's generation settings), on `--threads` CPU threads (torch and CTranslate2 alike),
through `tools.translate`'s engines, so the tokenizer and the output limit (source length + 50) are the same.

MarianMTModel cannot hold this model's weights when it is pre-LN (Marian is post-LN only), so its row times a
randomly initialised MarianMTModel of the same shape (d_model, layers, heads, FFN width, vocabulary) made to produce,
for each batch, exactly as many tokens as our model produced (min_new_tokens = max_new_tokens); the row "our
generate(), same lengths" does the same with our model, so that these two rows compare equal work.
"""

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare_marian import Shape, build_models  # noqa: E402

from tools.translate import ENGINES, batches, parse_arguments, translate_batch  # noqa: E402
from training.metrics import translation_scores  # noqa: E402
from training.text_files import read_lines  # noqa: E402
from vanilla_transformer.export import export_ctranslate2  # noqa: E402


def timed(translate: Callable[[list[str]], list[str]], sources: list[str], batch_size: int) -> tuple[list[str], float]:
    """The translations of `sources`, batch by batch, and the seconds they took."""
    started = time.perf_counter()
    hypotheses = [text for batch in batches(sources, batch_size) for text in translate_batch(translate, batch)]
    return hypotheses, time.perf_counter() - started


def engine(model: str, *flags: str) -> Callable[[list[str]], list[str]]:
    """An engine of tools.translate, set up exactly as the vt-translate command line would."""
    args = parse_arguments(["--model", model, "--device", "cpu", *flags])
    return ENGINES[args.engine](args)


def same_length_generate(model, tokenizer, lengths: list[int], num_beams: int) -> Callable[[list[str]], list[str]]:
    """generate() forced to produce, for the k-th batch, lengths[k] tokens (end-of-sentence suppressed)."""
    remaining = iter(lengths)

    def translate(texts: list[str]) -> list[str]:
        length = next(remaining)
        inputs = tokenizer(texts, return_tensors="pt", padding=True)
        with torch.inference_mode():
            model.generate(**inputs, num_beams=num_beams, min_new_tokens=length, max_new_tokens=length)
        return ["" for _ in texts]

    return translate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A model folder written by training.train.")
    parser.add_argument("--source", required=True, help="Source sentences, one a line (.gz allowed).")
    parser.add_argument("--reference", required=True, help="Reference translations, line-aligned with --source.")
    parser.add_argument("--target-lang", default="de", help="For sacreBLEU's tokenizer (zh for Chinese).")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--num-beams", type=int, default=4)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sources = list(islice(read_lines(args.source), args.sentences))
    references = list(islice(read_lines(args.reference), args.sentences))
    common = ["--num_beams", str(args.num_beams)]

    rows: dict[str, tuple[float | None, float]] = {}
    ours, seconds = timed(engine(args.model, *common), sources, args.batch_size)
    rows["our generate(), fp32"] = (translation_scores(ours, references, args.target_lang)["bleu"], seconds)
    with tempfile.TemporaryDirectory() as exports:
        for quantization in ("float32", "int8"):
            folder = export_ctranslate2(args.model, Path(exports) / quantization, quantization=quantization)
            ct2 = engine(str(folder), "--engine", "ctranslate2", "--threads", str(args.threads), *common)
            hypotheses, seconds = timed(ct2, sources, args.batch_size)
            bleu = translation_scores(hypotheses, references, args.target_lang)["bleu"]
            rows[f"CTranslate2 {quantization}"] = (bleu, seconds)

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    # Tokens per batch as our model produced them: the longest translation of the batch, with its end token.
    lengths = [max(len(ids) for ids in tokenizer(batch)["input_ids"]) for batch in batches(ours, args.batch_size)]
    same_lengths = {"our generate(), same lengths": AutoModelForSeq2SeqLM.from_pretrained(args.model).eval()}
    c = same_lengths["our generate(), same lengths"].config
    shape = Shape(c.d_model, c.encoder_layers, c.encoder_attention_heads, c.encoder_ffn_dim, c.vocab_size)
    same_lengths["MarianMTModel.generate(), same lengths"] = build_models(shape, dropout=0.0)["Marian"].eval()
    for name, model in same_lengths.items():
        _, seconds = timed(same_length_generate(model, tokenizer, lengths, args.num_beams), sources, args.batch_size)
        rows[name] = (None, seconds)

    print(f"{len(sources)} sentences, batches of {args.batch_size}, beam {args.num_beams}, {args.threads} threads")
    print("\n| engine | sacreBLEU | sentences/s | vs our generate() |\n|---|---:|---:|---:|")
    base = len(sources) / rows["our generate(), fp32"][1]
    for name, (bleu, seconds) in rows.items():
        speed = len(sources) / seconds
        print(f"| {name} | {'' if bleu is None else f'{bleu:.2f}'} | {speed:.1f} | {speed / base:.2f}x |")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
