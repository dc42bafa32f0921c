"""Text files read line by line, strictly: what the corpus readers and the translate CLI share.

Python's text mode and `str.splitlines` (which `datasets`' "text" builder uses) also break lines at a lone "\\r",
"\\x0b", "\\x1c"-"\\x1e", "\\x85", "\\u2028" and "\\u2029": one such character inside a sentence then shifts every
later line of one side of a parallel corpus against the other, with no error. Here a line ends at "\\n" only (a
"\\r" before it, from Windows files, is dropped); a UTF-8 byte-order mark at the start is dropped; bytes that are not
UTF-8, binary data and truncated .gz files end in a `CorpusError` that names the file and line. A text in UTF-16 with
its byte-order mark (Excel's "Unicode Text", Windows tools') is read as such. A text whose lines may be too long to
hold one at a time (a JSON array written on one line) is read in pieces by the same rules.
"""

import codecs
import contextlib
import functools
import gzip
import io
import itertools
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


def existing_file(path: str | Path) -> Path:
    """`path`, where it names a file; a folder or nothing there is a `CorpusError` that says which."""
    path = Path(path)
    if path.is_dir():
        raise CorpusError(f"{path}: a folder; give a file of sentences.")
    if not path.is_file():
        raise CorpusError(f"{path}: no such file.")
    return path


@contextlib.contextmanager
def binary_file(path: str | Path) -> Iterator[BinaryIO]:
    """A file's bytes, decompressed if its name ends in .gz; a cut-off .gz file, found while it is read, ends in a
    `CorpusError`."""
    path = existing_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as stream:
            yield stream
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise CorpusError(f"{path}: not a complete gzip file ({error}); was it cut off while copying?") from None


def decode_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary stream of UTF-8 text, or of UTF-16 text with its byte-order mark where the stream can be
    peeked at (a file, `sys.stdin.buffer`); `name` is used in errors."""
    if utf16_marked(stream):
        yield from utf16_lines(stream, name)
        return
    for number, raw in enumerate(stream, start=1):  # a binary stream splits at b"\n" only
        raw = raw.removeprefix(codecs.BOM_UTF8) if number == 1 else raw
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise not_utf8(name, number, error, 0) from None
        yield text_line(line, number, name)


def not_utf8(name: str, number: int, error: UnicodeDecodeError, before: int) -> CorpusError:
    """The error for bytes that are not UTF-8 on line `number`, `before` bytes of which came before the bytes that
    `error` was decoding."""
    return CorpusError(
        f"{name}, line {number}: not UTF-8 text (byte {error.object[error.start]:#04x} at byte "
        f"{before + error.start + 1} of the line); convert the file to UTF-8."
    )


def utf16_marked(stream: BinaryIO) -> bool:
    """Whether a stream that can be peeked at (a file, `sys.stdin.buffer`) starts with a UTF-16 byte-order mark."""
    return hasattr(stream, "peek") and stream.peek(2)[:2] in UTF16_BOMS


def utf16_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    """The lines of a binary stream of UTF-16 text that starts with its byte-order mark."""
    text, number = io.TextIOWrapper(stream, encoding="utf-16", newline="\n"), 0  # newline: lines end at "\n" only
    try:
        for number, line in enumerate(text, start=1):
            yield text_line(line, number, name)
    except UnicodeDecodeError as error:
        raise not_utf16(name, number, error) from None
    finally:
        text.detach()  # the stream is its opener's to close


def not_utf16(name: str, lines: int, error: UnicodeDecodeError) -> CorpusError:
    """The error for bytes that are not UTF-16, found past the first `lines` lines (decoded a block at a time, the bad
    bytes lie somewhere after the last line read)."""
    where = f"{name}, after line {lines}" if lines else name
    return CorpusError(f"{where}: not UTF-16 text ({error.reason}).")


def read_pieces(path: str | Path, size: int = 1 << 20) -> Iterator[str]:
    """A file's text, line ends kept, in pieces of at most `size` bytes of it, each ending at a line end or inside a
    longer line: what `read_lines` reads, by the same rules, without holding a long line whole (a JSON array written
    on one line)."""
    with binary_file(path) as stream:
        if utf16_marked(stream):
            yield from utf16_pieces(stream, str(path), size)
            return
        decoder, number, before = codecs.getincrementaldecoder("utf-8")(), 1, 0  # before: the line's bytes so far
        # The last b"" is the end: a character cut off there is an error too.
        for raw in itertools.chain(iter(functools.partial(stream.readline, size), b""), [b""]):
            raw = raw.removeprefix(codecs.BOM_UTF8) if number == 1 and not before else raw
            try:
                piece = decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as error:  # error.object: the bytes of a character cut between pieces, then raw
                raise not_utf8(str(path), number, error, before + len(raw) - len(error.object)) from None
            if piece:
                yield text_piece(piece, number, str(path))
            number, before = (number + 1, 0) if raw.endswith(b"\n") else (number, before + len(raw))


def utf16_pieces(stream: BinaryIO, name: str, size: int) -> Iterator[str]:
    """The text of a binary stream of UTF-16 text that starts with its byte-order mark, in pieces of `size`
    characters, line ends kept."""
    text, lines = io.TextIOWrapper(stream, encoding="utf-16", newline=""), 0  # newline "": no line end changed
    try:
        while piece := text.read(size):
            yield text_piece(piece, lines + 1, name)
            lines += piece.count("\n")
    except UnicodeDecodeError as error:
        raise not_utf16(name, lines, error) from None
    finally:
        text.detach()


def text_piece(piece: str, number: int, name: str) -> str:
    """A decoded piece of text that starts on line `number`; a NUL in it (binary data) ends in a `CorpusError` naming
    its line."""
    if "\x00" in piece:
        line = number + piece.count("\n", 0, piece.index("\x00"))
        raise CorpusError(f"{name}, line {line}: a NUL byte; this is binary data, not text.")
    return piece


def text_line(line: str, number: int, name: str) -> str:
    """A decoded line without its line end; a NUL in it (binary data) ends in a `CorpusError`."""
    return text_piece(line, number, name).removesuffix("\n").removesuffix("\r")
