"""What every corpus reader shares: its pairs become a `Dataset` of two string columns, cached by `datasets`.

Files are read with training.text_files (lines end at "\\n" only, errors name the file and line) and handed to
`datasets` as a generator: `load_dataset("text" | "json")` would split lines at a lone "\\r" as well, and report a bad
byte or a bad JSON value without its line.
"""

import functools
import hashlib
import importlib
from collections.abc import Callable, Iterator
from pathlib import Path

from datasets import Dataset, Features, Value
from datasets.exceptions import DatasetGenerationError

from .text_files import CorpusError

TEXT_COLUMNS = ["source", "target"]  # every corpus split's; tokenized, only the training split keeps them
PAIR_FEATURES = Features({name: Value("string") for name in TEXT_COLUMNS})
# The modules whose code reads pairs from files: a file cached by another version of them is read again.
READER_MODULES = (
    "cached_pairs",
    "data",
    "tables",
    "text_files",
    "xml_units",
    "tmx",
    "xliff",
    "gettext_files",
    "languages",
)


@functools.cache
def reader_code() -> str:
    """A digest of the readers' modules as installed (their source, or only their bytecode where that is all there
    is)."""
    modules = (importlib.import_module(f"{__package__}.{name}") for name in READER_MODULES)
    return hashlib.sha256(b"".join(Path(module.__file__).read_bytes() for module in modules)).hexdigest()


def pairs_dataset(pairs: Callable[..., Iterator[dict]], files: tuple[Path, ...], **options) -> Dataset:
    """The Dataset of what `pairs(files, **options)` yields, cached by `datasets` under the files' paths, sizes and
    modification times and the readers' code (a changed file, or another version of the readers, reads it again).
    `files` is a tuple: `datasets` would shard a list."""
    stats = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key = (pairs.__name__, stats, sorted(options.items()), reader_code())
    fingerprint = hashlib.sha256(repr(key).encode()).hexdigest()[:32]
    try:
        return Dataset.from_generator(
            pairs, features=PAIR_FEATURES, gen_kwargs={"files": files, **options}, fingerprint=fingerprint
        )
    except DatasetGenerationError as error:  # datasets wraps what the generator raised
        if isinstance(error.__cause__, CorpusError):
            raise error.__cause__ from None
        raise
