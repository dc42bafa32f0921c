"""Tables of pairs: TSV, CSV, JSON Lines and JSON, Parquet and .xlsx files, one column (or key) per language, or one
"source" and one "target" column; a Hub dataset's "translation" column of {language: text} too. Each reader returns a
Dataset of "source"/"target" pairs; bad data raises `CorpusError` naming the file and line (or item, or column)."""

import contextlib
import csv
import importlib.util
import itertools
import json
import logging
import re
import zipfile
from collections import Counter
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path

import pandas
import pyarrow as pa
import pyarrow.parquet as pq
from datasets import Dataset, Value

from vanilla_transformer.extras import MissingExtra

from .cached_pairs import PAIR_FEATURES, TEXT_COLUMNS, pairs_dataset
from .console import first_line
from .languages import codes_naming
from .text_files import CorpusError, first_line_of, read_lines, read_pieces

logger = logging.getLogger(__name__)

HEAD_LINES = 1000  # a TSV's lines read to judge its header and its usual width (its first), and its quoting
# The share of a TSV's lines with more tab-separated fields than the others from which the file is refused, not read
# without them: a few are tabs inside sentences, many a file whose columns change part-way.
WIDE_SHARE = 0.01


SIDE_NAMES = (("source", "target"), ("src", "tgt"))  # column names that say which side a text is on, not its language


def side_columns(names: Collection[str], languages: tuple[str, str], where: str) -> tuple[str, str] | None:
    """The two of a table's column names (a header row's, a record's keys) that hold the source and the target texts:
    those that name the languages (`codes_naming`: EN or en-US for en), else "source" and "target" (or "src" and
    "tgt"), as tables made for translation often name them; None where neither pair is there. Two columns of one
    language (en-US and en-GB for en) are refused: which one to read is the user's choice."""
    if all(lang in names for lang in languages):  # the usual case, read fast: a JSON file's every record asks
        return languages
    columns = [codes_naming(names, lang) for lang in languages]
    for side, lang, named in zip(TEXT_COLUMNS, languages, columns, strict=True):
        if len(named) > 1:
            raise CorpusError(
                f"{where}: columns {' and '.join(named)} are both {lang}; name one (--{side}_lang {named[0]})."
            )
    if all(columns):
        return columns[0][0], columns[1][0]
    return next((pair for pair in SIDE_NAMES if set(pair) <= set(names)), None)


def missing_language(names: Iterable[str], languages: tuple[str, str]) -> str:
    """The first of `languages` that `names` lacks: what a table without its side columns is told it misses."""
    names = set(names)
    return next(lang for lang in languages if lang not in names)


def is_tsv(path: str) -> bool:
    """A .tsv file, or a .txt one: manythings.org's Anki pairs and PyTorch's translation tutorial are tab-separated."""
    return bool({".tsv", ".txt"} & set(Path(path).suffixes))


def read_tsv(path: Path, columns: list[str], languages: tuple[str, str]) -> Dataset:
    """Tab-separated columns, one language each: named by a header row that names both languages (as pandas'
    `to_csv(sep="\\t")` writes one) or the source and target columns, else by `columns` (--tsv_languages); further
    columns (attribution, a row number) are kept out. Its first HEAD_LINES lines say whether a header names them and
    how many fields its lines usually hold; its first HEAD_LINES lines that hold a quote, how its fields are quoted."""
    with contextlib.closing(read_lines(path)) as lines:
        head = list(itertools.islice(lines, HEAD_LINES))
        quoted = csv_quoted(lines_with_quotes(itertools.chain(head, lines)))  # past the head only where it needs
    if quoted:
        logger.info("%s: its fields are quoted as pandas' to_csv writes them (a quote inside doubled); read so", path)
    first = [field.strip() for field in tsv_fields(head[0] if head else "", quoted)]
    sides = side_columns(first, languages, f"{path}, line 1")
    header = sides is not None
    if header:
        logger.info("%s: its first line names the columns: %s", path, first)
    else:
        sides = side_columns(columns, languages, "--tsv_languages")
        if sides is None:
            lang = missing_language(columns, languages)
            raise CorpusError(f"{path}: unknown language code {lang!r}; its columns are {columns} (--tsv_languages).")
    names = first if header else columns
    source_column, target_column = names.index(sides[0]), names.index(sides[1])
    expected = max(source_column, target_column) + 1 if header else len(columns)
    fields = (source_column, target_column, expected, usual_width(head, quoted))
    return pairs_dataset(tsv_pairs, (path,), columns=fields, skip=int(header), quoted=quoted)


QUOTED_FIELD = re.compile(r'"(?:[^"]|"")*"')  # as csv writes a field that holds a quote: in quotes, its quotes doubled


