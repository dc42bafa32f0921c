"""The script each language the recipe tells apart is written in, by its language code as users write them (en,
zh-CN, zh_Hans, and Tatoeba's cmn and eng; `primary_language` reduces them), and which of a file's codes (or names, as
a spreadsheet's header row may hold them: English, German) name a language."""

import functools
from collections.abc import Iterable

from vanilla_transformer.pipeline_vanilla_transformer import primary_language

# Scripts by the first word of their letters' Unicode names ("CJK UNIFIED IDEOGRAPH-4E2D", "LATIN SMALL LETTER A"),
# and the languages written in each.
SCRIPTS = {
    "Latin letters": ({"LATIN"}, "en de fr es it pt nl sv da no nb fi et cs sk pl ro hu tr id ms vi"),
    "Chinese characters": ({"CJK"}, "zh"),
    "kana and kanji": ({"HIRAGANA", "KATAKANA", "CJK"}, "ja"),
    "Hangul": ({"HANGUL"}, "ko"),
    "Cyrillic letters": ({"CYRILLIC"}, "ru uk be bg mk kk"),
    "Greek letters": ({"GREEK"}, "el"),
    "Arabic script": ({"ARABIC"}, "ar fa ur"),
    "Hebrew letters": ({"HEBREW"}, "he"),
    "Devanagari": ({"DEVANAGARI"}, "hi mr ne"),
    "Thai script": ({"THAI"}, "th"),
}


def script_of(code: str) -> str | None:
    """The script the language `code` is written in, or None where it is not in SCRIPTS."""
    language = primary_language(code)
    return next((script for script, (_, languages) in SCRIPTS.items() if language in languages.split()), None)


def codes_naming(codes: Iterable[str], lang: str) -> list[str]:
    """The codes among `codes` (a table's column names, a memory's segments) that name `lang`: the one that is `lang`
    written in any case or with "_" for "-" (EN, en_us), else every one of its language (en-US and en-GB for en, and
    its English name: English)."""
    codes, written, language = list(dict.fromkeys(codes)), normal_code(lang), primary_language(lang)
    same = [code for code in codes if normal_code(code) == written]
    return same[:1] or [code for code in codes if code_language(code) == language]


def code_language(code: str) -> str:
    """The language a code names (`primary_language`), or the one whose English name it is ("German" -> "de")."""
    return english_names().get(code.strip().casefold()) or primary_language(code)


@functools.cache
def english_names() -> dict[str, str]:
    """Languages' English names in lower case and their codes ("german": "de", "mandarin": "zh"): transformers' table
    of Whisper's hundred languages, the one such table among the dependencies."""
    from transformers.models.whisper.tokenization_whisper import TO_LANGUAGE_CODE

    return TO_LANGUAGE_CODE


def normal_code(code: str) -> str:
    """A code as compared: in lower case, with "-" for "_"."""
    return code.casefold().replace("_", "-")
