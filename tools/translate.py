r"""Translate with a trained model folder.

vt-translate --model runs/multi30k_en_de "A dog runs on the grass." "Two men play football."
vt-translate --model runs/multi30k_en_de < source.txt > translations.txt
vt-translate --model runs/multi30k_en_de --input source.txt --output translations.txt
vt-translate --engine ctranslate2 --model runs/multi30k_en_de-ct2 < source.txt   # vt-export first

Lines are read and translated in batches as they come (memory stays bounded, output order is input order); an
empty line gives an empty line, and a line ends at "\n" only (a lone "\r" inside a sentence stays in it). Batches
group sentences of similar length, from --sort_batches batches of lines at a time (a terminal gets each batch
translated as it is typed; a pipe fed line by line, with --batch_size 1 --sort_batches 1, and --threads 1 for
CTranslate2, whose workers each take a batch read ahead). Beam size and length default to the folder's
generation_config.json.
"""

import argparse
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from pathlib import Path

import torch
from safetensors import SafetensorError
from tqdm.auto import tqdm
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from vanilla_transformer import TranslationPipeline  # importing registers the model type: no remote code
from vanilla_transformer.extras import MissingExtra
from vanilla_transformer.folder_checks import check_config_file, check_tokenizer_file, is_hub_id
from vanilla_transformer.input_checks import check_tokenizer
from vanilla_transformer.modeling_vanilla_transformer import configured_output_length
from vanilla_transformer.pipeline_vanilla_transformer import reads_nothing, text_preparation
from vanilla_transformer.training import (
    CorpusError,
    decode_lines,
    existing_file,
    first_line,
    loading_bars_for,
    one_line_errors,
    read_lines,
    reuse_freed_memory,
    use_mkl_intel_kernels,
)


class ModelFolderError(ValueError):
    """The --model argument names no loadable model; the message says what is missing."""


class DeviceError(ValueError):
    """The --device argument names no device that this machine (or the engine) has."""


# Batches of lines read at a time: each engine translates them shortest first, so that a batch holds sentences of like
# length and no row waits long for the batch's longest translation.
SORT_BATCHES = 16
Translator = Callable[[list[str]], list[str]]  # lines -> their translations, in order; a blank line gives ""


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    """`size` lines at a time. When reading fails, the lines read before it come first, then the error."""
    chunk: list[str] = []
    try:
        for line in lines:
            chunk.append(line)
            if len(chunk) == size:
                yield chunk
                chunk = []
    except Exception:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


def generate_translator(args: argparse.Namespace) -> Translator:
    """The model folder through the package's translation pipeline (its generate(): beam size, length penalty and
    output limit from the folder's generation config unless given here), which orders each list by length."""
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_model_folder(args.model, resolve_device(args.device))
    translator = TranslationPipeline(model=model, tokenizer=tokenizer, device=model.device, batch_size=args.batch_size)
    options = {
        "num_beams": args.num_beams,
        "max_new_tokens": args.max_new_tokens,
        "length_penalty": args.length_penalty,
    }
    generate_kwargs = {name: value for name, value in options.items() if value is not None}
    return lambda lines: [result["translation_text"] for result in translator(lines, **generate_kwargs)]


