"""Parallel corpora through `datasets`: a Hub dataset, line-aligned text files, or files of pairs (training.tables'
TSV, CSV, JSON, Parquet and .xlsx; translation tools' TMX, XLIFF and .po).

Every source becomes a `DatasetDict` with two string columns, "source" and "target", and a "train" split, a
"validation" split and one or more test splits. When the source has no validation or test split, they are cut
from the training data with `Dataset.train_test_split` and the run's seed: the same seed gives the same split, and
the training pairs whose source sentence is also held out are dropped.

Bad data raises `CorpusError` naming the file and line; empty pairs are dropped with a count in the log.
"""

import contextlib
import importlib.util
import itertools
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from datasets import Dataset, DatasetDict, concatenate_datasets, load_dataset, load_from_disk
from datasets import config as datasets_config
from datasets.exceptions import DatasetGenerationError
from transformers import PreTrainedTokenizerFast

from vanilla_transformer.extras import MissingExtra
from vanilla_transformer.pipeline_vanilla_transformer import LOWERCASE_TOKENIZED, lowercase_tokenizer

from .cached_pairs import TEXT_COLUMNS, pairs_dataset
from .console import first_line
from .gettext_files import po_pairs
from .languages import SCRIPTS, codes_naming, script_of
from .tables import csv_pairs, is_tsv, jsonl_pairs, read_excel, read_parquet, read_tsv, table_pairs
from .text_files import CorpusError, existing_file, read_lines
from .tmx import tmx_pairs
from .xliff import xliff_pairs

logger = logging.getLogger(__name__)


PREPROCESSING = ("none", LOWERCASE_TOKENIZED)
# The share of one side's training sentences holding a character without a token from which a fine-tune is refused: a
# vocabulary learned from the corpus leaves far fewer (the rare characters that character_coverage drops), one learned
# from other languages most of them (docs/training.md, Fine-tuning).
UNCOVERED_SHARE = 0.1
FILE_KINDS = ".tsv (or tab-separated .txt), .csv, .jsonl, .json, .parquet, .xlsx, .tmx, .xlf (XLIFF) or .po"
XLIFF_SUFFIXES = {".xlf", ".xliff", ".sdlxliff", ".mqxliff"}  # the standard's, Trados's and memoQ's


@dataclass
class DataArguments:
    _argument_group_name: ClassVar[str] = "data (one of --data_dir, --dataset_name, --train_file)"

    source_lang: str = field(default="en", metadata={"help": "Source language code, e.g. en."})
    target_lang: str = field(default="de", metadata={"help": "Target language code, e.g. de."})
    dataset_name: str | None = field(
        default=None,
        metadata={
            "help": "A Hub dataset, e.g. wmt14 or bentrevett/multi30k, or a local folder of one (as load_dataset reads "
            "it, or as save_to_disk wrote it)."
        },
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its configuration, e.g. de-en."})
    data_dir: str | None = field(
        default=None, metadata={"help": "A folder of line-aligned files PREFIX.LANG or PREFIX.LANG.gz."}
    )
    train_prefix: str = field(default="train", metadata={"help": "With --data_dir: the training files' prefix."})
    validation_prefix: str | None = field(default="val", metadata={"help": "With --data_dir: validation prefix."})
    test_prefixes: list[str] = field(default_factory=list, metadata={"help": "With --data_dir: test prefixes."})
    train_file: list[str] = field(
        default_factory=list,
        metadata={"help": f"A {FILE_KINDS} training file, or several (of any of these kinds), joined in order."},
    )
    validation_file: str | None = field(default=None, metadata={"help": f"A {FILE_KINDS} validation file."})
    test_files: list[str] = field(default_factory=list, metadata={"help": f"{FILE_KINDS} test files."})
    tsv_languages: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Language of each TSV column, e.g. en zh (further columns are ignored); a first line that names "
            "both languages is a header row, which names them instead."
        },
    )
    split_validation_size: int = field(
        default=1000, metadata={"help": "Pairs held out from train for validation when the source has none."}
    )
    split_test_size: int = field(
        default=1000,
        metadata={"help": "Pairs held out from train for testing when the source has no test split (0: none)."},
    )
    max_source_length: int = field(default=256, metadata={"help": "Longer training pairs (in tokens) are dropped."})
    max_target_length: int = field(default=256, metadata={"help": "Longer training pairs (in tokens) are dropped."})
    preprocess: str = field(
        default="none",
        metadata={
            "help": "none (the text as it is: the model reads and writes cased, untokenized text), or "
            "lowercase_tokenized: every split lowercased and Moses-tokenized before the vocabulary is learned, the "
            "preprocessing of the Multi30K literature (Wu et al., 2021); the model then writes lowercased, "
            "tokenized text and BLEU is on that text (the tokenizer records it: the pipeline and vt-translate prepare "
            "a natural sentence the same way).",
            "choices": PREPROCESSING,
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training pairs."})
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "Use only the first N pairs of each eval set."}
    )

    def __post_init__(self) -> None:
        # One training file as a string (a config's `train_file: pairs.tsv`, an earlier run's report) is a list of one.
        self.train_file = [self.train_file] if isinstance(self.train_file, str) else list(self.train_file or [])

    @property
    def data_source(self) -> str:
        """Where the pairs come from, as the flags name it: the dataset, the folder, or the training files."""
        return self.dataset_name or self.data_dir or " ".join(self.train_file)


