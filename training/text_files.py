"""Text files read line by line, strictly: what the corpus readers and the translate CLI share.

Python's text mode and `str.splitlines` (which `datasets`' "text" builder uses) also break lines at a lone "\\r",
"\\x0b", "\\x1c"-"\\x1e", "\\x85", "\\u2028" and "\\u2029": one such character inside a sentence then shifts every
later line of one side of a parallel corpus against the other, with no error. Here a line ends at "\\n" only (a
"\\r" before it, from Windows files, is dropped); a UTF-8 byte-order mark at the start is dropped; bytes that are not
UTF-8, binary data and truncated .gz files end in a `CorpusError` that names the file and line.
"""

import codecs
import contextlib
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class CorpusError(ValueError):
    """The data cannot be read as text or as a parallel corpus; the message names the file and line."""


UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def read_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 file (gzip-compressed if its name ends in .gz), without their line ends."""
    with binary_file(path) as stream:
        yield from decode_lines(stream, str(path))


def first_line_of(path: str | Path) -> str:
    """A file's first line ("" for an empty file): a header row, read without reading the rest."""
    lines = read_lines(path)
    first = next(lines, "")
    lines.close()
    return first


@contextlib.contextmanager
def binary_file(path: str | Path) -> Iterator[BinaryIO]:
    """A file's bytes, decompressed if its name ends in .gz; a cut-off .gz file, found while it is read, ends in a
    `CorpusError`."""
    path = Path(path)
    if path.is_dir():
        raise CorpusError(f"{path}: a folder; give a file of sentences.")
    if not path.is_file():
        raise CorpusError(f"{path}: no such file.")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            yield stream
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise CorpusError(f"{path}: not a complete gzip file ({error}); was it cut off while copying?") from None


def decode_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary stream of UTF-8 text (a file, or `sys.stdin.buffer`); `name` is used in errors."""
    for number, raw in enumerate(stream, start=1):  # a binary stream splits at b"\n" only
        if number == 1:
            if raw.startswith(UTF16_BOMS):
                raise CorpusError(f"{name}: UTF-16 text; convert it to UTF-8 (iconv -f UTF-16 -t UTF-8).")
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"{name}, line {number}: not UTF-8 text (byte {raw[error.start]:#04x} at byte {error.start + 1} of "
                "the line); convert the file to UTF-8."
            ) from None
        if "\x00" in line:
            raise CorpusError(f"{name}, line {number}: a NUL byte; this is binary data, not text.")
        yield line.removesuffix("\n").removesuffix("\r")
