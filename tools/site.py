"""The explorer: a static page that runs trained translators in the browser (onnxruntime-web), shows their decoding
step by step (greedy and beam search), forced prefixes and teacher forcing, every attention weight, and the positional
encoding, each beside its section of the paper and its code, in English and Chinese. Nothing to install to read it.

vt-site build --model runs/multi30k_en_de --model runs/tatoeba_en_zh site
python -m http.server -d site 8000          # then open http://127.0.0.1:8000
(or push the folder as a static Hugging Face Space, or to GitHub Pages)

Building needs npm (Node.js): the page's two libraries, onnxruntime-web and @huggingface/tokenizers (transformers.js's
tokenizer), are installed from npm once, at the versions of tools/explorer/package.json, into a cache folder.
"""

import argparse
import hashlib
import html
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

from sacremoses import MosesTokenizer
from transformers import GenerationConfig

from vanilla_transformer import modeling_vanilla_transformer
from vanilla_transformer.pipeline_vanilla_transformer import LOWERCASE_TOKENIZED, primary_language
from vanilla_transformer.training import one_line_errors, replacement_problem, write_folder

EXPLORER = Path(__file__).with_name("explorer")
PAGE_FILES = ("index.html", "explorer.js", "decoding.js", "moses.js", "explorer.css")
SITE_INDEX = "site.json"
# The site's two subfolders: a --force build may replace a folder holding these and no other.
LIBRARY_FOLDER, MODELS_FOLDER = "lib", "models"
# What the page loads from each npm package: onnxruntime-web's WASM build (single-threaded works on any static
# server) and the tokenizer.
LIBRARY_FILES = {
    "onnxruntime-web/dist": ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"),
    "@huggingface/tokenizers/dist": ("tokenizers.min.mjs",),
}
# The modeling file's names that the page links to (code.html#L<line>).
CODE_NAMES = (
    "sinusoidal_positional_encoding",
    "VanillaTransformerAttention",
    "eager_attention_forward",
    "VanillaTransformerEncoder",
    "VanillaTransformerDecoder",
    "create_causal_mask",
)
EXAMPLES = {"en": "A dog runs on the grass.", "zh": "我有一只猫。"}


class SiteError(ValueError):
    """The site cannot be built: no npm, a model folder that does not export, an output folder of other files."""