# Readers: one per kind of source, each returning a Dataset with "source" and "target" columns ------------------------
# Tables (TSV, CSV, JSON, Parquet, .xlsx) are training.tables'; translation tools' files training.tmx's, .xliff's and
# .gettext_files'; every reader's pairs become a cached Dataset in training.cached_pairs.


def read_text_pair(prefix: Path, source_lang: str, target_lang: str) -> Dataset:
    """PREFIX.SRC and PREFIX.TGT (or .gz), one sentence a line, aligned by line number."""
    return pairs_dataset(aligned_lines, tuple(language_file(prefix, lang) for lang in (source_lang, target_lang)))


def aligned_lines(files: tuple[Path, Path]) -> Iterator[dict]:
    source_file, target_file = files
    sources, targets = read_lines(source_file), read_lines(target_file)
    count = 0
    for count, (source, target) in enumerate(itertools.zip_longest(sources, targets), start=1):
        if source is None or target is None:
            short, long = (source_file, target_file) if source is None else (target_file, source_file)
            rest = targets if source is None else sources
            total = count + sum(1 for _ in rest)
            raise CorpusError(
                f"{long} has {total} lines but {short} has {count - 1}: the files must be line-aligned "
                f"(line {count} of {long} has no counterpart)."
            )
        yield {"source": source, "target": target}
    if count == 0:
        raise CorpusError(f"{source_file} and {target_file} are empty.")


def language_file(prefix: Path, lang: str) -> Path:
    """The file of `lang` at `prefix` (`prefix.lang`, or gzip-compressed `prefix.lang.gz`)."""
    for candidate in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if candidate.exists():
            return candidate
    found = sorted(
        {p.name.removeprefix(prefix.name + ".").removesuffix(".gz") for p in prefix.parent.glob(prefix.name + ".*")}
    )
    raise CorpusError(
        f"No file {prefix}.{lang} or {prefix}.{lang}.gz for language code {lang!r} "
        f"(languages found for {prefix}: {', '.join(found) or 'none'})."
    )


def tsv_columns(args: DataArguments) -> list[str]:
    """The language of each TSV column: --tsv_languages, else the source's, then the target's."""
    return args.tsv_languages or [args.source_lang, args.target_lang]


def read_file(path: str, args: DataArguments) -> Dataset:
    file, languages = existing_file(path), (args.source_lang, args.target_lang)
    suffixes = file.suffixes
    if is_tsv(path):
        return read_tsv(file, tsv_columns(args), languages)
    if ".tmx" in suffixes:
        return read_pairs(tmx_pairs, file, languages)
    if XLIFF_SUFFIXES & set(suffixes):
        return read_pairs(xliff_pairs, file, languages)
    if path.removesuffix(".gz").endswith(".po"):
        if importlib.util.find_spec("polib") is None:
            raise MissingExtra(f"{path}: reading a gettext catalogue needs polib", "po")
        return read_pairs(po_pairs, file, languages)
    if ".jsonl" in suffixes or ".json" in suffixes:
        return read_pairs(jsonl_pairs, file, languages)
    if ".csv" in suffixes:
        return read_pairs(csv_pairs, file, languages)
    if ".parquet" in suffixes:
        return read_parquet(file, languages)
    if ".xlsx" in suffixes:
        return read_excel(file, languages)
    if {".xls", ".ods", ".numbers"} & set(suffixes):
        raise CorpusError(f"{path}: a spreadsheet format other than .xlsx; save it as .xlsx (or .csv).")
    check_not_one_side(file, args)
    raise CorpusError(f"{path}: unknown file type; use {FILE_KINDS} (or --data_dir for line-aligned text files).")