def ctranslate2_translator(args: argparse.Namespace) -> Translator:
    """A folder written by `vt-export ctranslate2`: the same tokenizer and decoding settings as generate(), run by
    CTranslate2 (which takes and returns tokens; the limit is the config's length, else the batch's longest source
    + max_length_beyond_source, as generate() counts it). On a CPU, --threads workers of one thread each translate
    a batch each."""
    try:
        import ctranslate2
    except ImportError:
        raise MissingExtra("--engine ctranslate2 needs CTranslate2", "serve") from None
    from vanilla_transformer.export import check_exported_vocabulary

    folder = Path(args.model)
    for needed in ("model.bin", "config.json"):
        if not (folder / needed).is_file():
            raise ModelFolderError(f"{folder} has no {needed}: export the model (again) with vt-export ctranslate2.")
    check_tokenizer_file(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    check_exported_vocabulary(folder, tokenizer)
    generation = GenerationConfig.from_pretrained(folder) if (folder / "generation_config.json").is_file() else None
    device = ctranslate2_device(args.device, ctranslate2.get_cuda_device_count())
    if device.type == "cpu":
        # Batches side by side, one thread each: two threads sharing one batch kept each other waiting.
        threads = {"inter_threads": args.threads or available_cores(), "intra_threads": 1}
    else:
        threads = {"intra_threads": args.threads or 0}
    try:
        translator = ctranslate2.Translator(str(folder), device=device.type, device_index=device.index or 0, **threads)
    except RuntimeError as error:  # "Variable 'decoder/embeddings/weight' has an invalid payload size", ...
        raise ModelFolderError(f"{folder / 'model.bin'} cannot be read ({error}): export the model again.") from None
    # The positions the export encodes (vt-export --max_positions, recorded as the tokenizer's model_max_length;
    # transformers' huge default in folders exported before it was recorded).
    positions = tokenizer.model_max_length
    beams = first_set(args.num_beams, getattr(generation, "num_beams", None), 1)
    length_penalty = first_set(args.length_penalty, getattr(generation, "length_penalty", None), 1.0)
    beyond = first_set(getattr(generation, "max_length_beyond_source", None), 50)
    configured = configured_output_length(generation) if generation is not None else None  # as generate() reads it
    # generate() lets a hypothesis end at its first step (min_new_tokens 0, transformers' default) and beam search
    # counts such an empty one among its finished hypotheses; CTranslate2 by default does not (min_decoding_length
    # 1), which changed 3 of Multi30K's 2,000 test translations (test 2016 and 2017, beam 4) until set alike here.
    min_length = first_set(getattr(generation, "min_new_tokens", None), 0)
    # Tokens the model never writes (a model trained with --target_vocabulary_softmax: those of the source language).
    suppressed = getattr(generation, "suppress_tokens", None) or []
    suppress = [[token] for token in tokenizer.convert_ids_to_tokens(suppressed)] or None
    prepare = text_preparation(tokenizer)  # as the generate() engine's pipeline does

    def translate(lines: list[str]) -> list[str]:
        every_ids = tokenizer([prepare(line) for line in lines])["input_ids"]
        kept = [row for row, ids in enumerate(every_ids) if not reads_nothing(tokenizer, ids)]  # the others give ""
        translations = [""] * len(lines)
        if not kept:
            return translations
        ids = [every_ids[row] for row in kept]
        longest = max(range(len(ids)), key=lambda row: len(ids[row]))
        if len(ids[longest]) > positions:
            sentence = lines[kept[longest]]
            sentence = sentence if len(sentence) <= 40 else sentence[:40] + "..."
            raise CorpusError(
                f"A sentence of {len(ids[longest])} tokens ({sentence!r}) is longer than the {positions} positions "
                f"that {folder} encodes: export the model again with a larger --max_positions."
            )
        # CTranslate2 sorts the sentences by length, cuts them into batches and gives those to its workers.
        # The output too has only `positions` positions, the first of them the start token's.
        limit = min(first_set(args.max_new_tokens, configured, len(ids[longest]) + beyond), positions - 1)
        results = translator.translate_batch(
            [tokenizer.convert_ids_to_tokens(row) for row in ids],
            max_batch_size=args.batch_size,
            beam_size=beams,
            length_penalty=length_penalty,
            min_decoding_length=min_length,
            max_decoding_length=limit,
            suppress_sequences=suppress,
        )
        hypotheses = [tokenizer.convert_tokens_to_ids(result.hypotheses[0]) for result in results]
        cut = sum(len(hypothesis) >= positions - 1 for hypothesis in hypotheses)
        if cut:
            print(
                f"warning: {cut} translation(s) cut at the {positions} positions that {folder} encodes: export the "
                "model again with a larger --max_positions.",
                file=sys.stderr,
            )
        for row, text in zip(kept, tokenizer.batch_decode(hypotheses, skip_special_tokens=True), strict=True):
            translations[row] = text.strip()
        return translations

    return translate


def available_cores() -> int:
    """The CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def first_set(*values: object) -> object:
    """The first value that is not None (an explicit 0 or 0.0 counts as set)."""
    return next(value for value in values if value is not None)


ENGINES = {"generate": generate_translator, "ctranslate2": ctranslate2_translator}


def named_device(name: str) -> torch.device:
    try:
        return torch.device(name)
    except RuntimeError:
        raise DeviceError(f"--device {name}: not a device name (cpu, cuda, cuda:1, mps, ...).") from None


def resolve_device(name: str) -> torch.device:
    """The torch device that --device names ("auto": a CUDA GPU where torch sees one, else the CPU), checked to
    exist here."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = named_device(name)
    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError) as error:  # torch says AssertionError where it was built without CUDA
        raise DeviceError(f"--device {name}: torch {torch.__version__} has no such device here ({error}).") from None
    return device


def ctranslate2_device(name: str, cuda_devices: int) -> torch.device:
    """The device that --device names for CTranslate2, which runs on the CPU or on CUDA GPUs that it counts itself
    ("auto": its first GPU where it has one; its CUDA build may see a GPU that a CPU build of torch does not)."""
    if name == "auto":
        return torch.device("cuda" if cuda_devices else "cpu")
    device = named_device(name)
    if device.type not in ("cpu", "cuda"):
        raise DeviceError(f"--device {name}: CTranslate2 runs on cpu or cuda.")
    if device.type == "cpu" and device.index:
        raise DeviceError(f"--device {name}: CTranslate2 has one CPU device, cpu (--threads sets how many cores).")
    if device.type == "cuda" and (device.index or 0) >= cuda_devices:
        raise DeviceError(f"--device {name}: CTranslate2 sees {cuda_devices} CUDA GPUs here.")
    return device


