"""Language codes as users write them (en, zh-CN, zh_Hans, and Tatoeba's cmn and eng), reduced to what the recipe
keys on: the language for sacreBLEU's tokenizer, and the script a language is written in.

The codes are listed here for the languages the recipe tells apart, not looked up: the `langcodes` package knows
every language, a dependency for some forty codes."""

from vanilla_transformer.pipeline_vanilla_transformer import language_subtag

# ISO 639-2 and 639-3 codes (Tatoeba's and manythings.org's: eng, cmn, deu) of the languages below, as ISO 639-1;
# Mandarin, Cantonese and Wu as Chinese, whose characters they share.
# fmt: off
LONG_CODES = {
    "cmn": "zh", "zho": "zh", "chi": "zh", "yue": "zh", "wuu": "zh", "jpn": "ja", "kor": "ko",
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es", "ita": "it", "por": "pt",
    "nld": "nl", "dut": "nl", "swe": "sv", "dan": "da", "nor": "no", "nob": "nb", "fin": "fi", "est": "et",
    "ces": "cs", "cze": "cs", "slk": "sk", "slo": "sk", "pol": "pl", "ron": "ro", "rum": "ro", "hun": "hu",
    "tur": "tr", "ind": "id", "msa": "ms", "may": "ms", "zsm": "ms", "vie": "vi",
    "rus": "ru", "ukr": "uk", "bel": "be", "bul": "bg", "mkd": "mk", "mac": "mk", "kaz": "kk",
    "ell": "el", "gre": "el", "ara": "ar", "fas": "fa", "per": "fa", "pes": "fa", "urd": "ur", "heb": "he",
    "hin": "hi", "mar": "mr", "nep": "ne", "npi": "ne", "tha": "th",
}
# fmt: on

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


def primary_language(code: str) -> str:
    """`code`'s language, lowercased, without region or script ("zh-CN" and "zh_Hans" as "zh"), as its two-letter
    code where LONG_CODES knows a longer one ("cmn" and "eng" as "zh" and "en")."""
    primary = language_subtag(code)
    return LONG_CODES.get(primary, primary)


def script_of(code: str) -> str | None:
    """The script the language `code` is written in, or None where it is not in SCRIPTS."""
    language = primary_language(code)
    return next((script for script, (_, languages) in SCRIPTS.items() if language in languages.split()), None)