def read_pairs(pairs: Callable[..., Iterator[dict]], path: Path, languages: tuple[str, str]) -> Dataset:
    """A file of pairs read by its kind's reader (`pairs`: training.tables' csv_pairs or jsonl_pairs, training.tmx's,
    .xliff's or .gettext_files' reader) into the two languages' "source"/"target" pairs."""
    return pairs_dataset(pairs, (path,), languages=languages)


def check_not_one_side(path: Path, args: DataArguments) -> None:
    """A file named for one of the two languages (train.en, corpus.de.gz) is one side of line-aligned files, which
    --data_dir reads by their prefix: its error names the flags that read both."""
    prefix = path.with_name(path.name.removesuffix(".gz"))
    if any(codes_naming([prefix.suffix[1:]], lang) for lang in (args.source_lang, args.target_lang)):
        raise CorpusError(
            f"{path}: one side of line-aligned files ({prefix.stem}.{args.source_lang} and {prefix.stem}."
            f"{args.target_lang}); read both with --data_dir {prefix.parent} --train_prefix {prefix.stem} (or "
            "--validation_prefix, --test_prefixes)."
        )


def read_hub_dataset(args: DataArguments) -> DatasetDict:
    """A Hub dataset (or a local folder or script that `load_dataset` reads, or a folder that `save_to_disk` wrote) of
    translation pairs."""
    saved = saved_to_disk(args.dataset_name)
    if saved and args.dataset_config_name:
        raise CorpusError(
            f"--dataset_name {args.dataset_name}: a folder that save_to_disk wrote has no configurations; leave out "
            f"--dataset_config_name {args.dataset_config_name}."
        )
    try:
        with held_failures() as failures:
            raw = (
                load_saved_dataset(args.dataset_name)
                if saved
                else load_dataset(args.dataset_name, args.dataset_config_name)
            )
    except (OSError, ValueError) as error:  # not on the Hub, unreachable (offline), or no such configuration
        raise CorpusError(f"--dataset_name {args.dataset_name}: cannot be loaded ({first_line(error)})") from None
    except DatasetGenerationError as error:  # its files disagree, as splits whose columns differ
        lines = str(error.__cause__ or error).splitlines()
        found = " ... ".join(dict.fromkeys([lines[0], lines[-1]])) if lines else type(error).__name__
        failed = re.match(r"Failed to [^']*'([^']+)'", failures[0]) if failures else None
        found = f"{failed[1]}: {found}" if failed else found
        raise CorpusError(f"--dataset_name {args.dataset_name}: cannot be read ({found})") from None
    roles = split_roles(list(raw))
    if "train" not in roles.values():
        raise CorpusError(f"--dataset_name {args.dataset_name}: no training split (its splits: {', '.join(raw)}).")
    pairs = DatasetDict()
    for split, dataset in raw.items():
        if roles[split] != split:
            logger.info("--dataset_name %s: split %r is the %s split", args.dataset_name, split, roles[split])
        where = f"--dataset_name {args.dataset_name}, split {split}"
        pairs[roles[split]] = table_pairs(dataset, (args.source_lang, args.target_lang), where)
    return pairs


@contextlib.contextmanager
def held_failures() -> Iterator[list[str]]:
    """The messages that datasets' file readers (parquet, json, csv, ...) log as an error before they raise, held in
    the list given instead of printed: a dozen lines that the one-line error above says again, naming the file."""
    held = []

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and record.getMessage().startswith("Failed to"):
            held.append(record.getMessage())
            return False
        return True

    names = [name for name in logging.root.manager.loggerDict if name.startswith("datasets.packaged_modules.")]
    readers = [logging.getLogger(name) for name in names]
    for reader in readers:
        reader.addFilter(hold)
    try:
        yield held
    finally:
        for reader in readers:
            reader.removeFilter(hold)