def npm_libraries(cache: Path) -> Path:
    """node_modules of tools/explorer/package.json, installed once per version set into `cache`."""
    manifest = (EXPLORER / "package.json").read_bytes()
    folder = cache / hashlib.sha256(manifest).hexdigest()[:16]
    if (folder / "node_modules").is_dir():
        return folder / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise SiteError("building the site needs npm (Node.js) to fetch onnxruntime-web and the tokenizer library.")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_bytes(manifest)
    # --ignore-scripts: the page needs the packages' files only, never an install script's download.
    command = [npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix", str(folder)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        shutil.rmtree(folder / "node_modules", ignore_errors=True)
        raise SiteError(f"npm install failed in {folder}: {result.stderr.strip().splitlines()[-1:]}")
    return folder / "node_modules"


def code_page(target: Path) -> dict[str, int]:
    """code.html: the modeling file with an anchor per line; returns the line of each of CODE_NAMES."""
    source = Path(modeling_vanilla_transformer.__file__).read_text(encoding="utf-8").splitlines()
    lines = "\n".join(f'<span id="L{n}">{n:4d}  {html.escape(line)}</span>' for n, line in enumerate(source, 1))
    target.write_text(
        f'<!doctype html><meta charset="utf-8"><title>modeling_vanilla_transformer.py</title>'
        f"<style>:target {{ background: #ffe9a8; }}</style><pre>{lines}</pre>\n",
        encoding="utf-8",
    )
    found = {}
    for name in CODE_NAMES:
        pattern = re.compile(rf"^\s*(def|class) {name}\b|^from .* import .*\b{name}\b|^\s+{name},?$")
        found[name] = next((n for n, line in enumerate(source, 1) if pattern.search(line)), None)
    return {name: line for name, line in found.items() if line}


def code_point_ranges(characters: str) -> list[list[int]]:
    """The code points of `characters` as [first, last] runs: "abcx" -> [[97, 99], [120, 120]]."""
    ranges: list[list[int]] = []
    for point in sorted(set(map(ord, characters))):
        if ranges and ranges[-1][1] == point - 1:
            ranges[-1][1] = point
        else:
            ranges.append([point, point])
    return ranges


def moses_settings(lang: str) -> dict:
    """What moses.js needs to tokenize `lang` as sacremoses does: the language its rules know it by, its nonbreaking
    prefixes, and sacremoses' character classes for it (Chinese, Japanese and Korean add their own letters)."""
    moses = MosesTokenizer(lang=primary_language(lang))  # as the pipeline's lowercase_tokenizer builds it
    classes = {"alnum": moses.IsAlnum, "alpha": moses.IsAlpha, "numbers": moses.IsN, "lower": moses.IsLower}
    return {
        "lang": moses.lang,
        "nonbreaking_prefixes": moses.NONBREAKING_PREFIXES,
        "numeric_only_prefixes": moses.NUMERIC_ONLY_PREFIXES,
        **{name: code_point_ranges(characters) for name, characters in classes.items()},
    }


def model_settings(folder: Path) -> dict:
    """explorer.json: what the page needs of config.json, generation_config.json and tokenizer_config.json, and, for a
    model of lowercased, Moses-tokenized text, sacremoses' settings for each side's language."""

    def read(name: str) -> dict:
        path = folder / name
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    config, generation, tokenizer = read("config.json"), read("generation_config.json"), read("tokenizer_config.json")
    keys = ("d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads", "decoder_attention_heads")
    settings = {key: config[key] for key in keys}
    for key in ("decoder_start_token_id", "eos_token_id", "bos_token_id", "pad_token_id"):
        settings[key] = generation.get(key, config.get(key))
    # generate() stops at any of the end ids (a list in the generation configs of some transformers releases).
    ends = settings["eos_token_id"]
    settings["eos_token_ids"] = ends if isinstance(ends, list) else [ends]
    settings["eos_token_id"] = settings["eos_token_ids"][0]
    generation_keys = ("num_beams", "length_penalty", "early_stopping", "max_length_beyond_source")
    for key in (*generation_keys, "suppress_tokens", "renormalize_logits"):
        if key in generation:
            settings[key] = generation[key]
    length = modeling_vanilla_transformer.configured_output_length(GenerationConfig.from_dict(generation))
    if length is not None:  # as generate() reads it: the page's limit replaces the paper's rule
        settings["max_new_tokens"] = length
    settings["text_preprocessing"] = tokenizer.get("text_preprocessing", "none")
    # transformers 5 decodes without cleaning the spaces before punctuation unless the folder asks; tokenizers.js
    # cleans them unless told not to, so "Ein Mann , der" would read "Ein Mann, der" in the page only.
    settings["clean_up_tokenization_spaces"] = tokenizer.get("clean_up_tokenization_spaces", False)
    for side in ("source_lang", "target_lang"):
        settings[side] = tokenizer.get(side, "?")
    settings["example"] = EXAMPLES.get(primary_language(settings["source_lang"]), "")
    if settings["text_preprocessing"] == LOWERCASE_TOKENIZED:  # a missing language is English, as in the pipeline
        settings["moses"] = {side: moses_settings(tokenizer.get(f"{side}_lang", "en")) for side in ("source", "target")}
    return settings


def write_site(models: list[Path], folder: Path, libraries: Path, quantization: str | None) -> None:
    from vanilla_transformer.export_onnx import write_onnx  # needs onnx, onnxscript

    for name in PAGE_FILES:
        shutil.copy(EXPLORER / name, folder / name)
    (folder / LIBRARY_FOLDER).mkdir()
    for package, files in LIBRARY_FILES.items():
        for name in files:
            shutil.copy(libraries / package / name, folder / LIBRARY_FOLDER / name)
    entries = []
    for model in models:
        exported = write_onnx(model, folder / MODELS_FOLDER / model.name, quantization)
        settings = model_settings(exported)
        (exported / "explorer.json").write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", "utf-8")
        pair = f"{settings['source_lang']} → {settings['target_lang']}"
        entries.append({"name": model.name, "title": f"{model.name} ({pair})"})
    site = {"models": entries, "code": code_page(folder / "code.html")}
    (folder / SITE_INDEX).write_text(json.dumps(site, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def build(
    models: list[str], output: str, quantization: str | None = None, force: bool = False, cache: str | None = None
) -> Path:
    """The site folder at `output` for the model folders `models` (first one shown first)."""
    output_dir, folders = Path(output), [Path(model) for model in models]
    names = [folder.name for folder in folders]
    if len(set(names)) < len(names):
        raise SiteError(f"two model folders share a name ({', '.join(names)}): the page lists them by folder name.")
    if output_dir.exists() and not force:
        raise SiteError(f"{output_dir} exists: choose a new folder, or pass --force to replace an earlier site.")
    marks, subfolders = (SITE_INDEX, PAGE_FILES[0]), (LIBRARY_FOLDER, MODELS_FOLDER)
    problem = replacement_problem(output_dir, folders, "an explorer site", marks, subfolders=subfolders)
    if problem:
        raise SiteError(problem)
    libraries = npm_libraries(Path(cache) if cache else Path.home() / ".cache" / "vanilla-transformer" / "npm")
    write_folder(output_dir, lambda folder: (folder.mkdir(), write_site(folders, folder, libraries, quantization)))
    return output_dir


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-site", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    command = commands.add_parser("build", help="Write the explorer for one or more trained model folders.")
    command.add_argument("output", help="The site folder to write.")
    command.add_argument(
        "--model", action="append", required=True, help="A model folder from training (repeat for more)."
    )
    command.add_argument(
        "--quantization", choices=("int8",), help="int8 weights: a quarter of the bytes (default float32)."
    )
    command.add_argument("--force", action="store_true", help="Replace output if it is an earlier site.")
    command.add_argument(
        "--npm_cache", help="Where npm's packages are kept (default ~/.cache/vanilla-transformer/npm)."
    )
    args = parser.parse_args(argv)
    site = build(args.model, args.output, args.quantization, args.force, args.npm_cache)
    serve = shlex.join(["python", "-m", "http.server", "-d", str(site), "8000"])  # a folder's spaces quoted
    print(f"Explorer written to {site}: {serve}, then open http://127.0.0.1:8000")


if __name__ == "__main__":
    main()