def lines_with_quotes(lines: Iterable[str]) -> list[str]:
    """The first HEAD_LINES of a TSV's `lines` that hold a quote, wherever they stand: in a file sorted by length,
    say, the first thousand lines may hold none."""
    return list(itertools.islice((line for line in lines if '"' in line), HEAD_LINES))


def csv_quoted(lines: list[str]) -> bool:
    """Whether a TSV's fields are quoted as Python's csv module and pandas' `to_csv(sep="\\t")` write them, judged from
    `lines`, some of its lines: every field that holds a quote is in quotes, with its own quotes doubled, and one of
    them doubles a quote. A TSV written otherwise (Tatoeba's, manythings.org's) holds its quotes as they are written."""
    fields = [field for line in lines for field in line.split("\t") if '"' in field]
    return any('""' in field[1:-1] for field in fields) and all(QUOTED_FIELD.fullmatch(field) for field in fields)


def usual_width(lines: list[str], quoted: bool) -> int:
    """The number of tab-separated fields that most of `lines` (a TSV's first) hold."""
    widths = Counter(len(tsv_fields(line, quoted)) for line in lines if line.strip())
    return widths.most_common(1)[0][0] if widths else 0


def tsv_fields(line: str, quoted: bool) -> list[str]:
    """A TSV line's fields: split at its tabs, and unquoted where the file is csv-quoted."""
    return next(csv.reader([line], delimiter="\t")) if quoted else line.split("\t")


def tsv_pairs(files: tuple[Path], columns: tuple[int, int, int, int], skip: int, quoted: bool) -> Iterator[dict]:
    """`columns`: the source's and the target's, the fields a line must hold at least, and the fields the file's lines
    usually hold. A line holding more (a tab inside a sentence, as `paste` joins two sides that hold one) is split
    where no one can tell, and is left out."""
    source_column, target_column, expected, width = columns
    count, wide = 0, []
    for count, line in itertools.islice(enumerate(read_lines(files[0]), start=1), skip, None):
        if not line.strip():  # a blank line is an empty pair, dropped later with a count
            yield {"source": "", "target": ""}
            continue
        try:
            fields = tsv_fields(line, quoted)
        except csv.Error as error:  # a field beyond csv's size limit
            raise CorpusError(f"{files[0]}, line {count}: not a quoted TSV line ({error}).") from None
        if len(fields) < expected:
            raise CorpusError(f"{files[0]}, line {count}: {len(fields)} tab-separated column(s), expected {expected}.")
        if len(fields) > width and any(field.strip() for field in fields[width:]):
            wide.append(count)
            continue
        yield {"source": fields[source_column], "target": fields[target_column]}
    if count == 0:
        raise CorpusError(f"{files[0]} is empty.")
    if wide:
        check_wide_lines(files[0], wide, count, width)


def check_wide_lines(path: Path, wide: list[int], lines: int, width: int) -> None:
    """Lines left out for holding more tab-separated fields than the file's `width`: logged, or, where they are more
    than WIDE_SHARE of its lines (a file whose columns change part-way), refused."""
    where = f"line{'s' * (len(wide) > 1)} {', '.join(map(str, wide[:5]))}{', ...' * (len(wide) > 5)}"
    if len(wide) > WIDE_SHARE * lines:
        raise CorpusError(
            f"{path}: {len(wide)} of {lines} lines hold more tab-separated fields than its first lines' {width} "
            f"({where}): tabs inside sentences, or columns that change part-way; write the file again."
        )
    logger.warning(
        "%s: %d of %d lines hold more tab-separated fields than its others' %d, a tab inside a sentence: left out (%s)",
        path, len(wide), lines, width, where,
    )  # fmt: skip


def csv_pairs(files: tuple[Path], languages: tuple[str, str]) -> Iterator[dict]:
    """Comma-separated values, as spreadsheets export them (or semicolon-separated, as Excel does in German or French
    settings): a header row names each column's language (en,de), or the source and target columns (source,target),
    and further columns are kept out."""
    path = files[0]
    rows = csv.reader(read_lines(path), delimiter=csv_delimiter(path))  # counts its lines: a field may hold a comma
    try:
        header = next(rows, None)
        if header is None:
            raise CorpusError(f"{path} is empty.")
        sides = side_columns(header, languages, f"{path}, line 1")
        if sides is None:
            raise CorpusError(
                f"{path}, line 1: no {missing_language(header, languages)!r} column (the header row names {header}; it "
                "names each column's language, or the source and target columns)."
            )
        source_column, target_column = (header.index(name) for name in sides)
        for row in rows:
            if not any(field.strip() for field in row):  # a blank line is an empty pair, dropped later with a count
                yield {"source": "", "target": ""}
                continue
            if len(row) < len(header):
                raise CorpusError(f"{path}, line {rows.line_num}: {len(row)} column(s), expected {len(header)}.")
            yield {"source": row[source_column], "target": row[target_column]}
    except csv.Error as error:  # e.g. a field beyond csv's size limit
        raise CorpusError(f"{path}, line {rows.line_num}: not CSV ({error}).") from None