# The names that datasets' own file patterns read as a training or a validation split (datasets.data_files).
SPLIT_NAMES = {"train": ("train", "training"), "validation": ("validation", "valid", "dev", "val")}


def split_roles(splits: list[str]) -> dict[str, str]:
    """Each split's name in the corpus: the first one named as a training (validation) split is "train"
    ("validation"); the rest keep their names and are test splits."""
    roles = {}
    for role, names in SPLIT_NAMES.items():
        found = next((name for name in names if name in splits), None)
        if found:
            roles[found] = role
    return {split: roles.get(split, split) for split in splits}


def saved_to_disk(name: str) -> bool:
    """Whether `name` is a folder that `Dataset.save_to_disk` or `DatasetDict.save_to_disk` wrote, which
    `load_dataset` refuses (a Dataset's) or copies into its cache (a DatasetDict's)."""
    folder = Path(name)
    return (folder / datasets_config.DATASET_STATE_JSON_FILENAME).is_file() or (
        folder / datasets_config.DATASETDICT_JSON_FILENAME
    ).is_file()


def load_saved_dataset(folder: str) -> DatasetDict:
    """A `save_to_disk` folder's splits, read in place; a single Dataset's is the training split (validation and test
    are then held out of it)."""
    saved = load_from_disk(folder)
    return saved if isinstance(saved, DatasetDict) else DatasetDict(train=saved)


# What the data's columns hold: languages named the other way round, or a column of row numbers, train garbage ---
# Only languages written in scripts of their own can be told apart (zh from en, never de from en).

COLUMN_SAMPLE = 1000  # pairs read to check what the columns hold


def share_in_script(texts: list[str], script: str) -> float:
    """The share of the letters in `texts` that belong to `script` (0 where there are none)."""
    letters = [character for text in texts for character in text if character.isalpha()]
    names = SCRIPTS[script][0]
    inside = sum(unicodedata.name(letter, "").split(" ")[0] in names for letter in letters)
    return inside / len(letters) if letters else 0.0


def first_texts(dataset: Dataset) -> dict[str, list[str]]:
    """The first COLUMN_SAMPLE pairs' texts, by side: what the checks below read, once for both."""
    sample = dataset.select(range(min(COLUMN_SAMPLE, dataset.num_rows)))
    return {side: column_values(sample, side) for side in TEXT_COLUMNS}


def check_language_order(texts: dict[str, list[str]], origin: str, args: DataArguments) -> None:
    """Refuse a split (`origin`: its file, files or dataset) whose source text is in the target language's script and
    whose target text is in the source language's: its languages are named the other way round (for a TSV, the usual
    cause is --tsv_languages left out)."""
    scripts = script_of(args.source_lang), script_of(args.target_lang)
    if None in scripts or SCRIPTS[scripts[0]][0] & SCRIPTS[scripts[1]][0]:  # no script, or a shared one
        return
    source, target = texts["source"], texts["target"]
    # Each side mostly in the other's script (and so, the scripts being disjoint, mostly not in its own).
    if share_in_script(source, scripts[1]) > 0.5 and share_in_script(target, scripts[0]) > 0.5:
        found = (
            f"{origin}: the text read as --source_lang {args.source_lang} is in {scripts[1]} and the text read as "
            f"--target_lang {args.target_lang} in {scripts[0]}: the languages are the other way round"
        )
        if is_tsv(origin):
            swap = {args.source_lang: args.target_lang, args.target_lang: args.source_lang}
            raise CorpusError(
                f"{found}. Name each column's language in order: --tsv_languages "
                f"{' '.join(swap.get(lang, lang) for lang in tsv_columns(args))}."
            )
        raise CorpusError(f"{found} (the data names each text's language: check which it names).")


