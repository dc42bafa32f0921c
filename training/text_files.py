"""Text files read line by line, strictly: what the corpus readers and the translate CLI share.

Python's text mode and `str.splitlines` (which `datasets`' "text" builder uses) also break lines at a lone "\\r",
"\\x0b", "\\x1c"-"\\x1e", "\\x85", "\\u2028" and "\\u2029": one such character inside a sentence then shifts every
later line of one side of a parallel corpus against the other, with no error. Here a line ends at "\\n" only (a
"\\r" before it, from Windows files, is dropped); a UTF-8 byte-order mark at the start is dropped; bytes that are not
UTF-8, binary data and truncated .gz files end in a `CorpusError` that names the file and line. A text in UTF-16 with
its byte-order mark (Excel's "Unicode Text", Windows tools') is read as such.
"""

import codecs
import contextlib
import gzip
import io
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
    """The lines of a binary stream of UTF-8 text, or of UTF-16 text with its byte-order mark where the stream can be
    peeked at (a file, `sys.stdin.buffer`); `name` is used in errors."""
    if hasattr(stream, "peek") and stream.peek(2)[:2] in UTF16_BOMS:
        yield from utf16_lines(stream, name)
        return
    for number, raw in enumerate(stream, start=1):  # a binary stream splits at b"\n" only
        raw = raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(
                f"{name}, line {number}: not UTF-8 text (byte {raw[error.start]:#04x} at byte {error.start + 1} of "
                "the line); convert the file to UTF-8."
            ) from None
        yield text_line(line, number, name)


def utf16_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary stream of UTF-16 text that starts with its byte-order mark."""
    text, number = io.TextIOWrapper(stream, encoding="utf-16", newline="\n"), 0  # newline: lines end at "\n" only
    try:
        for number, line in enumerate(text, start=1):
            yield text_line(line, number, name)
    except UnicodeDecodeError as error:
        # decoded a block at a time: the bad bytes lie somewhere past the last line read
        where = f"{name}, after line {number}" if number else name
        raise CorpusError(f"{where}: not UTF-16 text ({error.reason}).") from None
    finally:
        text.detach()  # the stream is its opener's to close


def text_line(line: str, number: int, name: str) -> str:
    """A decoded line without its line end; a NUL in it (binary data) ends in a `CorpusError`."""
    if "\x00" in line:
        raise CorpusError(f"{name}, line {number}: a NUL byte; this is binary data, not text.")
    return line.removesuffix("\n").removesuffix("\r")