def csv_delimiter(path: Path) -> str:
    """A comma, or a semicolon where the header row holds semicolons and no comma: Excel writes CSV so where a comma
    is the decimal mark (in German or French settings)."""
    header = first_line_of(path)
    return ";" if ";" in header and "," not in header else ","


def jsonl_pairs(files: tuple[Path], languages: tuple[str, str]) -> Iterator[dict]:
    """JSON records in the Hub's translation format, {"translation": {"en": "...", "de": "..."}}, or one key per
    language, {"en": "...", "de": "..."} (or per side, {"source": "...", "target": "..."}), as pandas writes a
    table's rows: one a line (JSON Lines), or all in one JSON array (`json.dump` of a list, pandas'
    `to_json(orient="records")`)."""
    for where, record in json_records(files[0]):
        pair = record.get("translation", record) if isinstance(record, dict) else record
        if not isinstance(pair, dict):
            raise CorpusError(f"{where}: a {type(pair).__name__}, not an object of translations.")
        sides = side_columns(pair, languages, where)
        if sides is None:
            raise CorpusError(
                f"{where}: no {missing_language(pair, languages)!r} translation (keys there: {sorted(pair)})."
            )
        for name in sides:
            if not isinstance(pair[name], str | None):
                raise CorpusError(f"{where}: the {name!r} translation is {pair[name]!r}, not a string.")
        # A null text (pandas writes a missing value so) is an empty one, as in a table: training drops the pair.
        yield {"source": pair[sides[0]] or "", "target": pair[sides[1]] or ""}