def check_sides_hold_words(texts: dict[str, list[str]], origin: str, args: DataArguments) -> None:
    """Refuse a split where most texts of one side hold no letter: a column of row numbers or ids read as a language,
    as a table's index is where pandas writes it beside the sentences."""
    for side, lang in (("source", args.source_lang), ("target", args.target_lang)):
        written = [text for text in texts[side] if text.strip()]
        bare = [text for text in written if not any(character.isalpha() for character in text)]
        if len(bare) > len(written) / 2:
            found = f"{origin}: {len(bare)} of the first {len(written)} texts read as --{side}_lang {lang} hold no "
            found += f"letter ({', '.join(map(repr, bare[:3]))}): a column of row numbers or ids?"
            if is_tsv(origin):
                columns = " ".join(["id", *tsv_columns(args)])
                raise CorpusError(
                    f"{found} Name every column in order, that one too (row numbers first: --tsv_languages {columns})."
                )
            raise CorpusError(f"{found} Check which column the data names {lang!r}.")


# The corpus ----------------------------------------------------------------------------------------------------------


def load_parallel_corpus(args: DataArguments, seed: int) -> DatasetDict:
    """Train, validation and test splits of "source"/"target" pairs, from the one source the arguments name."""
    check_data_arguments(args)
    # Each split's parts, each with where it came from: several training files are checked one by one.
    if args.dataset_name:
        parts = {split: [(f"{args.dataset_name}, split {split}", d)] for split, d in read_hub_dataset(args).items()}
    elif args.data_dir:
        root, languages = Path(args.data_dir), f"{{{args.source_lang},{args.target_lang}}}"
        parts = {
            split: [(f"{root / prefix}.{languages}", read_text_pair(root / prefix, args.source_lang, args.target_lang))]
            for split, prefix in prefix_splits(args).items()
        }
    else:
        parts = {split: [(path, read_file(path, args)) for path in paths] for split, paths in file_splits(args).items()}
    for origin, dataset in itertools.chain.from_iterable(parts.values()):
        texts = first_texts(dataset)
        check_language_order(texts, origin, args)
        check_sides_hold_words(texts, origin, args)
    corpus = DatasetDict({split: concatenate_datasets([d for _, d in pairs]) for split, pairs in parts.items()})
    corpus["train"] = drop_empty_pairs(corpus["train"], "train")
    corpus = held_out_splits(corpus, args, seed)
    corpus = preprocessed(corpus, args)
    if corpus["train"].num_rows == 0:
        raise CorpusError(f"The training set is empty ({args.data_source}).")
    if args.max_train_samples is not None:
        corpus["train"] = corpus["train"].select(range(min(args.max_train_samples, corpus["train"].num_rows)))
    if args.max_eval_samples is not None:
        for split in testing_splits(corpus) + ["validation"]:
            corpus[split] = corpus[split].select(range(min(args.max_eval_samples, corpus[split].num_rows)))
    logger.info("Corpus: %s", {split: dataset.num_rows for split, dataset in corpus.items()})
    return corpus


DATA_SOURCES = ("dataset_name", "data_dir", "train_file")


def check_data_arguments(args: DataArguments) -> None:
    """Exactly one source of data, two languages, and sizes that can hold a sentence: before any file is read."""
    given = [
        f"--{name} {value if isinstance(value, str) else ' '.join(value)}"
        for name in DATA_SOURCES
        if (value := getattr(args, name))
    ]
    if len(given) != 1:
        found = f"got {' and '.join(given)}" if given else "got none"
        raise CorpusError(f"Pass exactly one of --dataset_name, --data_dir and --train_file ({found}).")
    for name in ("max_source_length", "max_target_length", "split_validation_size"):
        if getattr(args, name) <= 0:
            raise CorpusError(f"--{name} {getattr(args, name)}: must be at least 1.")
    if args.split_test_size < 0:
        raise CorpusError(f"--split_test_size {args.split_test_size}: must be at least 0 (0: no test split).")
    if args.preprocess not in PREPROCESSING:
        raise CorpusError(f"--preprocess {args.preprocess!r}: use one of {', '.join(PREPROCESSING)}.")
    if args.source_lang.casefold() == args.target_lang.casefold():
        raise CorpusError(
            f"--source_lang {args.source_lang} and --target_lang {args.target_lang} name one language: both sides "
            "would be read from the same text, and the model would learn to copy it. Name each side's language."
        )
    if len({lang.casefold() for lang in args.tsv_languages}) < len(args.tsv_languages):
        raise CorpusError(
            f"--tsv_languages {' '.join(args.tsv_languages)} names a language twice: name each column's language once."
        )
    for name in ("max_train_samples", "max_eval_samples"):
        if getattr(args, name) is not None and getattr(args, name) <= 0:
            raise CorpusError(f"--{name} {getattr(args, name)}: must be at least 1 (or left out: all pairs).")
    if args.data_dir:
        check_data_dir(Path(args.data_dir))


