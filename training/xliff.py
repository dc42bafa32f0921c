"""XLIFF documents (1.2, as Okapi, OmegaT, Trados' .sdlxliff and memoQ's .mqxliff write it, and 2.x): the files in
which translation tools hand a document's translation from one to another. Each unit's source and target texts are a
pair, read unit by unit (training.xml_units). A document names its two languages (1.2: each <file>'s source-language
and target-language; 2.x: the root's srcLang and trgLang), and one translated the other way round (German into
English, for --source_lang en --target_lang de) gives its pairs the other way round."""

import functools
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from .languages import codes_naming
from .text_files import CorpusError
from .xml_units import XML_LANG, local_name, segment_text, xml_units

logger = logging.getLogger(__name__)

UNITS = {"trans-unit", "unit"}  # XLIFF 1.2's and 2.x's
UNTRANSLATED = {"new", "needs-translation", "initial"}  # states (1.2's <target>'s, 2.x's <segment>'s): not translated
LANGUAGE_ATTRIBUTES = (("source-language", "target-language"), ("srcLang", "trgLang"))  # 1.2's <file>, 2.x's <xliff>


def xliff_pairs(files: tuple[Path], languages: tuple[str, str]) -> Iterator[dict]:
    """The "source"/"target" pairs of an XLIFF file's translated segments in the two `languages`, in order."""
    path, left_out, found, segments = files[0], Counter(), set(), 0
    for number, (unit, ancestors) in enumerate(xml_units(path, "xliff", UNITS), start=1):
        declared = document_languages(ancestors, f"{path}, translation unit {number}")
        for source, target, state in unit_segments(unit):
            segments += 1
            codes = (source.get(XML_LANG) or declared[0], target_language(target, declared))
            found.add(codes)
            order = side_order(codes, languages)
            if unit.get("translate") == "no":
                left_out["marked not to translate"] += 1
            elif order is None:
                left_out[f"not in {languages[0]} and {languages[1]}"] += 1
            elif target is None or state in UNTRANSLATED or not segment_text(target).strip():
                left_out["not translated"] += 1
            else:
                texts = segment_text(source), segment_text(target)
                yield {"source": texts[order[0]], "target": texts[order[1]]}
    if not segments:
        raise CorpusError(f"{path}: no translation units (<trans-unit> or <unit> elements with a <source>).")
    if sum(left_out.values()) == segments:
        reasons = ", ".join(f"{count} {reason}" for reason, count in left_out.items())
        pairs = sorted(f"{source}→{target or '?'}" for source, target in found)
        raise CorpusError(
            f"{path}: none of its {segments} segments is a translation between {languages[0]} and {languages[1]} "
            f"({reasons}; its languages: {', '.join(pairs)})."
        )
    for reason, count in left_out.items():
        logger.info("%s: %d of %d segments %s; left out", path, count, segments, reason)


def document_languages(ancestors: list[ElementTree.Element], where: str) -> tuple[str, str | None]:
    """The source and target language codes that a unit's document names (its target's may be left out)."""
    for element in reversed(ancestors):
        for source, target in LANGUAGE_ATTRIBUTES:
            if element.get(source):
                return element.get(source), element.get(target)
    raise CorpusError(f"{where}: no source language named (source-language on <file>, or srcLang on <xliff>).")


def unit_segments(
    unit: ElementTree.Element,
) -> Iterator[tuple[ElementTree.Element, ElementTree.Element | None, str | None]]:
    """A unit's (source, target, state) triples: 1.2's <trans-unit> is one (its alternatives, <alt-trans>, are not
    its translation), 2.x's <unit> one a <segment>; the target is None where there is none yet."""
    segments = [unit] if local_name(unit.tag) == "trans-unit" else [s for s in unit if local_name(s.tag) == "segment"]
    for segment in segments:
        children = {local_name(child.tag): child for child in reversed(segment)}  # the first of each name
        source, target = children.get("source"), children.get("target")
        holder = target if segment is unit else segment  # 1.2's state is its <target>'s, 2.x's its <segment>'s
        if source is not None:
            yield source, target, None if holder is None else holder.get("state")


def target_language(target: ElementTree.Element | None, declared: tuple[str, str | None]) -> str | None:
    """A target's language: its own xml:lang, else its document's target language."""
    return (target.get(XML_LANG) if target is not None else None) or declared[1]


@functools.lru_cache(maxsize=64)
def side_order(codes: tuple[str, str | None], languages: tuple[str, str]) -> tuple[int, int] | None:
    """Which of a segment's (source, target) texts is the pair's source and which its target: (0, 1), (1, 0) for a
    document translated the other way round, or None where its two languages are not `languages` (`codes_naming`:
    en-US for en)."""
    present = [code for code in codes if code]
    named = [codes_naming(present, lang) for lang in languages]
    if not all(named):
        return None
    order = (codes.index(named[0][0]), codes.index(named[1][0]))
    return order if order[0] != order[1] else None
