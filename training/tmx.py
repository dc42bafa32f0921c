"""Translation memories (TMX 1.1 to 1.4b), as translation tools (Trados, memoQ, OmegaT) and OPUS export them: pairs
of each translation unit's segments in two languages, read unit by unit (training.xml_units)."""

import logging
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from .languages import codes_naming
from .text_files import CorpusError
from .xml_units import XML_LANG, local_name, segment_text, xml_units

logger = logging.getLogger(__name__)


def tmx_pairs(files: tuple[Path], languages: tuple[str, str]) -> Iterator[dict]:
    """The "source"/"target" pairs of a TMX file's units that hold both `languages`, in order."""
    path, found, units, pairs = files[0], set(), 0, 0
    for units, (unit, _) in enumerate(xml_units(path, "tmx", {"tu"}), start=1):
        where = f"{path}, translation unit {units}"
        segments = [tuv_segment(tuv, where) for tuv in unit if local_name(tuv.tag) == "tuv"]
        found.update(code for code, _ in segments)
        sides = zip(("source", "target"), languages, strict=True)
        texts = [segment_in(segments, lang, f"{where}: --{side}_lang") for side, lang in sides]
        if None not in texts:  # a multilingual memory's unit may lack one of the two languages: no pair
            pairs += 1
            yield {"source": texts[0], "target": texts[1]}
    if not found:
        raise CorpusError(f"{path}: no translation units (<tu> elements with <tuv> segments).")
    if not pairs:
        raise CorpusError(
            f"{path}: no translation unit holds both {languages[0]} and {languages[1]} (its languages: "
            f"{', '.join(sorted(found))})."
        )
    if pairs < units:
        logger.info("%s: %d of %d translation units lack %s or %s; left out", path, units - pairs, units, *languages)


def tuv_segment(tuv: ElementTree.Element, where: str) -> tuple[str, str]:
    """A <tuv>'s language (xml:lang, or TMX 1.1's lang) and its segment's text."""
    code = tuv.get(XML_LANG) or tuv.get("lang")
    if not code:
        raise CorpusError(f"{where}: a <tuv> without xml:lang (each segment names its language).")
    seg = next((child for child in tuv if local_name(child.tag) == "seg"), None)
    return code, "" if seg is None else segment_text(seg)


def segment_in(segments: list[tuple[str, str]], lang: str, where: str) -> str | None:
    """`lang`'s text among a unit's segments (`codes_naming`: en-US for en), or None. Two of its language and neither
    that very code (zh-CN and zh-TW for zh) are refused: which one to train on is the user's choice."""
    codes = codes_naming((code for code, _ in segments), lang)
    if len(codes) > 1:
        raise CorpusError(f"{where} {lang} is both {' and '.join(sorted(codes))} here; name the one to train on.")
    return next(text for code, text in segments if code == codes[0]) if codes else None