def check_data_dir(folder: Path) -> None:
    """A folder that is there; a relative one is named with where it was looked for, since a shipped config's
    `data_dir` is relative to the repository, and after a pip install the command runs elsewhere."""
    if folder.is_file():
        raise CorpusError(
            f"--data_dir {folder}: a file; give the folder of the corpus's files (or --train_file {folder})."
        )
    if not folder.is_dir():
        where = (
            "" if folder.is_absolute() else f" in {Path.cwd()} (a relative path is read from where the command runs)"
        )
        raise CorpusError(f"--data_dir {folder}: no such folder{where}.")


def prefix_splits(args: DataArguments) -> dict[str, str]:
    """With --data_dir: each split's prefix."""
    splits = {"train": args.train_prefix}
    if args.validation_prefix:
        splits["validation"] = args.validation_prefix
    return splits | {prefix: prefix for prefix in args.test_prefixes}


def file_splits(args: DataArguments) -> dict[str, list[str]]:
    """With --train_file: each split's files."""
    splits = {"train": args.train_file}
    if args.validation_file:
        splits["validation"] = [args.validation_file]
    return splits | {split_name_of_test_file(path): [path] for path in args.test_files}


def split_name_of_test_file(path: str) -> str:
    """A test file's split: its name before the first dot, prefixed with "test_" unless it starts so."""
    stem = Path(path).name.split(".")[0]
    return stem if stem.startswith("test") else f"test_{stem}"


def held_out_splits(corpus: DatasetDict, args: DataArguments, seed: int) -> DatasetDict:
    """Cut validation and test sets from the training data where the source has none (seeded, so repeatable); the
    training pairs left share no source sentence with them."""
    cuts = [("validation", args.split_validation_size, "validation" not in corpus)]
    cuts.append(("test", args.split_test_size, not testing_splits(corpus)))
    held_out = []
    for name, size, missing in cuts:
        if missing and size:
            if corpus["train"].num_rows <= size:
                raise CorpusError(
                    f"Cannot hold out {size} pairs for {name}: train has {corpus['train'].num_rows} "
                    f"(a smaller --split_{name}_size, or a {name} file of its own)."
                )
            parts = corpus["train"].train_test_split(test_size=size, seed=seed, shuffle=True)
            corpus["train"], corpus[name] = parts["train"], parts["test"]
            logger.info("Held out %d training pairs as the %s split (seed %d)", size, name, seed)
            held_out.append(name)
    if held_out:
        corpus["train"] = without_sources_of(corpus["train"], [corpus[name] for name in held_out])
    return corpus


def without_sources_of(train: Dataset, held_out: list[Dataset]) -> Dataset:
    """The training pairs whose source sentence is in none of the held-out splits: a corpus can hold a sentence more
    than once, each time with a translation of its own (Tatoeba does), and a split would then score sentences that the
    model has read."""
    held = {source for split in held_out for source in column_texts(split, "source")}
    kept = train.filter(lambda sources: [s not in held for s in sources], input_columns="source", batched=True)
    if kept.num_rows < train.num_rows:
        logger.info("Dropped %d training pairs whose source sentence is held out too", train.num_rows - kept.num_rows)
    return kept


def preprocessed(corpus: DatasetDict, args: DataArguments) -> DatasetDict:
    """The corpus as `--preprocess` asks: as it is, or lowercased and tokenized."""
    if args.preprocess == LOWERCASE_TOKENIZED:
        return lowercase_and_tokenize(corpus, args.source_lang, args.target_lang)
    return corpus


