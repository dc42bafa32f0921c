"""What int8 costs in translation quality: a trained model's test set translated by the PyTorch model's generate()
and by its ONNX exports (float32 and int8, `vt-export onnx`) through `VanillaTransformerOnnxModel`, with the folder's
generation settings; sacreBLEU of each, the share of sentences where the export's tokens equal generate()'s, and
the seconds each took.

    data=../shared/data/multi30k
    python benchmarks/onnx_quality.py --model runs/multi30k_en_de \\
        --source $data/test_2016_flickr.en.gz --reference $data/test_2016_flickr.de.gz

Prints figures, not verdicts.
"""

import argparse
import tempfile
import time
from itertools import islice
from pathlib import Path

import sacrebleu
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from vanilla_transformer.export_onnx import export_bytes
from vanilla_transformer.onnx_model import VanillaTransformerOnnxModel
from vanilla_transformer.tools.export import export_onnx
from vanilla_transformer.training.text_files import read_lines


def translate(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, sources: list[str], batch_size: int
) -> tuple[list[list[int]], float]:
    """Token ids of each sentence (padding dropped) and the seconds it took, batches of `batch_size`."""
    started, outputs = time.perf_counter(), []
    for start in range(0, len(sources), batch_size):
        batch = tokenizer(sources[start : start + batch_size], return_tensors="pt", padding=True)
        with torch.no_grad():
            generated = model.generate(**batch)
        outputs += [[t for t in row.tolist() if t != tokenizer.pad_token_id] for row in generated]
    return outputs, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--sentences", type=int, default=None, help="the first N (default: all)")
    parser.add_argument("--batch_size", type=int, default=64)
    args = parser.parse_args()
    sources, references = [list(islice(read_lines(path), args.sentences)) for path in (args.source, args.reference)]
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    models = {"PyTorch": (AutoModelForSeq2SeqLM.from_pretrained(args.model).eval(), None)}
    with tempfile.TemporaryDirectory() as scratch:
        for quantization in (None, "int8"):
            folder = export_onnx(args.model, Path(scratch) / (quantization or "float32"), quantization)
            models[f"ONNX {quantization or 'float32'}"] = (VanillaTransformerOnnxModel.from_export(folder), folder)
        rows, reference_ids = {}, None
        for name, (model, folder) in models.items():
            ids, seconds = translate(model, tokenizer, sources, args.batch_size)
            reference_ids = reference_ids or ids
            texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
            same = sum(a == b for a, b in zip(ids, reference_ids, strict=True))
            rows[name] = {
                "sacreBLEU": sacrebleu.corpus_bleu(texts, [references]).score,
                "same tokens as generate() (%)": 100 * same / len(ids),
                "seconds": seconds,
                "bytes (MB)": export_bytes(folder) / 1e6 if folder else float("nan"),
            }
    print(f"{len(sources)} sentences of {args.source}, generation settings of {args.model}\n")
    print("| | " + " | ".join(rows) + " |\n|---|" + "---|" * len(rows))
    for metric in rows["PyTorch"]:
        print(f"| {metric} | " + " | ".join(f"{rows[name][metric]:,.2f}" for name in rows) + " |")


if __name__ == "__main__":
    main()
