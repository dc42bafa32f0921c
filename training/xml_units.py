"""What the two XML formats of translation tools share (TMX memories, XLIFF documents): their units read one by one
with the standard library's `iterparse`, so that a file of millions of units is read in little memory, and a segment's
text without the original document's formatting codes. `datasets`' "xml" builder reads a whole file as one string, and
pandas' `read_xml` neither groups a unit's segments nor keeps a segment's inline text."""

from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

from .text_files import CorpusError, binary_file

Element = ElementTree.Element
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"  # xml:lang, as ElementTree names it

# Inline elements that hold the original document's formatting codes (TMX's and XLIFF 1.2's; XLIFF 2's are empty).
NATIVE_CODES = {"bpt", "ept", "it", "ph", "ut"}


def xml_units(path: Path, root: str, units: set[str]) -> Iterator[tuple[Element, list[Element]]]:
    """Each element named in `units` of an XML file whose root element is `root`, in order, with its ancestors (the
    root first, their attributes read); each unit is removed from its parent once the next is asked for."""
    with binary_file(path) as stream:
        events = ElementTree.iterparse(stream, events=("start", "end"))
        ancestors: list[Element] = []
        try:
            for event, element in events:
                if event == "start":
                    name = local_name(element.tag)
                    if not ancestors and name != root:
                        raise CorpusError(f"{path}: its root element is <{name}>, not <{root}>.")
                    ancestors.append(element)
                    continue
                ancestors.pop()
                if local_name(element.tag) in units:
                    yield element, ancestors
                    ancestors[-1].remove(element)
        except ElementTree.ParseError as error:
            reason = str(error).rsplit(": line ", 1)[0]
            raise CorpusError(f"{path}, line {error.position[0]}: not well-formed XML ({reason}).") from None


def segment_text(element: Element) -> str:
    """An element's text with its inline formatting codes left out and marked or highlighted text (<hi>, <g>, <mrk>,
    <pc>) kept."""
    parts = [element.text or ""]
    for child in element:
        if local_name(child.tag) not in NATIVE_CODES:
            parts.append(segment_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def local_name(tag: str) -> str:
    """An XML tag without its namespace ("{http://www.lisa.org/tmx14}tu" -> "tu")."""
    return tag.rsplit("}", 1)[-1]