def lowercase_and_tokenize(corpus: DatasetDict, source_lang: str, target_lang: str) -> DatasetDict:
    """Every split lowercased and Moses-tokenized, as Multi30K papers prepare their text."""
    source, target = lowercase_tokenizer(source_lang), lowercase_tokenizer(target_lang)

    def prepare(batch: dict) -> dict:
        return {"source": list(map(source, batch["source"])), "target": list(map(target, batch["target"]))}

    return corpus.map(prepare, batched=True, desc="lowercasing and tokenizing")


def testing_splits(corpus: DatasetDict) -> list[str]:
    return [split for split in corpus if split not in ("train", "validation")]


def drop_empty_pairs(dataset: Dataset, split: str) -> Dataset:
    kept = dataset.filter(
        lambda b: [bool(s.strip() and t.strip()) for s, t in zip(b["source"], b["target"], strict=True)], batched=True
    )
    if kept.num_rows < dataset.num_rows:
        logger.info("Dropped %d empty pairs from %s", dataset.num_rows - kept.num_rows, split)
    return kept


# Tokenization ---------------------------------------------------------------------------------------------------------


def column_values(dataset: Dataset, name: str) -> list:
    """A column's values as one list. datasets 5 gives `dataset[name]` as a lazy Column that, iterated, reads its
    rows one at a time (seconds for Multi30K's 29,000 pairs); a slice reads them all at once."""
    return dataset[name][:]


def column_texts(dataset: Dataset, name: str, batch_size: int = 10_000) -> Iterator[str]:
    """A text column's values one by one, read a batch at a time: neither row by row (datasets 5's lazy Column,
    minutes for millions of pairs) nor all at once (gigabytes of Python strings)."""
    for batch in dataset.select_columns([name]).iter(batch_size=batch_size):
        yield from batch[name]


def token_lists(dataset: Dataset, name: str) -> pa.ListArray:
    """A tokenized column as one Arrow array of lists, read from the dataset's table: as Python lists, the token ids of
    millions of pairs would take gigabytes (some 36 bytes an id), in every process of a multi-GPU run."""
    column = dataset.data.column(name)  # every row of the table, those a filter left out too
    if dataset._indices is not None:
        # The rows a filter or a selection kept, taken by Arrow: datasets' own reading gathers them one at a time in
        # Python (half a minute a column for millions of pairs), and writing them out anew (flatten_indices) takes
        # minutes.
        column = column.take(dataset._indices.column(0))
    return column.combine_chunks()


def token_columns(dataset: Dataset) -> dict[str, pa.ListArray]:
    """The training pairs' two tokenized columns, each read once (token_lists)."""
    return {name: token_lists(dataset, name) for name in ("input_ids", "labels")}


def row_lengths(rows: pa.ListArray) -> list[int]:
    """The number of tokens in each row of a tokenized column read by token_lists."""
    return pc.list_value_length(rows).to_pylist()


def sequence_lengths(dataset: Dataset, name: str) -> list[int]:
    """The number of tokens in each row of a tokenized column."""
    return row_lengths(token_lists(dataset, name))


def distinct_token_ids(dataset: Dataset, name: str) -> list[int]:
    """The ids that occur in a tokenized column, each once."""
    return pc.unique(token_lists(dataset, name).flatten()).to_pylist()


def first_token_outside(rows: pa.ListArray, vocab_size: int) -> tuple[int, int] | None:
    """(row, id) of the first token id in a tokenized column (token_lists) outside [0, vocab_size) other than -100 (a
    label without loss); None where there is none."""
    ids = rows.flatten()
    outside = pc.and_(pc.or_(pc.less(ids, 0), pc.greater_equal(ids, vocab_size)), pc.not_equal(ids, -100))
    if not pc.any(outside).as_py():
        return None
    place = pc.index(outside, True).as_py()
    return pc.list_parent_indices(rows)[place].as_py(), ids[place].as_py()


def rows_holding(rows: pa.ListArray, token_id: int) -> list[int]:
    """The rows of a tokenized column (token_lists) that hold `token_id`, each once, in order."""
    return pc.unique(pc.filter(pc.list_parent_indices(rows), pc.equal(rows.flatten(), token_id))).to_pylist()


