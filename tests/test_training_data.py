"""training.data: every kind of source, deterministic splits, and errors that name the file and line."""

import codecs
import gzip
import json
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from datasets import Dataset

from vanilla_transformer.training.data import (
    CorpusError,
    DataArguments,
    check_vocabulary_covers,
    column_texts,
    column_values,
    distinct_token_ids,
    load_parallel_corpus,
    sequence_lengths,
    tokenize_corpus,
)

from .helpers import PAIRS, word_tokenizer


def pairs_in(split: Dataset) -> list[tuple[str, str]]:
    """A split's (source, target) pairs, in order."""
    return list(zip(split["source"], split["target"], strict=True))


def write_pairs(folder, prefix, pairs, gz=False):
    for i, lang in enumerate(("en", "de")):
        text = "".join(pair[i] + "\n" for pair in pairs)
        path = folder / f"{prefix}.{lang}{'.gz' if gz else ''}"
        if gz:
            with gzip.open(path, "wt", encoding="utf-8") as f:
                f.write(text)
        else:
            path.write_text(text, encoding="utf-8")


def test_line_aligned_text_files_plain_and_gzip(tmp_path):
    write_pairs(tmp_path, "train", PAIRS, gz=True)
    write_pairs(tmp_path, "val", PAIRS[:2])
    write_pairs(tmp_path, "test_a", PAIRS[2:5])
    corpus = load_parallel_corpus(DataArguments(data_dir=str(tmp_path), test_prefixes=["test_a"]), seed=0)
    assert {split: d.num_rows for split, d in corpus.items()} == {"train": 8, "validation": 2, "test_a": 3}
    assert corpus["train"][1] == {"source": PAIRS[1][0], "target": PAIRS[1][1]}


def test_tsv_with_bom_blank_lines_and_extra_columns(tmp_path):
    path = tmp_path / "pairs.tsv"
    lines = ["\ufeff" + "\t".join([*PAIRS[0], "CC-BY #1"])] + ["\t".join([*p, "CC-BY"]) for p in PAIRS[1:]] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = DataArguments(
        source_lang="de", target_lang="en", train_file=str(path), tsv_languages=["en", "de"],
        split_validation_size=2, split_test_size=2,
    )  # fmt: skip
    corpus = load_parallel_corpus(args, seed=3)
    assert {split: d.num_rows for split, d in corpus.items()} == {"train": 4, "validation": 2, "test": 2}
    everything = [row for split in corpus.values() for row in split]
    assert {(row["target"], row["source"]) for row in everything} == set(PAIRS)  # reversed direction, BOM gone


def test_jsonl_in_the_hub_translation_format(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"translation": {"en": e, "de": d}}) + "\n" for e, d in PAIRS), "utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), test_files=[str(path)])
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"][3] == {"source": PAIRS[3][0], "target": PAIRS[3][1]}
    assert corpus["train"].num_rows == corpus["test_train"].num_rows == 8


@pytest.mark.parametrize("lines", [True, False], ids=["json-lines", "one-array"])
def test_json_of_one_key_per_language_as_pandas_writes_a_tables_rows(tmp_path, lines):
    import pandas  # datasets requires it

    path = tmp_path / ("train.jsonl" if lines else "train.json")
    table = pandas.DataFrame({"id": range(len(PAIRS)), "en": [e for e, _ in PAIRS], "de": [d for _, d in PAIRS]})
    table.to_json(path, orient="records", lines=lines, force_ascii=False)
    args = DataArguments(train_file=str(path), validation_file=str(path), test_files=[str(path)])
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"][3] == {"source": PAIRS[3][0], "target": PAIRS[3][1]}
    assert corpus["train"].num_rows == 8
    table.loc[2, "de"] = None  # a missing value, written as null: an empty text, dropped from training
    table.to_json(path, orient="records", lines=lines, force_ascii=False)
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["train"].num_rows == 7 and corpus["validation"][2] == {"source": PAIRS[2][0], "target": ""}