def load_model_folder(name: str, device: torch.device) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The model and tokenizer of a local folder or a Hub id, or a ValueError that says what is missing or wrong."""
    folder = Path(name)
    if folder.is_dir():
        if (folder / "model.bin").is_file():
            raise ModelFolderError(
                f"{folder} is a CTranslate2 model (from vt-export): vt-translate serves it with --engine ctranslate2; "
                "here give the folder that training wrote."
            )
        check_config_file(folder)
        check_tokenizer_file(folder)
    elif folder.exists():
        raise ModelFolderError(f"--model {name}: a file; give the model's folder.")
    elif not is_hub_id(name):
        raise ModelFolderError(f"--model {name}: no such folder.")
    try:
        with loading_bars_for(name):
            model = AutoModelForSeq2SeqLM.from_pretrained(name).to(device).eval()
        tokenizer = AutoTokenizer.from_pretrained(name)
    except SafetensorError:  # an interrupted copy or download; safetensors' own wording changes between releases
        damaged = "its weights file cannot be read, cut short or damaged: copy or download it again"
        raise ModelFolderError(f"{name} cannot be loaded: {damaged}") from None
    except (OSError, ValueError) as error:
        reason = first_line(error)
        if folder.is_dir():
            raise ModelFolderError(f"{name} cannot be loaded: {reason}") from None
        raise ModelFolderError(f"--model {name}: no such folder here, nor a model on the Hub ({reason})") from None
    check_tokenizer(model.config, tokenizer, name)
    return model, tokenizer


def input_lines(args: argparse.Namespace) -> Iterable[str]:
    """The sentences: the command's arguments, else the --input file, else standard input (lines end at "\n")."""
    if args.texts:
        return args.texts
    if args.input:
        return read_lines(args.input)
    if reads_a_terminal(args):
        print("Reading sentences from standard input, one a line (end with Ctrl-D)...", file=sys.stderr)
    return decode_lines(sys.stdin.buffer, "standard input")


def reads_a_terminal(args: argparse.Namespace) -> bool:
    return not args.texts and not args.input and sys.stdin.isatty()


def int_at_least(text: str, least: int) -> int:
    value = int(text)
    if value < least:
        raise argparse.ArgumentTypeError(f"{value}: must be at least {least}")
    return value


def positive_int(text: str) -> int:
    return int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    return int_at_least(text, 0)


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text}: must be a finite number")
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
    parser.add_argument("--length_penalty", type=finite_float, help="Beam length penalty (default: the model's, 0.6).")
    parser.add_argument("--batch_size", type=positive_int, default=32)
    parser.add_argument(
        "--sort_batches",
        type=positive_int,
        default=SORT_BATCHES,
        help="Read this many batches of lines at a time and batch sentences of similar length together (1: input "
        "order; output is in input order either way; 1 when reading a terminal).",
    )
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, ... (default: cuda if available).")
    parser.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="generate",
        help="generate: the model folder with transformers; ctranslate2: a folder written by vt-export ctranslate2.",
    )
    parser.add_argument(
        "--threads",
        type=positive_int,
        help="CPU threads (default: torch's; ctranslate2: one a batch, as many batches at once as there are cores).",
    )
    parser.add_argument(
        "--mkl_intel_kernels",
        choices=("true", "false"),
        default="true",
        help="On an AMD CPU with AVX2, have MKL (torch's float32 matrix products) run the kernels it keeps for Intel's "
        "CPUs, as vt-train does (training.mkl_kernels); false: MKL's own choice. Other CPUs are left as they are.",
    )
    args = parser.parse_args(argv)
    if args.input:
        existing_file(args.input)  # now, not after the model's seconds of loading
    if args.input and args.output and os.path.exists(args.output) and os.path.samefile(args.input, args.output):
        parser.error(f"--output {args.output} is the --input file: writing would erase the sentences before reading.")
    return args


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    # Every decoding step allocates and frees tensors of the vocabulary's size: kept for the next step instead of
    # mapped and zeroed anew by the kernel (training.allocator).
    reuse_freed_memory()
    if args.mkl_intel_kernels == "true":
        use_mkl_intel_kernels()  # before the first matrix product, where MKL makes its choice
    translate = ENGINES[args.engine](args)
    # Someone typing sentences wants each one translated before typing the next: no reading ahead then.
    size = 1 if reads_a_terminal(args) else args.batch_size * args.sort_batches
    with open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout) as sink:
        with tqdm(unit=" lines", disable=args.output is None) as progress:
            for lines in chunks(input_lines(args), size):
                sink.writelines(translation + "\n" for translation in translate(lines))
                sink.flush()
                progress.update(len(lines))


if __name__ == "__main__":
    main()