def characters_without_token(tokenizer: PreTrainedTokenizerFast, texts: Iterable[str]) -> list[tuple[str, int]]:
    """The characters of `texts` that the tokenizer can only write as its unknown token, with their counts, the
    commonest first."""
    counts = Counter(character for text in texts for character in text if not character.isspace())
    alone = token_ids(tokenizer, list(counts))  # each character on its own
    unknown = [
        (character, count)
        for (character, count), ids in zip(counts.items(), alone, strict=True)
        if tokenizer.unk_token_id in ids
    ]
    return sorted(unknown, key=lambda item: -item[1])


def check_vocabulary_covers(
    tokenized: Dataset, tokenizer: PreTrainedTokenizerFast, args: DataArguments, model: str
) -> None:
    """A fine-tune keeps its model's vocabulary: refused where that vocabulary has no token for a character of many
    training sentences on one side, since the model would learn to write the unknown token in their place."""
    columns = token_columns(tokenized)
    sides = (("input_ids", "source", args.source_lang), ("labels", "target", args.target_lang))
    for name, side, lang in sides:
        rows = rows_holding(columns[name], tokenizer.unk_token_id)
        if len(rows) < UNCOVERED_SHARE * len(tokenized):
            continue
        sample = rows[:1000]
        missing = characters_without_token(tokenizer, column_texts(tokenized.select(sample), side))
        listed = ", ".join(f"{character!r} ({count:,})" for character, count in missing[:8])
        raise CorpusError(
            f"--model_name_or_path {model}: its vocabulary has no token for characters of {len(rows):,} of the "
            f"{len(tokenized):,} training {side} sentences ({lang}); in the first {len(sample):,} of them: {listed}. "
            "A fine-tune keeps the model's vocabulary, and would learn to write <unk> for them: train a new model on "
            "this corpus (without --model_name_or_path), whose vocabulary is learned from it."
        )


def token_ids(tokenizer: PreTrainedTokenizerFast, texts: list[str]) -> list[list[int]]:
    """Each text's token ids, special tokens included, from the Rust tokenizer under the transformers one: its call
    would also build the offsets and attention masks that a tokenized corpus does not keep (the collator makes the
    masks of each batch). Padding and truncation are turned off first, as that call does: a tokenizer saved after a
    padded call keeps its padding in tokenizer.json."""
    backend = tokenizer.backend_tokenizer
    backend.no_padding()
    backend.no_truncation()
    return [encoding.ids for encoding in backend.encode_batch_fast(texts)]


def tokenize_corpus(corpus: DatasetDict, tokenizer: PreTrainedTokenizerFast, args: DataArguments) -> DatasetDict:
    """input_ids / labels for every split; training pairs over the length limits are dropped (evaluation sets are
    kept whole, so that scores are on the full test set). The training split keeps its text too, for BPE-dropout to
    segment anew (training.subword_regularization)."""

    def encode(batch: dict) -> dict:
        return {"input_ids": token_ids(tokenizer, batch["source"]), "labels": token_ids(tokenizer, batch["target"])}

    tokenized = DatasetDict(
        {
            split: dataset.map(encode, batched=True, remove_columns=None if split == "train" else TEXT_COLUMNS)
            for split, dataset in corpus.items()
        }
    )
    train = tokenized["train"]
    kept = train.filter(
        lambda sources, targets: [
            len(s) <= args.max_source_length and len(t) <= args.max_target_length
            for s, t in zip(sources, targets, strict=True)
        ],
        batched=True,
        input_columns=["input_ids", "labels"],
    )
    if kept.num_rows == 0:
        shortest = min(max(len(s), len(t)) for s, t in zip(train["input_ids"], train["labels"], strict=True))
        raise CorpusError(
            f"All {train.num_rows} training pairs are longer than --max_source_length {args.max_source_length} / "
            f"--max_target_length {args.max_target_length} tokens (the shortest has {shortest} tokens on its longer "
            "side): nothing is left to train on."
        )
    if kept.num_rows < train.num_rows:
        logger.info(
            "Dropped %d training pairs longer than %d source / %d target tokens",
            train.num_rows - kept.num_rows,
            args.max_source_length,
            args.max_target_length,
        )
    tokenized["train"] = kept
    return tokenized
