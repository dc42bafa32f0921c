"""Gettext catalogues (.po, or .po.gz), as software is translated (GNU gettext, Django, WordPress, Weblate, Poedit):
each translated entry's source text (msgid) and its translation (msgstr) a pair, read by polib (the `po` extra). The
catalogue's Language header names its translations' language; its source texts' language is not written down, and is
taken to be the other of the two."""

import logging
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from .console import first_line
from .languages import codes_naming
from .text_files import CorpusError, binary_file

if TYPE_CHECKING:
    import polib

logger = logging.getLogger(__name__)


def po_pairs(files: tuple[Path], languages: tuple[str, str]) -> Iterator[dict]:
    """The "source"/"target" pairs of a .po file's translated entries (a plural's second form beside its first), the
    other way round where its Language is the source language."""
    path = files[0]
    catalogue = read_catalogue(path)
    order = translations_side(catalogue.metadata.get("Language", ""), languages, path)
    left_out = Counter()
    for entry in catalogue:
        if not entry.translated():  # polib's word: neither obsolete nor fuzzy, and its every form translated
            left_out["obsolete" if entry.obsolete else "fuzzy" if entry.fuzzy else "not translated"] += 1
            continue
        for source, translation in entry_texts(entry):
            texts = (source, translation)
            yield {"source": texts[order[0]], "target": texts[order[1]]}
    if sum(left_out.values()) == len(catalogue):
        reasons = ", ".join(f"{count} {reason}" for reason, count in left_out.items())
        raise CorpusError(f"{path}: none of its {len(catalogue)} entries is translated ({reasons}).")
    for reason, count in left_out.items():
        logger.info("%s: %d of %d entries %s; left out", path, count, len(catalogue), reason)


def read_catalogue(path: Path) -> "polib.POFile":
    """A .po file (or a gzip-compressed .po.gz), parsed by polib in the charset its header names; a file it cannot
    parse or decode ends in a `CorpusError`."""
    import polib

    try:
        return polib.pofile(str(path) if path.suffix != ".gz" else catalogue_text(path))
    except (OSError, ValueError) as error:
        line = re.search(r"\(line (\d+)\)$", first_line(error))
        if line:  # polib's "Syntax error in po file PATH (line N)"
            raise CorpusError(f"{path}, line {line[1]}: not a gettext catalogue (a syntax error).") from None
        raise CorpusError(f"{path}: not a gettext catalogue ({first_line(error)}).") from None


def catalogue_text(path: Path) -> str:
    """A .po.gz file's text, decoded in the charset its header names (polib reads only a file's own bytes)."""
    import polib

    with binary_file(path) as stream:
        data = stream.read()
    return data.decode(polib.detect_encoding(data))  # a UnicodeDecodeError is a ValueError: the caller names it


def translations_side(language: str, languages: tuple[str, str], path: Path) -> tuple[int, int]:
    """Which of an entry's (msgid, msgstr) is the pair's source and which its target: (0, 1) where the catalogue's
    Language is the target language (or not given), (1, 0) where it is the source language."""
    if not language.strip():
        logger.info("%s: no Language header; its translations taken to be --target_lang %s", path, languages[1])
        return 0, 1
    if codes_naming([language], languages[1]):
        return 0, 1
    if codes_naming([language], languages[0]):
        return 1, 0
    raise CorpusError(
        f"{path}: its translations are in {language} (its Language header), neither {languages[0]} nor {languages[1]}."
    )


def entry_texts(entry: "polib.POEntry") -> list[tuple[str, str]]:
    """An entry's (source, translation) texts: its one form, or its singular and its plural's second form."""
    if not entry.msgid_plural:
        return [(entry.msgid, entry.msgstr)]
    forms = entry.msgstr_plural
    return [(entry.msgid, forms[0])] + ([(entry.msgid_plural, forms[1])] if 1 in forms else [])