def json_records(path: Path) -> Iterator[tuple[str, object]]:
    """Each record of a JSON Lines file, or of a file that holds one JSON array, with where it stands ("FILE, line N"
    or "FILE, item N")."""
    text = JsonText(read_pieces(path, JSON_PIECE))  # a piece, not a line: a JSON array is often one line
    first = text.next_character()
    if not first:
        raise CorpusError(f"{path} is empty.")
    if first == "[":
        index = 0
        for index, item in enumerate(array_items(text, path), start=1):
            yield f"{path}, item {index}", item
        if not index:
            raise CorpusError(f"{path}: an empty JSON array.")
        return
    text.pieces.close()
    for number, line in enumerate(read_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:  # json's own form of the message
            raise not_json(path, (number, error.colno), error.msg) from None
        yield f"{path}, line {number}", record


def not_json(path: Path, place: tuple[int, int], message: str) -> CorpusError:
    """The error for text that is not JSON at `place` (line, column), in the form of json's own messages."""
    return CorpusError(f"{path}, line {place[0]}: not JSON ({message}: column {place[1]}).")


def array_items(text: "JsonText", path: Path) -> Iterator[object]:
    """The items of the one JSON array that `text` holds (its position at the "["), each decoded from a window of the
    text that starts at it: `json.loads` holds the whole text and builds every item at once (a million pairs' array
    in twice a JSON Lines file's memory)."""
    decoder = json.JSONDecoder()
    text.position += 1
    mark = text.next_character()
    while mark != "]":
        try:
            yield text.value(decoder)
        except json.JSONDecodeError as error:
            raise not_json(path, text.place(error.pos), error.msg) from None
        mark = text.next_character()
        if mark not in (",", "]"):
            raise not_json(path, text.place(text.position), "Expecting ',' delimiter")
        if mark == ",":
            text.position += 1
            mark = text.next_character()
            if mark == "]":  # placed where json places it ("Expecting value", before Python 3.13)
                raise not_json(path, text.place(text.position), "Illegal trailing comma before end of array")
    text.position += 1
    if text.next_character():  # JSON Lines of lists, or a second array
        raise not_json(path, text.place(text.position), "More JSON after the array (a .json file holds one)")


JSON_SPACE = re.compile(r"[ \t\n\r]*")
JSON_PIECE = 1 << 20  # the bytes of a JSON array's text read at a time


class JsonText:
    """A JSON text read from pieces of it, of which only a window is held: from the value being read on. Positions
    are the window's, places (line, column) the whole text's."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self.pieces, self.text, self.position = pieces, "", 0
        self.lines, self.column = 0, 0  # the lines before the window's first, and that line's columns before it

    def read_more(self) -> bool:
        """The next piece added to the window, and the text before the position dropped; False at the text's end."""
        piece = next(self.pieces, None)
        if piece is None:
            return False
        line, column = self.place(self.position)  # where the new window starts
        self.lines, self.column = line - 1, column - 1
        self.text, self.position = self.text[self.position :] + piece, 0
        return True

    def next_character(self) -> str:
        """The next character that is not JSON's whitespace ("" at the text's end), the position moved to it."""
        while True:
            self.position = JSON_SPACE.match(self.text, self.position).end()
            if self.position < len(self.text) or not self.read_more():
                return self.text[self.position : self.position + 1]

    def value(self, decoder: json.JSONDecoder) -> object:
        """The JSON value at the position, the position moved past it; a value cut off at the window's end is read
        again with the next piece, and json's error stands only where the text has ended."""
        while True:
            try:
                value, self.position = decoder.raw_decode(self.text, self.position)
                return value
            except json.JSONDecodeError:
                if not self.read_more():
                    raise

    def place(self, position: int) -> tuple[int, int]:
        """The line and column (from 1) in the whole text of a position in the window."""
        before = self.text[:position]
        line = self.lines + before.count("\n") + 1
        return line, position - before.rfind("\n") if "\n" in before else self.column + position + 1


def read_parquet(path: Path, languages: tuple[str, str]) -> Dataset:
    """A Parquet table, as the Hub stores datasets and pandas' `to_parquet` writes a table."""
    try:
        pq.read_schema(path)  # before datasets, which would log its own error first
    except (OSError, pa.ArrowException) as error:
        raise CorpusError(f"{path}: not a Parquet table ({first_line(error)}).") from None
    dataset = Dataset.from_parquet(str(path))
    return table_pairs(dataset, languages, str(path))


def read_excel(path: Path, languages: tuple[str, str]) -> Dataset:
    """A spreadsheet's first sheet (.xlsx, as Excel and pandas' `to_excel` write one), read by pandas with openpyxl:
    its first row names the columns, as a CSV's header row does. Every cell is read as written ("NA" and "1999" as
    text), an empty one as an empty text."""
    if importlib.util.find_spec("openpyxl") is None:
        raise MissingExtra(f"{path}: reading a spreadsheet needs openpyxl", "excel")
    try:
        table = pandas.read_excel(path, sheet_name=0, dtype=str, keep_default_na=False)
    except (ValueError, KeyError, zipfile.BadZipFile) as error:  # pandas' and openpyxl's word for a file not .xlsx
        raise CorpusError(f"{path}: not an .xlsx workbook ({first_line(error)}).") from None
    table.columns = [str(name).strip() for name in table.columns]
    return table_pairs(Dataset.from_pandas(table, preserve_index=False), languages, f"{path}, its first sheet")


def table_pairs(dataset: Dataset, languages: tuple[str, str], where: str) -> Dataset:
    """The "source"/"target" columns of a table of pairs: from its "translation" column of {language: text} (wmt14)
    or from one column per language (bentrevett/multi30k). A missing text (null) is read as an empty one, as a blank
    line of a text file is: training drops such pairs, with a count."""
    nested = "translation" in dataset.column_names
    texts = translation_languages(dataset.features["translation"]) if nested else dict(dataset.features)
    sides = side_columns(texts, languages, where)
    if sides is None and nested:
        missing = missing_language(texts, languages)
        raise CorpusError(f"{where}: its 'translation' column has no {missing!r} (languages: {sorted(texts)}).")
    if sides is None:
        raise CorpusError(
            f"{where}: no 'translation' column and no columns {languages[0]!r}/{languages[1]!r} or "
            f"'source'/'target' (columns: {dataset.column_names})."
        )
    for name in sides:
        if getattr(texts[name], "dtype", None) not in ("string", "large_string"):
            raise CorpusError(f"{where}: the {name!r} texts are of type {texts[name]}, not strings.")

    def texts_of(batch: dict, name: str) -> list[str]:
        values = [(row or {}).get(name) for row in batch["translation"]] if nested else batch[name]
        return [text or "" for text in values]

    return dataset.map(
        lambda batch: {"source": texts_of(batch, sides[0]), "target": texts_of(batch, sides[1])},
        batched=True,
        remove_columns=dataset.column_names,
        features=PAIR_FEATURES,
    )


def translation_languages(feature: object) -> dict:
    """The languages of a "translation" column, each with the type of its texts: datasets' `Translation` feature
    names them, a table's column of dicts (pandas' `to_parquet`) types each."""
    if isinstance(feature, dict):
        return dict(feature)
    return dict.fromkeys(getattr(feature, "languages", []), Value("string"))