def test_a_json_array_of_the_hubs_records_as_json_dump_writes_it_and_its_errors(tmp_path):
    path = tmp_path / "pairs.json"
    records = [{"translation": {"en": e, "de": d}} for e, d in PAIRS]
    path.write_text("\n" + json.dumps(records, indent=2, ensure_ascii=False), encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), test_files=[str(path)])
    assert load_parallel_corpus(args, seed=0)["validation"]["source"] == [e for e, _ in PAIRS]
    records[2] = {"translation": {"en": "a"}}
    path.write_text(json.dumps(records, indent=2), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.json, item 3: no 'de' translation \(keys there: \['en'\]\)"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)
    path.write_text("\n[\n" + json.dumps(records[0]) + ",\n" + json.dumps(records[1])[:-2] + "\n]\n", "utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.json, line 5: not JSON \(Expecting ',' delimiter: column 1\)"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)
    path.write_text("[]\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.json: an empty JSON array"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)
    path.write_text(json.dumps(records[:2]) + "\n" + json.dumps(records[:2]) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.json, line 2: not JSON \(More JSON after the array \(a \.json file"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)
    path.write_text(json.dumps(records[:2])[:-1] + ",]", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"line 1: not JSON \(Illegal trailing comma before end of array"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


def test_a_json_array_is_read_a_piece_at_a_time_and_placed_errors_as_json_places_them(tmp_path, monkeypatch):
    from vanilla_transformer.training import tables

    monkeypatch.setattr(tables, "JSON_PIECE", 7)  # pieces cut items, lines and characters (ä is two bytes)
    path = tmp_path / "pairs.json"
    records = [{"translation": {"en": e, "de": d}} for e, d in PAIRS * 3]
    for text in (json.dumps(records, ensure_ascii=False), json.dumps(records, indent=2, ensure_ascii=False)):
        path.write_text(text, encoding="utf-8")
        pairs = pairs_in(
            load_parallel_corpus(
                DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0), seed=0
            )["validation"]
        )
        assert pairs == PAIRS * 3
        # Each error at the line and column where json.loads of the whole text finds it, in its words (but for a
        # second value after the array, which json calls "Extra data").
        missing_comma = re.sub(r"\}\s*,(\s*\{)", r"}\1", text, count=1)
        broken = [text[:-30] + "]", text.replace('"de"', '"de" "x"', 20), missing_comma, text + " []"]
        for document, words in zip(broken, [None, None, None, "More JSON after the array"], strict=True):
            path.write_text(document, encoding="utf-8")
            with pytest.raises(json.JSONDecodeError) as expected:
                json.loads(document)
            error = expected.value
            place = rf"line {error.lineno}: not JSON \({re.escape(words or error.msg)}.*: column {error.colno}\)"
            with pytest.raises(CorpusError, match=place):
                load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


def test_text_read_in_pieces_is_the_text_and_its_errors_name_the_line(tmp_path):
    from vanilla_transformer.training.text_files import read_pieces

    text = "ein hund läuft\r\n" + "ä" * 40 + "\nzwei männer\n"
    for encoding in ("utf-8", "utf-8-sig", "utf-16"):
        (tmp_path / "text").write_bytes(text.encode(encoding))
        assert "".join(read_pieces(tmp_path / "text", 5)) == text
    (tmp_path / "text").write_bytes(text.encode() + b"x\xff")
    with pytest.raises(CorpusError, match=r"text, line 4: not UTF-8 text \(byte 0xff at byte 2 of the line\)"):
        list(read_pieces(tmp_path / "text", 5))
    (tmp_path / "text").write_bytes(("ä" * 40).encode() + b"\xc3")  # a character cut off at the end
    with pytest.raises(CorpusError, match=r"text, line 1: not UTF-8 text \(byte 0xc3 at byte 81 of the line\)"):
        list(read_pieces(tmp_path / "text", 5))
    (tmp_path / "text").write_bytes(b"one\ntwo\nthree \x00\n")
    with pytest.raises(CorpusError, match=r"text, line 3: a NUL byte"):
        list(read_pieces(tmp_path / "text", 5))


@pytest.mark.parametrize("index", [True, False], ids=["with-row-numbers", "without"])
def test_a_tsv_header_row_that_names_both_languages_names_the_columns_as_pandas_writes_it(tmp_path, index):
    import pandas  # datasets requires it

    path = tmp_path / "pairs.tsv"
    pandas.DataFrame({"de": [d for _, d in PAIRS], "en": [e for e, _ in PAIRS]}).to_csv(path, sep="\t", index=index)
    args = DataArguments(train_file=str(path), validation_file=str(path), test_files=[str(path)])
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"]["source"] == [e for e, _ in PAIRS]  # no header pair, the columns by name
    assert corpus["validation"]["target"] == [d for _, d in PAIRS]


def test_a_spreadsheet_as_excel_and_pandas_write_it_its_cells_as_text(tmp_path):
    import pandas  # datasets requires it

    path = tmp_path / "pairs.xlsx"
    # "NA" is a word that pandas reads as a missing value by default; 1999 and 2000 are stored as numbers.
    english, german = [e for e, _ in PAIRS[:6]] + ["NA", 1999], [d for _, d in PAIRS[:6]] + ["NA", 2000]
    table = pandas.DataFrame({"de": german, "note": "", "en": english})
    table.to_excel(path, index=False)
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"]["source"] == [e for e, _ in PAIRS[:6]] + ["NA", "1999"]
    assert corpus["validation"]["target"] == [d for _, d in PAIRS[:6]] + ["NA", "2000"]
    table.rename(columns={"en": "text"}).to_excel(path, index=False)
    with pytest.raises(CorpusError, match=r"pairs\.xlsx, its first sheet: no 'translation' column and no columns 'en'"):
        load_parallel_corpus(args, seed=0)
    path.write_text("en,de\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.xlsx: not an \.xlsx workbook \("):
        load_parallel_corpus(args, seed=0)
    (tmp_path / "pairs.xls").write_bytes(b"")
    with pytest.raises(CorpusError, match=r"pairs\.xls: a spreadsheet format other than \.xlsx; save it as \.xlsx"):
        load_parallel_corpus(DataArguments(train_file=str(tmp_path / "pairs.xls")), seed=0)


def tmx(units: list[str], version: str = "1.4") -> str:
    """A TMX file of `units` (each a <tu>'s inner XML), as a translation tool exports one."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="{version}">\n'
        '  <header creationtool="test" srclang="en-US" datatype="plaintext" segtype="sentence" o-tmf="test"/>\n'
        "  <body>\n" + "".join(f"    <tu>{unit}</tu>\n" for unit in units) + "  </body>\n</tmx>\n"
    )


def tuv(code: str, text: str, attribute: str = "xml:lang") -> str:
    return f'<tuv {attribute}="{code}"><seg>{text}</seg></tuv>'


def test_a_translation_memory_as_translation_tools_and_opus_export_it(tmp_path, caplog):
    units = [tuv("en-US", e) + tuv("DE-de", d) for e, d in PAIRS]
    units[1] = tuv("de-DE", PAIRS[1][1]) + tuv("fr-FR", "deux hommes") + tuv("en-US", PAIRS[1][0])  # any order
    units.append(tuv("en-US", "a red car") + tuv("fr-FR", "une voiture rouge"))  # no German: no pair
    # Inline formatting codes (bpt/ept/ph) are the original document's, not text; highlighted text (hi) is text.
    units.append(
        tuv("en-US", 'Click <bpt i="1">&lt;b&gt;</bpt>Save<ept i="1">&lt;/b&gt;</ept> now<ph x="2">&lt;br/&gt;</ph>.')
        + tuv("de-DE", 'Klicken Sie <hi type="b">jetzt</hi> auf <bpt i="1">&lt;b&gt;</bpt>Speichern<ept i="1"/>.')
    )
    path = tmp_path / "memory.tmx.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(tmx(units))
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.tmx"):
        corpus = load_parallel_corpus(args, seed=0)
    assert pairs_in(corpus["validation"]) == [
        *PAIRS,
        ("Click Save now.", "Klicken Sie jetzt auf Speichern."),
    ]
    assert "1 of 10 translation units lack en or de; left out" in caplog.text
    # UTF-16, as some tools write it, and TMX 1.1's lang attribute.
    plain = tmp_path / "memory.tmx"
    document = tmx([tuv("EN", e, "lang") + tuv("DE", d, "lang") for e, d in PAIRS], "1.1")
    plain.write_bytes(document.replace("UTF-8", "UTF-16").encode("utf-16"))
    args = DataArguments(train_file=str(plain), validation_file=str(plain), split_test_size=0)
    assert load_parallel_corpus(args, seed=0)["validation"]["target"] == [d for _, d in PAIRS]


def refused_as(path: Path) -> Callable[..., None]:
    """A check that the document written to `path` is refused as training data with an error matching `match`."""

    def refused(document: str, match: str, **languages: str) -> None:
        path.write_text(document, encoding="utf-8")
        with pytest.raises(CorpusError, match=match):
            load_parallel_corpus(DataArguments(train_file=str(path), **languages), seed=0)

    return refused


def test_a_translation_memory_that_cannot_be_read_as_pairs_is_refused_in_one_line(tmp_path):
    path, refused = tmp_path / "memory.tmx", refused_as(tmp_path / "memory.tmx")
    units = [tuv("en", e) + tuv("de", d) for e, d in PAIRS]
    refused(tmx(units).replace("</seg></tuv></tu>", "</tuv></tu>", 1), r"memory\.tmx, line 5: not well-formed XML \(")
    refused(tmx(units).replace("tmx", "xliff"), r"memory\.tmx: its root element is <xliff>, not <tmx>\.")
    refused(tmx([]), r"memory\.tmx: no translation units \(<tu> elements")
    refused(
        tmx(units), r"memory\.tmx: no translation unit holds both en and fr \(its languages: de, en\)", target_lang="fr"
    )
    refused(tmx([units[0], "<tuv><seg>x</seg></tuv>"]), r"memory\.tmx, translation unit 2: a <tuv> without xml:lang")
    chinese = [tuv("en", "I am a student.") + tuv("zh-CN", "我是学生。") + tuv("zh-TW", "我是學生。")]
    refused(
        tmx(chinese),
        r"translation unit 1: --target_lang zh is both zh-CN and zh-TW here; name the one to train on\.",
        target_lang="zh",
    )
    units = [f"{tuv('en', e)}{tuv('zh-CN', '我是学生。')}{tuv('zh-TW', '我是學生。')}" for e, _ in PAIRS]
    path.write_text(tmx(units), encoding="utf-8")  # the code named: that segment
    args = DataArguments(train_file=str(path), target_lang="zh-tw", split_validation_size=2, split_test_size=2)
    assert set(load_parallel_corpus(args, seed=0)["train"]["target"]) == {"我是學生。"}


def xliff_12(files: list[tuple[str, str, list[str]]]) -> str:
    """An XLIFF 1.2 document of `files` (source language, target language, <trans-unit> elements), as Okapi, OmegaT
    and Trados write one."""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">\n'
        + "".join(
            f'  <file original="f{i}.html" source-language="{source}" target-language="{target}" datatype="html">\n'
            '    <header><skl><external-file href="f.skl"/></skl></header>\n    <body>\n'
            + "".join(f"      {unit}\n" for unit in units)
            + "    </body>\n  </file>\n"
            for i, (source, target, units) in enumerate(files)
        )
        + "</xliff>\n"
    )


def trans_unit(inner: str, attributes: str = "") -> str:
    return f'<trans-unit id="1"{attributes}>{inner}</trans-unit>'


def test_an_xliff_document_as_translation_tools_hand_it_on(tmp_path, caplog):
    units = [trans_unit(f"<source>{e}</source><target>{d}</target>") for e, d in PAIRS]
    # Inline codes: <g> and <mrk> hold text, <x/> and <ph> the document's formatting; <alt-trans> is a suggestion.
    units[1] = trans_unit(
        '<source>Click <g id="1">Save</g> now<x id="2"/>.</source><seg-source><mrk mtype="seg" mid="1">Click'
        '</mrk></seg-source><target state="final"><mrk mtype="seg" mid="1">Klicken Sie jetzt auf <g id="1">Speichern'
        '</g><ph id="2">&lt;br/&gt;</ph>.</mrk></target>'
        "<alt-trans><source>Click</source><target>Nein</target></alt-trans>"
    )
    units.append(trans_unit("<source>Not yet translated.</source>"))  # no target
    units.append(trans_unit('<source>Copied.</source><target state="needs-translation">Copied.</target>'))
    units.append(trans_unit("<source>ACME</source><target>ACME</target>", ' translate="no"'))
    french = [trans_unit("<source>A dog.</source><target>Un chien.</target>")]
    path = tmp_path / "project.sdlxliff"
    path.write_text(xliff_12([("en-US", "de-DE", units), ("en-US", "fr-FR", french)]), encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.xliff"):
        corpus = load_parallel_corpus(args, seed=0)
    expected = [PAIRS[0], ("Click Save now.", "Klicken Sie jetzt auf Speichern."), *PAIRS[2:]]
    assert pairs_in(corpus["validation"]) == expected
    assert "2 of 12 segments not translated; left out" in caplog.text
    assert "1 of 12 segments marked not to translate; left out" in caplog.text
    assert "1 of 12 segments not in en and de; left out" in caplog.text
    # XLIFF 2: a segment a pair, translated from German into English: read the other way round for en -> de.
    segments = "".join(f"<segment><source>{d}</source><target>{e}</target></segment>" for e, d in PAIRS)
    segments += '<segment state="initial"><source>Noch nicht.</source><target>Noch nicht.</target></segment>'
    document = '<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="de" trgLang="en"><file '
    document += f'id="f1"><unit id="u1">{segments}<ignorable><source> </source></ignorable></unit></file></xliff>'
    path = tmp_path / "document.xlf"
    path.write_text(document, encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    corpus = load_parallel_corpus(args, seed=0)
    assert pairs_in(corpus["validation"]) == PAIRS


def test_an_xliff_document_that_cannot_be_read_as_pairs_is_refused_in_one_line(tmp_path):
    refused = refused_as(tmp_path / "document.xlf")
    units = [trans_unit(f"<source>{e}</source><target>{d}</target>") for e, d in PAIRS]
    document = xliff_12([("en", "de", units)])
    refused(document.replace("</target>", "", 1), r"document\.xlf, line 6: not well-formed XML \(")
    refused(tmx([]), r"document\.xlf: its root element is <tmx>, not <xliff>\.")
    refused(xliff_12([("en", "de", [])]), r"document\.xlf: no translation units \(<trans-unit> or <unit> elements")
    refused(
        document,
        r"document\.xlf: none of its 8 segments is a translation between en and zh \(8 not in en and zh; its "
        r"languages: en→de\)\.",
        target_lang="zh",
    )
    refused(
        xliff_12([("en", "de", [trans_unit(f"<source>{e}</source><target/>") for e, _ in PAIRS])]),
        r"none of its 8 segments is a translation between en and de \(8 not translated; its languages: en→de\)",
    )
    refused(
        document.replace(' source-language="en"', ""),
        r"document\.xlf, translation unit 1: no source language named \(source-language on <file>",
    )


def po_entry(msgid: str, msgstr: str, flags: str = "") -> str:
    return f'{flags}msgid "{msgid}"\nmsgstr "{msgstr}"\n\n'


def catalogue(entries: list[str], language: str = "de") -> str:
    """A gettext catalogue of `entries`, as xgettext and msgmerge write one, its translations in `language`."""
    header = f'msgid ""\nmsgstr ""\n"Language: {language}\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
    return header + "".join(entries)


def test_a_gettext_catalogue_as_software_is_translated(tmp_path, caplog):
    entries = [f"#: src/app.c:{i}\n" + po_entry(e, d) for i, (e, d) in enumerate(PAIRS)]
    entries[1] = 'msgid ""\n"A long sentence "\n"on two lines."\nmsgstr ""\n"Ein langer Satz "\n"auf zwei Zeilen."\n\n'
    entries.append(po_entry("Not yet.", ""))  # untranslated
    entries.append(po_entry("Open", "Öffnen", "#, fuzzy\n"))  # a guess for a translator to check
    entries.append('#~ msgid "Gone"\n#~ msgstr "Weg"\n\n')  # obsolete
    entries.append('msgid "one file"\nmsgid_plural "%d files"\nmsgstr[0] "eine Datei"\nmsgstr[1] "%d Dateien"\n\n')
    path = tmp_path / "de.po"
    path.write_text(catalogue(entries), encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.gettext_files"):
        validation = load_parallel_corpus(args, seed=0)["validation"]
    expected = [PAIRS[0], ("A long sentence on two lines.", "Ein langer Satz auf zwei Zeilen."), *PAIRS[2:]]
    expected += [("one file", "eine Datei"), ("%d files", "%d Dateien")]
    assert pairs_in(validation) == expected
    assert "1 of 12 entries fuzzy; left out" in caplog.text and "1 of 12 entries not translated" in caplog.text
    # An English catalogue of a German program, for --source_lang en --target_lang de: read the other way round.
    path.write_text(catalogue([po_entry(d, e) for e, d in PAIRS], "en_US"), encoding="utf-8")
    validation = load_parallel_corpus(args, seed=0)["validation"]
    assert pairs_in(validation) == PAIRS
    # Compressed (.po.gz), in the charset its header names: Latin-1, as older catalogues are.
    latin1 = catalogue([po_entry(e, d) for e, d in PAIRS]).replace("charset=UTF-8", "charset=ISO-8859-1")
    (tmp_path / "de.po.gz").write_bytes(gzip.compress(latin1.encode("latin-1")))
    compressed = replace(args, train_file=[str(tmp_path / "de.po.gz")], validation_file=str(tmp_path / "de.po.gz"))
    assert pairs_in(load_parallel_corpus(compressed, seed=0)["validation"]) == PAIRS
    refused = refused_as(path)
    refused(catalogue([po_entry(e, d) for e, d in PAIRS], "fr"), r"de\.po: its translations are in fr \(its Language")
    refused(catalogue([po_entry(e, "") for e, _ in PAIRS]), r"de\.po: none of its 8 entries is translated")
    refused('msgid "a"\nmsgstr "b"\nmsgid', r"de\.po, line 3: not a gettext catalogue \(a syntax error\)\.")


@pytest.mark.parametrize(
    "suffix, names",
    [(".tsv", ("source", "target")), (".csv", ("src", "tgt")), (".jsonl", ("source", "target")),
     (".parquet", ("src", "tgt")), (".xlsx", ("source", "target"))],
)  # fmt: skip
def test_columns_named_source_and_target_instead_of_by_language(tmp_path, suffix, names):
    import pandas  # datasets requires it

    path = tmp_path / f"pairs{suffix}"
    table = pandas.DataFrame({names[1]: [d for _, d in PAIRS], names[0]: [e for e, _ in PAIRS]})
    write = {
        ".tsv": lambda: table.to_csv(path, sep="\t", index=False),  # its header row was read as a pair
        ".csv": lambda: table.to_csv(path, index=False),
        ".jsonl": lambda: table.to_json(path, orient="records", lines=True, force_ascii=False),
        ".parquet": lambda: table.to_parquet(path),
        ".xlsx": lambda: table.to_excel(path, index=False),
    }
    write[suffix]()
    args = DataArguments(train_file=str(path), validation_file=str(path), test_files=[str(path)])
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"]["source"] == [e for e, _ in PAIRS]
    assert corpus["validation"]["target"] == [d for _, d in PAIRS]


QUOTES = [
    ('He said "hi".', "Er sagte „hallo“."),
    ('"Yes," she said.', '"Ja", sagte sie.'),
    ('"More coffee?" "No, thanks."', '"Noch Kaffee?" "Nein, danke."'),
]


@pytest.mark.parametrize("header", [True, False], ids=["header", "no-header"])
def test_a_tsv_that_pandas_wrote_is_unquoted_and_one_written_as_is_is_read_as_is(tmp_path, header):
    import pandas  # datasets requires it

    path, pairs = tmp_path / "pairs.tsv", QUOTES + PAIRS
    table = pandas.DataFrame({"en": [e for e, _ in pairs], "de": [d for _, d in pairs]})
    table.to_csv(path, sep="\t", index=False, header=header)  # '"""Yes,"" she said."'
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == pairs
    # Its first quotes after its first thousand lines (they were read with their quotes doubled).
    late = PAIRS * (1000 // len(PAIRS) + 1) + QUOTES
    pandas.DataFrame({"en": [e for e, _ in late], "de": [d for _, d in late]}).to_csv(
        path, sep="\t", index=False, header=header
    )
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"])[-len(QUOTES) :] == QUOTES
    # Tatoeba's quotes as they are written, a field's first and last characters among them.
    path.write_text("".join(f"{e}\t{d}\n" for e, d in pairs), encoding="utf-8")
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == pairs


def test_a_csv_of_semicolons_as_excel_writes_it_in_german_settings(tmp_path):
    path = tmp_path / "pairs.csv"
    pairs = [("Yes; no.", "Ja; nein."), ("A dog, a cat.", "Ein Hund, eine Katze."), *PAIRS]
    path.write_text("de;en\r\n" + "".join(f'"{d}";"{e}"\r\n' for e, d in pairs), encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == pairs
    path.write_text("en,de\n" + "".join(f'"{e}","{d}"\n' for e, d in pairs), encoding="utf-8")  # commas: as before
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == pairs


def test_several_training_files_of_any_kinds_are_joined_in_order_each_checked_on_its_own(tmp_path):
    from vanilla_transformer.training.arguments import parse_arguments

    tsv, jsonl, chinese = tmp_path / "a.tsv", tmp_path / "b.jsonl", tmp_path / "c.tsv"
    tsv.write_text("".join(f"{e}\t{d}\n" for e, d in PAIRS[:5]), encoding="utf-8")
    jsonl.write_text("".join(json.dumps({"de": d, "en": e}) + "\n" for e, d in PAIRS[5:]), encoding="utf-8")
    argv = ["--train_file", str(tsv), str(jsonl), "--validation_file", str(tsv), "--output_dir", str(tmp_path / "r")]
    args = parse_arguments(argv)[1]
    assert args.train_file == [str(tsv), str(jsonl)] and args.data_source == f"{tsv} {jsonl}"
    corpus = load_parallel_corpus(replace(args, split_test_size=0), seed=0)
    assert pairs_in(corpus["train"]) == PAIRS
    # One file of them with its languages the other way round is named, though the first 1,000 pairs are another's.
    chinese.write_text("".join(f"{zh}\t{en}\n" for zh, en in ZH_EN), encoding="utf-8")
    tsv.write_text("".join(f"{en}\t{zh}\n" for zh, en in ZH_EN * 300), encoding="utf-8")
    args = DataArguments(train_file=[str(tsv), str(chinese)], source_lang="en", target_lang="zh")
    with pytest.raises(CorpusError, match=r"c\.tsv: the text read as --source_lang en is in Chinese characters"):
        load_parallel_corpus(args, seed=0)
    assert DataArguments(train_file=str(tsv)).train_file == [str(tsv)]  # a config's one file, a report's


@pytest.mark.parametrize("names", [("EN", "DE"), ("en-US", "de_DE"), ("eng", "deu"), ("English", "German")])
def test_columns_named_by_codes_as_people_and_tools_write_them(tmp_path, names):
    import pandas  # datasets requires it

    table = pandas.DataFrame({names[1]: [d for _, d in PAIRS], names[0]: [e for e, _ in PAIRS]})
    table.to_csv(tmp_path / "pairs.tsv", sep="\t", index=False)  # an English header row was read as a pair
    path = tmp_path / "pairs.csv"
    table.to_csv(path, index=False)
    for file in (path, tmp_path / "pairs.tsv"):
        args = DataArguments(train_file=str(file), validation_file=str(file), split_test_size=0)
        assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == PAIRS
    # A TSV without a header row, its columns' languages named as the file names them.
    (tmp_path / "pairs.tsv").write_text("".join(f"{d}\t{e}\n" for e, d in PAIRS), encoding="utf-8")
    args = replace(args, tsv_languages=list(reversed(names)))
    assert pairs_in(load_parallel_corpus(args, seed=0)["validation"]) == PAIRS
    pandas.DataFrame({"en": ["a"], "de-DE": ["b"], "de-AT": ["c"]}).to_csv(path, index=False)  # which German?
    with pytest.raises(CorpusError, match=r"pairs\.csv, line 1: columns de-DE and de-AT are both de; name one \("):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


def test_a_column_of_row_numbers_read_as_a_language_is_refused_with_the_columns_to_name(tmp_path):
    tsv, csv_file = tmp_path / "pairs.tsv", tmp_path / "pairs.csv"
    tsv.write_text("".join(f"{i}\t{e}\t{d}\n" for i, (e, d) in enumerate(PAIRS)), encoding="utf-8")
    with pytest.raises(
        CorpusError,
        match=r"pairs\.tsv: 8 of the first 8 texts read as --source_lang en hold no letter \('0', '1', '2'\): a "
        r"column of row numbers or ids\? Name every column in order, that one too \(row numbers first: "
        r"--tsv_languages id en de\)\.",
    ):
        load_parallel_corpus(DataArguments(train_file=str(tsv), split_validation_size=2, split_test_size=2), seed=0)
    args = DataArguments(
        train_file=str(tsv), split_validation_size=2, split_test_size=2, tsv_languages=["id", "en", "de"]
    )
    assert set(load_parallel_corpus(args, seed=0)["train"]["target"]) < {d for _, d in PAIRS}
    csv_file.write_text("en,de\n" + "".join(f"{e},{i}\n" for i, (e, _) in enumerate(PAIRS)), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"texts read as --target_lang de hold no letter .* the data names 'de'"):
        load_parallel_corpus(DataArguments(train_file=str(csv_file)), seed=0)
    # A few texts without letters (numbers, prices) are a corpus's own.
    tsv.write_text("".join(f"{e}\t{d}\n" for e, d in PAIRS[:6]) + "1999\t1999\n42 €\t42 €\n", encoding="utf-8")
    load_parallel_corpus(DataArguments(train_file=str(tsv), split_validation_size=2, split_test_size=2), seed=0)


def test_parquet_tables_as_files_and_as_a_local_dataset_with_their_nulls_and_errors(tmp_path, caplog):
    import pandas  # datasets requires it

    english, german = [e for e, _ in PAIRS], [d for _, d in PAIRS]
    columns = pandas.DataFrame({"de": german, "en": english})
    nested = pandas.DataFrame({"translation": [{"en": e, "de": d} for e, d in PAIRS]})
    for name, table in (("columns", columns), ("nested", nested)):
        table.to_parquet(tmp_path / f"{name}.parquet")
        path = str(tmp_path / f"{name}.parquet")
        corpus = load_parallel_corpus(DataArguments(train_file=path, validation_file=path, test_files=[path]), seed=0)
        assert corpus["validation"]["source"] == english and corpus[f"test_{name}"]["target"] == german

    # A folder of Parquet splits, as the Hub stores a dataset: a null text is an empty one, dropped from training.
    (tmp_path / "hub").mkdir()
    columns.assign(de=[None] + german[1:]).to_parquet(tmp_path / "hub" / "train.parquet")
    columns.to_parquet(tmp_path / "hub" / "validation.parquet")
    args = DataArguments(dataset_name=str(tmp_path / "hub"), split_test_size=2)
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["train"].num_rows == len(PAIRS) - 1 - 2 and corpus["validation"]["source"] == english
    nested.to_parquet(tmp_path / "hub" / "train.parquet")
    with pytest.raises(CorpusError, match=r"hub: cannot be read \(\S+hub/\w+\.parquet: Couldn't cast .* because"):
        load_parallel_corpus(args, seed=0)  # one split of one key per language, the other of a translation column
    assert "Failed to read" not in caplog.text  # datasets' own dozen lines, held back
    (tmp_path / "hub" / "validation.parquet").unlink()
    nested.assign(translation=[{"en": e, "fr": d} for e, d in PAIRS]).to_parquet(tmp_path / "hub" / "train.parquet")
    with pytest.raises(
        CorpusError, match=r"split train: its 'translation' column has no 'de' \(languages: \['en', 'fr'\]\)"
    ):
        load_parallel_corpus(args, seed=0)
    columns.assign(de=range(len(PAIRS))).to_parquet(tmp_path / "hub" / "train.parquet")
    with pytest.raises(
        CorpusError, match=r"hub, split train: the 'de' texts are of type Value\('int64'\), not strings"
    ):
        load_parallel_corpus(args, seed=0)
    (tmp_path / "pairs.parquet").write_text("en\tde\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.parquet: not a Parquet table \("):
        load_parallel_corpus(DataArguments(train_file=str(tmp_path / "pairs.parquet")), seed=0)


def test_folders_that_save_to_disk_wrote_are_read_in_place(tmp_path):
    from datasets import Dataset, DatasetDict

    english, german = [e for e, _ in PAIRS], [d for _, d in PAIRS]
    nested = Dataset.from_dict({"translation": [{"en": e, "de": d} for e, d in PAIRS]})
    nested.save_to_disk(tmp_path / "one")  # a single Dataset, which load_dataset refuses: the training split
    corpus = load_parallel_corpus(
        DataArguments(dataset_name=str(tmp_path / "one"), split_validation_size=2, split_test_size=2), seed=0
    )
    assert corpus["train"].num_rows == len(PAIRS) - 4 and set(corpus["test"]["target"]) < set(german)
    columns = Dataset.from_dict({"de": german, "en": english})
    DatasetDict(train=columns, validation=columns.select(range(2))).save_to_disk(tmp_path / "splits")
    args = DataArguments(dataset_name=str(tmp_path / "splits"), split_test_size=2)
    corpus = load_parallel_corpus(args, seed=0)
    assert corpus["validation"]["source"] == english[:2] and corpus["train"].num_rows == len(PAIRS) - 2
    args.dataset_config_name = "de-en"
    with pytest.raises(
        CorpusError,
        match=r"splits: a folder that save_to_disk wrote has no configurations; leave out "
        r"--dataset_config_name de-en\.$",
    ):
        load_parallel_corpus(args, seed=0)


def test_a_datasets_splits_named_as_datasets_names_them(tmp_path, caplog):
    from datasets import Dataset, DatasetDict

    pairs = Dataset.from_dict({"en": [e for e, _ in PAIRS], "de": [d for _, d in PAIRS]})
    DatasetDict(training=pairs, dev=pairs.select(range(2)), devtest=pairs.select(range(2, 4))).save_to_disk(
        tmp_path / "flores"
    )
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.data"):
        corpus = load_parallel_corpus(DataArguments(dataset_name=str(tmp_path / "flores")), seed=0)
    assert sorted(corpus) == ["devtest", "train", "validation"] and corpus["train"].num_rows == len(PAIRS)
    assert corpus["validation"]["target"] == [d for _, d in PAIRS[:2]]  # nothing held out of the training pairs
    assert "split 'dev' is the validation split" in caplog.text
    DatasetDict(dev=pairs, devtest=pairs).save_to_disk(tmp_path / "evaluation")
    with pytest.raises(CorpusError, match=r"evaluation: no training split \(its splits: dev, devtest\)\.$"):
        load_parallel_corpus(DataArguments(dataset_name=str(tmp_path / "evaluation")), seed=0)


def test_held_out_splits_are_deterministic_for_a_seed(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"english {i}\tdeutsch {i}\n" for i in range(60)), encoding="utf-8")
    args = DataArguments(train_file=str(path), split_validation_size=5, split_test_size=5)
    first, again = load_parallel_corpus(args, seed=7), load_parallel_corpus(args, seed=7)
    other = load_parallel_corpus(args, seed=8)
    assert first["test"]["source"] == again["test"]["source"] != other["test"]["source"]
    assert not set(first["test"]["source"]) & set(first["train"]["source"])


def test_held_out_splits_share_no_source_sentence_with_the_training_pairs(tmp_path, caplog):
    # Each sentence three times, each time with a translation of its own, as Tatoeba holds many.
    pairs = [(f"english {i}", f"deutsch {i} {n}") for n in range(3) for i in range(40)]
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{en}\t{de}\n" for en, de in pairs), encoding="utf-8")
    args = DataArguments(train_file=str(path), split_validation_size=6, split_test_size=6)
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.data"):
        corpus = load_parallel_corpus(args, seed=7)
    held = {source for split in ("validation", "test") for source in corpus[split]["source"]}
    unseen = [pair for pair in pairs if pair[0] not in held]
    assert sorted(pairs_in(corpus["train"])) == sorted(unseen)
    dropped = len(pairs) - 12 - len(unseen)
    assert dropped > 0 and f"Dropped {dropped} training pairs whose source sentence is held out too" in caplog.text


def test_files_of_different_lengths_name_both_files_and_the_line(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    (tmp_path / "train.de").write_text("".join(p[1] + "\n" for p in PAIRS[:6]), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"train\.en has 8 lines but .*train\.de has 6.*line 7"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), validation_prefix=None), seed=0)


def test_a_data_dir_that_is_not_there_is_named_with_the_folder_it_was_looked_for_in(tmp_path, monkeypatch):
    """A shipped config's relative `data_dir` (smoke's examples/tiny) is read from where vt-train runs, which after a
    pip install is not the repository: the error says where it looked, not only which file it missed."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CorpusError, match=rf"^--data_dir examples/tiny: no such folder in {tmp_path} \(a relative"):
        load_parallel_corpus(DataArguments(data_dir="examples/tiny"), seed=0)
    with pytest.raises(CorpusError, match=rf"^--data_dir {tmp_path / 'nowhere'}: no such folder\.$"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path / "nowhere")), seed=0)
    (tmp_path / "pairs").write_text("", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"^--data_dir pairs: a file; give the folder"):
        load_parallel_corpus(DataArguments(data_dir="pairs"), seed=0)


def test_unknown_language_codes_are_named(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    with pytest.raises(CorpusError, match=r"language code 'fr'.*found for .*train: de, en"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), target_lang="fr"), seed=0)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.tsv: unknown language code 'zh'"):
        load_parallel_corpus(DataArguments(train_file=str(tsv), target_lang="zh", tsv_languages=["en", "de"]), seed=0)
    jsonl = tmp_path / "pairs.jsonl"
    jsonl.write_text(json.dumps({"translation": {"en": "a", "de": "b"}}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.jsonl, line 1: no 'fr' translation \(keys there: \['de', 'en'\]\)"):
        load_parallel_corpus(DataArguments(train_file=str(jsonl), target_lang="fr"), seed=0)


def test_a_tsv_line_without_a_tab_names_the_file_and_line(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a dog\tein hund\nno tab on this line\nthe cat\tdie katze\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.tsv, line 2: 1 tab-separated column\(s\), expected 2"):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


def test_a_missing_jsonl_translation_names_the_line(tmp_path):
    path = tmp_path / "pairs.jsonl"
    rows = [{"translation": {"en": "a", "de": "b"}}, {"translation": {"en": "c"}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.jsonl, line 2: no 'de' translation"):
        load_parallel_corpus(DataArguments(train_file=str(path), validation_file=str(path)), seed=0)


def test_an_empty_training_set_is_an_error(tmp_path):
    write_pairs(tmp_path, "train", [("", ""), ("  ", "x")])
    write_pairs(tmp_path, "val", PAIRS[:1])
    with pytest.raises(CorpusError, match="training set is empty"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), test_prefixes=["val"]), seed=0)


def test_empty_and_over_long_training_pairs_are_dropped_with_a_count(tmp_path, caplog):
    long_pair = (" ".join(["dog"] * 40), "hund")
    write_pairs(tmp_path, "train", [*PAIRS, ("", "leer"), long_pair])
    write_pairs(tmp_path, "val", [long_pair])
    args = DataArguments(data_dir=str(tmp_path), test_prefixes=["val"], max_source_length=20)
    with caplog.at_level(logging.INFO, logger="vanilla_transformer.training.data"):
        corpus = load_parallel_corpus(args, seed=0)
        tokenized = tokenize_corpus(corpus, word_tokenizer([s for p in PAIRS for s in p] + ["dog hund"]), args)
    assert "Dropped 1 empty pairs from train" in caplog.text
    assert "Dropped 1 training pairs longer than 20 source / 256 target tokens" in caplog.text
    assert tokenized["train"].num_rows == 8
    assert tokenized["validation"].num_rows == 1  # evaluation sets stay whole


def test_the_tokenized_corpus_has_the_ids_the_tokenizer_gives_at_translation_time(tmp_path):
    from vanilla_transformer.training.tokenizer import VocabularySettings, train_tokenizer

    write_pairs(tmp_path, "train", PAIRS)
    write_pairs(tmp_path, "val", PAIRS[:2])
    args = DataArguments(data_dir=str(tmp_path), test_prefixes=["val"])
    corpus = load_parallel_corpus(args, seed=0)
    tokenizer = train_tokenizer([s for p in PAIRS for s in p] * 20, VocabularySettings(vocab_size=120))
    tokenized = tokenize_corpus(corpus, tokenizer, args)
    for split in ("train", "validation"):
        expected = tokenizer(corpus[split]["source"][:], text_target=corpus[split]["target"][:])
        assert column_values(tokenized[split], "input_ids") == expected["input_ids"]
        assert column_values(tokenized[split], "labels") == expected["labels"]
        assert "attention_mask" not in tokenized[split].column_names  # the collator makes each batch's masks
    # A tokenizer saved after a padded or a truncated call keeps that setting in its tokenizer.json.
    for setting in ({"padding": True}, {"truncation": True, "max_length": 3}):
        tokenizer(corpus["train"]["source"][:], **setting)
        tokenizer.save_pretrained(tmp_path / "saved")
        saved = type(tokenizer).from_pretrained(tmp_path / "saved")
        assert saved.backend_tokenizer.padding or saved.backend_tokenizer.truncation
        again = tokenize_corpus(corpus, saved, args)
        assert column_values(again["train"], "input_ids") == column_values(tokenized["train"], "input_ids")


def test_tokenized_columns_are_read_in_place_with_the_rows_a_filter_left(tmp_path):
    long_pair = (" ".join(["dog"] * 40), "hund")
    write_pairs(tmp_path, "train", [long_pair, *PAIRS, long_pair])
    write_pairs(tmp_path, "val", PAIRS[:1])
    args = DataArguments(data_dir=str(tmp_path), test_prefixes=["val"], max_source_length=20)
    tokenizer = word_tokenizer([s for p in PAIRS for s in p] + ["dog hund"])
    train = tokenize_corpus(load_parallel_corpus(args, seed=0), tokenizer, args)["train"]  # the long pairs filtered out
    for column in ("input_ids", "labels"):
        rows = column_values(train, column)
        assert sequence_lengths(train, column) == [len(ids) for ids in rows]
        assert sorted(distinct_token_ids(train, column)) == sorted({token for ids in rows for token in ids})
    texts = column_values(train, "source")
    assert len(texts) == len(PAIRS) and list(column_texts(train, "source", batch_size=3)) == texts


def test_a_fine_tune_is_refused_where_its_vocabulary_cannot_write_a_tenth_of_one_sides_sentences(tmp_path):
    from vanilla_transformer.training.tokenizer import VocabularySettings, train_tokenizer

    tokenizer = train_tokenizer([s for p in PAIRS for s in p] * 20, VocabularySettings(vocab_size=120))
    french = ("a boy eats", "un garçon mange")  # no token for ç in a vocabulary of English and German
    too_long = (" ".join(["dog"] * 40), "ça")  # dropped by the length limit: not one of the sentences trained on

    def check(name: str, pairs: list[tuple[str, str]]) -> None:
        folder = tmp_path / name
        folder.mkdir()
        write_pairs(folder, "train", pairs)
        write_pairs(folder, "val", PAIRS[:1])
        args = DataArguments(data_dir=str(folder), test_prefixes=["val"], max_source_length=30)
        train = tokenize_corpus(load_parallel_corpus(args, seed=0), tokenizer, args)["train"]
        check_vocabulary_covers(train, tokenizer, args, "runs/model")

    check("few", [*PAIRS * 3, french, too_long, french])  # 2 of the 26 sentences trained on
    with pytest.raises(CorpusError, match=r"characters of 2 of the 10 training target sentences \(de\); .*'ç' \(2\)"):
        check("many", [*PAIRS, french, french])
    with pytest.raises(CorpusError, match=r"characters of 2 of the 10 training source sentences \(en\)"):
        check("sources", [*PAIRS, french[::-1], french[::-1]])


# Text as it really comes: stray line separators, byte-order marks, other encodings, cut-off files ------------------


def test_a_test_split_of_size_0_holds_out_nothing_and_a_negative_size_is_refused(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    write_pairs(tmp_path, "val", PAIRS[:2])
    corpus = load_parallel_corpus(DataArguments(data_dir=str(tmp_path), split_test_size=0), seed=0)
    assert {split: d.num_rows for split, d in corpus.items()} == {"train": 8, "validation": 2}
    with pytest.raises(CorpusError, match="--split_test_size -1: must be at least 0"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), split_test_size=-1), seed=0)


def test_a_carriage_return_or_unicode_separator_inside_a_line_does_not_shift_the_pairs(tmp_path):
    pairs = [(f"sentence {i}", f"satz {i}") for i in range(40)]
    pairs[3] = ("a line with a lone \r inside", "eine zeile")
    pairs[5] = ("a line with \u2028 and \x85 and \x0c", "noch eine")
    (tmp_path / "train.en").write_bytes("".join(s + "\r\n" for s, _ in pairs).encode())  # Windows line ends
    (tmp_path / "train.de").write_bytes("".join(t + "\n" for _, t in pairs).encode())
    args = DataArguments(data_dir=str(tmp_path), validation_prefix=None, split_validation_size=5, split_test_size=5)
    corpus = load_parallel_corpus(args, seed=0)
    rows = {row["target"]: row["source"] for split in corpus.values() for row in split}
    assert rows == {t: s for s, t in pairs}


def test_a_byte_order_mark_is_not_part_of_the_first_sentence(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    (tmp_path / "train.en").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "train.en").read_bytes())
    write_pairs(tmp_path, "val", PAIRS[:2])
    (tmp_path / "val.en").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "val.en").read_bytes())
    corpus = load_parallel_corpus(DataArguments(data_dir=str(tmp_path), test_prefixes=["val"]), seed=0)
    assert corpus["validation"][0]["source"] == PAIRS[0][0]
    assert PAIRS[0][0] in corpus["train"]["source"]


def test_a_changed_file_is_read_again_not_taken_from_the_cache(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    write_pairs(tmp_path, "test", PAIRS)
    args = DataArguments(data_dir=str(tmp_path), validation_prefix="test", test_prefixes=["test"])
    assert load_parallel_corpus(args, seed=0)["train"][0]["source"] == PAIRS[0][0]
    write_pairs(tmp_path, "train", [("changed", "geändert"), *PAIRS[1:]])
    assert load_parallel_corpus(args, seed=0)["train"][0]["source"] == "changed"


def test_a_file_cached_by_another_version_of_the_readers_is_read_again(tmp_path, monkeypatch):
    from vanilla_transformer.training import cached_pairs

    (tmp_path / "pairs.txt").write_text("one\n", encoding="utf-8")
    read = ["first"]

    def one_pair(files: tuple[Path]) -> Iterator[dict]:
        yield {"source": read[0], "target": read[0]}

    assert cached_pairs.pairs_dataset(one_pair, (tmp_path / "pairs.txt",))["source"][:] == ["first"]
    read[0] = "second"  # the same readers' code: the cache answers
    assert cached_pairs.pairs_dataset(one_pair, (tmp_path / "pairs.txt",))["source"][:] == ["first"]
    monkeypatch.setattr(cached_pairs, "reader_code", lambda: "another version")
    assert cached_pairs.pairs_dataset(one_pair, (tmp_path / "pairs.txt",))["source"][:] == ["second"]


def test_a_tsv_line_split_by_a_tab_inside_a_sentence_is_left_out_with_a_warning(tmp_path, caplog):
    # As `paste train.en train.de` writes it where a sentence holds a tab (Multi30K's German line 7366 does).
    pairs = PAIRS * 20
    lines = [f"{e}\t{d}" for e, d in pairs]
    lines[5] = "Zwei Männer\tspielen.\tTwo men play."
    path = tmp_path / "pasted.tsv"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    args = DataArguments(train_file=str(path), validation_file=str(path), split_test_size=0)
    with caplog.at_level(logging.WARNING, logger="vanilla_transformer.training.tables"):
        validation = load_parallel_corpus(args, seed=0)["validation"]
    assert pairs_in(validation) == pairs[:5] + pairs[6:]
    assert (
        "1 of 160 lines hold more tab-separated fields than its others' 2, a tab inside a sentence: left out (line 6)"
        in caplog.text
    )
    # A trailing tab holds nothing: the line is read.
    path.write_text("".join(line + "\t" * (i == 5) + "\n" for i, line in enumerate(lines[:5] * 2)), encoding="utf-8")
    assert load_parallel_corpus(args, seed=0)["validation"].num_rows == 10
    # Many such lines: the columns change part-way; refused.
    rows = [f"{e}\t{d}\n" for e, d in pairs * 8] + [f"{e}\t{d}\tCC-BY\n" for e, d in pairs]
    path.write_text("".join(rows), encoding="utf-8")
    with pytest.raises(
        CorpusError,
        match=r"pasted\.tsv: 160 of 1440 lines hold more tab-separated fields than its "
        r"first lines' 2 \(lines 1281, 1282, 1283, 1284, 1285, \.\.\.\): tabs inside sentences, or",
    ):
        load_parallel_corpus(args, seed=0)


def test_utf16_text_as_excel_saves_unicode_text_and_notepad_saves_unicode(tmp_path):
    pairs = [*PAIRS, ('He said "hi".', "Er sagte „hallo“."), ("A line\u2028break.", "Ein Zeilen\u2028umbruch.")]
    # Excel's "Unicode Text": UTF-16 with its byte-order mark, tabs, CRLF, a field with quotes in quotes, doubled.
    rows = ["en\tde", *(f"{e}\t{d}" for e, d in pairs)]
    rows[-2] = '"He said ""hi""."\tEr sagte „hallo“.'
    (tmp_path / "pairs.txt").write_bytes("".join(row + "\r\n" for row in rows).encode("utf-16"))
    path = str(tmp_path / "pairs.txt")
    corpus = load_parallel_corpus(DataArguments(train_file=path, validation_file=path, split_test_size=0), seed=0)
    assert pairs_in(corpus["validation"]) == pairs
    # Line-aligned files, one in UTF-16 big-endian.
    write_pairs(tmp_path, "train", pairs)
    (tmp_path / "train.de").write_bytes(codecs.BOM_UTF16_BE + "".join(d + "\n" for _, d in pairs).encode("utf-16-be"))
    args = DataArguments(data_dir=str(tmp_path), validation_prefix="train", split_test_size=0)
    corpus = load_parallel_corpus(args, seed=0)
    assert pairs_in(corpus["validation"]) == pairs


@pytest.mark.parametrize(
    "content, message",
    [
        (b"ok\n\xff\xfe broken\n", r"train\.en, line 2: not UTF-8 text \(byte 0xff at byte 1 of the line\)"),
        ("ok\n".encode("utf-16") + b"\x00\xd8A\x00\n\x00", r"train\.en: not UTF-16 text \(illegal UTF-16 surrogate\)"),
        (b"text\nbinary \x00\x01\x02\n", r"train\.en, line 2: a NUL byte; this is binary data"),
        (b"", r"train\.de has 8 lines but .*train\.en has 0"),
    ],
    ids=["invalid-utf8", "invalid-utf16", "binary", "empty"],
)
def test_text_that_cannot_be_read_names_the_file_and_line(tmp_path, content, message):
    write_pairs(tmp_path, "train", PAIRS)
    (tmp_path / "train.en").write_bytes(content)
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), validation_prefix=None), seed=0)


def test_empty_files_and_a_cut_off_gzip_file_are_named(tmp_path):
    write_pairs(tmp_path, "train", [])
    with pytest.raises(CorpusError, match=r"train\.en and .*train\.de are empty"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), validation_prefix=None), seed=0)
    write_pairs(tmp_path, "cut", PAIRS * 50, gz=True)
    for lang in ("en", "de"):
        whole = (tmp_path / f"cut.{lang}.gz").read_bytes()
        (tmp_path / f"cut.{lang}.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CorpusError, match=r"cut\.(en|de)\.gz: not a complete gzip file"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), train_prefix="cut", validation_prefix=None), seed=0)
    for suffix in (".tsv", ".jsonl"):
        (tmp_path / f"empty{suffix}").write_bytes(b"")
        with pytest.raises(CorpusError, match=rf"empty{suffix} is empty"):
            load_parallel_corpus(DataArguments(train_file=str(tmp_path / f"empty{suffix}")), seed=0)


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"translation": {"en": "a", "de": 5}}', r"line 2: the 'de' translation is 5, not a string"),
        ('{"translation": {"en": "a", "de": ["b"]}}', r"line 2: the 'de' translation is \['b'\], not a string"),
        ('{"translation": {"en": "a"}}', r"line 2: no 'de' translation \(keys there: \['en'\]\)"),
        ('{"translation": {"en": "a", "de": "b', r"line 2: not JSON \(Unterminated string starting at: column 35\)"),
        ('{"translation": {"en": "a", "de": "b"}', r"line 2: not JSON \(Expecting ',' delimiter: column 39\)"),
        ('["en", "de"]', r"line 2: a list, not an object of translations"),
        ('{"translation": "a"}', r"line 2: a str, not an object of translations"),
        ('{"en": "a", "fr": "b"}', r"line 2: no 'de' translation \(keys there: \['en', 'fr'\]\)"),
    ],
)
def test_bad_jsonl_values_name_the_line(tmp_path, line, message):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"translation": {"en": "x", "de": "y"}}) + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


def test_exactly_one_data_source_and_positive_sizes(tmp_path):
    with pytest.raises(CorpusError, match=r"exactly one of .* \(got none\)"):
        load_parallel_corpus(DataArguments(), seed=0)
    with pytest.raises(CorpusError, match=r"got --data_dir d and --train_file t\.tsv"):
        load_parallel_corpus(DataArguments(data_dir="d", train_file="t.tsv"), seed=0)
    with pytest.raises(CorpusError, match="--max_source_length 0: must be at least 1"):
        load_parallel_corpus(DataArguments(data_dir="d", max_source_length=0), seed=0)
    with pytest.raises(CorpusError, match="--max_train_samples 0: must be at least 1"):
        load_parallel_corpus(DataArguments(data_dir="d", max_train_samples=0), seed=0)


def test_a_length_limit_that_drops_every_pair_is_an_error_not_an_empty_run(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    write_pairs(tmp_path, "test", PAIRS)
    args = DataArguments(data_dir=str(tmp_path), validation_prefix="test", test_prefixes=["test"], max_source_length=2)
    corpus = load_parallel_corpus(args, seed=0)
    with pytest.raises(CorpusError, match=r"All 8 training pairs are longer than --max_source_length 2 .*has 4 tokens"):
        tokenize_corpus(corpus, word_tokenizer([s for p in PAIRS for s in p]), args)


def test_the_literature_preprocessing_lowercases_and_tokenizes_every_split(tmp_path):
    pairs = [("A man's dog runs.", "Der Hund eines Mannes läuft."), ("Two kids, one ball!", "Zwei Kinder, ein Ball!")]
    for prefix in ("train", "val", "test_a"):
        write_pairs(tmp_path, prefix, pairs)
    args = DataArguments(data_dir=str(tmp_path), test_prefixes=["test_a"], preprocess="lowercase_tokenized")
    corpus = load_parallel_corpus(args, seed=0)
    for split in ("train", "validation", "test_a"):
        assert corpus[split][0] == {"source": "a man 's dog runs .", "target": "der hund eines mannes läuft ."}
        assert corpus[split][1] == {"source": "two kids , one ball !", "target": "zwei kinder , ein ball !"}
    untouched = load_parallel_corpus(DataArguments(data_dir=str(tmp_path), test_prefixes=["test_a"]), seed=0)
    assert untouched["test_a"][0]["source"] == "A man's dog runs."
    with pytest.raises(CorpusError, match="--preprocess 'lowercase': use one of none, lowercase_tokenized"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), preprocess="lowercase"), seed=0)


def test_csv_with_a_header_row_of_languages_quoted_commas_and_extra_columns(tmp_path):
    path = tmp_path / "pairs.csv"
    rows = ["\ufeffid,de,en", *(f'{n},"{de}","{en}, too"' for n, (en, de) in enumerate(PAIRS)), ""]
    path.write_text("\r\n".join(rows), encoding="utf-8")  # as a spreadsheet on Windows writes it
    args = DataArguments(train_file=str(path), split_validation_size=2, split_test_size=2)
    corpus = load_parallel_corpus(args, seed=3)
    assert {split: d.num_rows for split, d in corpus.items()} == {"train": 4, "validation": 2, "test": 2}
    everything = {(row["source"], row["target"]) for split in corpus.values() for row in split}
    assert everything == {(f"{en}, too", de) for en, de in PAIRS}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("en,fr\na,b\n", r"pairs\.csv, line 1: no 'de' column \(the header row names \['en', 'fr'\]"),
        ('en,de\na,b\n"c\n', r"pairs\.csv, line 3: 1 column\(s\), expected 2"),
        ("", r"pairs\.csv is empty"),
    ],
)
def test_bad_csv_names_the_line(tmp_path, text, message):
    path = tmp_path / "pairs.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(DataArguments(train_file=str(path)), seed=0)


ZH_EN = [
    ("我是一个学生。", "I am a student."),
    ("我有一只猫。", "I have a cat."),
    ("你好。", "Hello."),
    ("谢谢！", "Thanks!"),
]


def test_a_tsv_in_the_other_order_is_refused_with_the_columns_to_name(tmp_path):
    path = tmp_path / "cmn-eng.tsv"  # as Tatoeba's file: English first, then Chinese, then attribution
    path.write_text("".join(f"{en}\t{zh}\tCC-BY\n" for zh, en in ZH_EN * 3), encoding="utf-8")
    sizes = {"split_validation_size": 2, "split_test_size": 2}
    args = DataArguments(train_file=str(path), source_lang="zh", target_lang="en", **sizes)
    message = r"cmn-eng\.tsv: the text read as --source_lang zh is in Latin letters .* --tsv_languages en zh\."
    with pytest.raises(CorpusError, match=message):
        load_parallel_corpus(args, seed=0)
    args = DataArguments(train_file=str(path), source_lang="zh", target_lang="en", tsv_languages=["en", "zh"], **sizes)
    corpus = load_parallel_corpus(args, seed=0)
    assert {(row["source"], row["target"]) for split in corpus.values() for row in split} == set(ZH_EN)


def test_tatoebas_three_letter_codes_and_regions_are_checked_as_their_languages(tmp_path):
    path = tmp_path / "cmn.txt"
    path.write_text("".join(f"{en}\t{zh}\n" for zh, en in ZH_EN * 3), encoding="utf-8")
    args = DataArguments(train_file=str(path), source_lang="cmn", target_lang="eng", tsv_languages=["cmn", "eng"])
    with pytest.raises(CorpusError, match=r"--source_lang cmn is in Latin letters .* --tsv_languages eng cmn\."):
        load_parallel_corpus(args, seed=0)
    args = DataArguments(train_file=str(path), source_lang="zh-CN", target_lang="en-US")
    with pytest.raises(CorpusError, match=r"--tsv_languages en-US zh-CN\."):
        load_parallel_corpus(args, seed=0)


def test_a_validation_file_whose_languages_are_named_the_other_way_round_is_refused(tmp_path):
    train, validation = tmp_path / "train.jsonl", tmp_path / "val.jsonl"
    train.write_text("".join(json.dumps({"translation": {"zh": zh, "en": en}}) + "\n" for zh, en in ZH_EN * 3))
    validation.write_text("".join(json.dumps({"translation": {"zh": en, "en": zh}}) + "\n" for zh, en in ZH_EN))
    args = DataArguments(train_file=str(train), validation_file=str(validation), source_lang="en", target_lang="zh")
    with pytest.raises(CorpusError, match=r"val\.jsonl: the text read as --source_lang en is in Chinese characters"):
        load_parallel_corpus(args, seed=0)


def test_a_datasets_or_a_folders_languages_named_the_other_way_round_are_refused_too(tmp_path):
    import pandas  # datasets requires it

    hub = tmp_path / "hub"  # a dataset of source/target columns whose source is the Chinese
    hub.mkdir()
    pandas.DataFrame({"source": [zh for zh, _ in ZH_EN * 3], "target": [en for _, en in ZH_EN * 3]}).to_parquet(
        hub / "train.parquet"
    )
    sizes = {"split_validation_size": 2, "split_test_size": 2}
    args = DataArguments(dataset_name=str(hub), source_lang="en", target_lang="zh", **sizes)
    with pytest.raises(CorpusError, match=r"hub, split train: the text read as --source_lang en is in Chinese charac"):
        load_parallel_corpus(args, seed=0)
    load_parallel_corpus(DataArguments(dataset_name=str(hub), source_lang="zh", target_lang="en", **sizes), seed=0)
    for lang, side in (("en", 0), ("zh", 1)):  # each file named by the other's language
        (tmp_path / f"train.{lang}").write_text("".join(pair[side] + "\n" for pair in ZH_EN * 3), encoding="utf-8")
    args = DataArguments(data_dir=str(tmp_path), validation_prefix=None, source_lang="en", target_lang="zh", **sizes)
    with pytest.raises(CorpusError, match=r"train\.\{en,zh\}: the text read as --source_lang en is in Chinese"):
        load_parallel_corpus(args, seed=0)


@pytest.mark.parametrize(
    ("pair", "source_lang", "target_lang"),
    [
        (("Ein Hund.", "A dog."), "en", "de"),
        (("我是学生。", "私は学生です。"), "ja", "zh"),
        (("nuqneH", "Hello."), "en", "tlh"),
    ],
)
def test_languages_that_share_a_script_or_have_none_known_are_not_checked(tmp_path, pair, source_lang, target_lang):
    path = tmp_path / "pairs.tsv"  # the other way round, but nothing tells these languages apart by their letters
    path.write_text("\t".join(pair) + "\n", encoding="utf-8")
    files = {"train_file": str(path), "validation_file": str(path), "split_test_size": 0}
    args = DataArguments(source_lang=source_lang, target_lang=target_lang, **files)
    assert load_parallel_corpus(args, seed=0)["train"][0]["source"] == pair[0]


def test_a_txt_file_of_tab_separated_pairs_as_manythings_org_writes_them(tmp_path):
    path = tmp_path / "cmn.txt"  # Tatoeba's pairs from manythings.org/anki: English, Chinese, attribution
    path.write_text("".join(f"{en}\t{zh}\tCC-BY 2.0 (France)\n" for zh, en in ZH_EN), encoding="utf-8")
    args = DataArguments(
        train_file=str(path), validation_file=str(path), split_test_size=0, source_lang="zh", target_lang="en",
        tsv_languages=["en", "zh"],
    )  # fmt: skip
    assert load_parallel_corpus(args, seed=0)["train"][1] == {"source": ZH_EN[1][0], "target": ZH_EN[1][1]}
    path.write_text("one sentence a line\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"cmn\.txt, line 1: 1 tab-separated column\(s\), expected 2"):
        load_parallel_corpus(args, seed=0)
