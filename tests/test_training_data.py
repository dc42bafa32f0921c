"""training.data: every kind of source, deterministic splits, and errors that name the file and line."""

import gzip
import json
import logging

import pytest

from training.data import CorpusError, DataArguments, load_parallel_corpus, tokenize_corpus

from .conftest import PAIRS, word_tokenizer


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


def test_held_out_splits_are_deterministic_for_a_seed(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"english {i}\tdeutsch {i}\n" for i in range(60)), encoding="utf-8")
    args = DataArguments(train_file=str(path), split_validation_size=5, split_test_size=5)
    first, again = load_parallel_corpus(args, seed=7), load_parallel_corpus(args, seed=7)
    other = load_parallel_corpus(args, seed=8)
    assert first["test"]["source"] == again["test"]["source"] != other["test"]["source"]
    assert not set(first["test"]["source"]) & set(first["train"]["source"])


def test_files_of_different_lengths_name_both_files_and_the_line(tmp_path):
    write_pairs(tmp_path, "train", PAIRS)
    (tmp_path / "train.de").write_text("".join(p[1] + "\n" for p in PAIRS[:6]), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"train\.en has 8 lines but .*train\.de has 6.*line 7"):
        load_parallel_corpus(DataArguments(data_dir=str(tmp_path), validation_prefix=None), seed=0)


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
    with pytest.raises(
        CorpusError, match=r"pairs\.jsonl, line 1: no 'fr' translation \(languages there: \['de', 'en'\]\)"
    ):
        load_parallel_corpus(DataArguments(train_file=str(jsonl), target_lang="fr"), seed=0)


def test_a_tsv_line_without_a_tab_names_the_file_and_line(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a dog\tein hund\nno tab on this line\nthe cat\tdie katze\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"pairs\.tsv, line 2: 1 column\(s\), expected 2"):
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
    with caplog.at_level(logging.INFO, logger="training.data"):
        corpus = load_parallel_corpus(args, seed=0)
        tokenized = tokenize_corpus(corpus, word_tokenizer([s for p in PAIRS for s in p] + ["dog hund"]), args)
    assert "Dropped 1 empty pairs from train" in caplog.text
    assert "Dropped 1 training pairs longer than 20 source / 256 target tokens" in caplog.text
    assert tokenized["train"].num_rows == 8
    assert tokenized["validation"].num_rows == 1  # evaluation sets stay whole
