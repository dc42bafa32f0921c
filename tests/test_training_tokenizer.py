"""training.tokenizer: a joint sentencepiece vocabulary shipped as a transformers tokenizer."""

import pytest
import sentencepiece as spm
from transformers import AutoTokenizer

from vanilla_transformer import VanillaTransformerConfig
from vanilla_transformer.training.tokenizer import (
    SPECIAL_IDS,
    VocabularySettings,
    sentencepiece_to_transformers,
    special_token_ids,
    train_sentencepiece,
)

from .helpers import PROJECT_PACKAGES, run_python

ENGLISH = ["A dog runs on the grass.", "Two men play football in the park.", "The girl reads a book."]
GERMAN = ["Ein Mädchen läuft über die Straße.", "Der Fußball ist größer als der Ball.", "Schöne Grüße aus Köln!"]
CHINESE = ["我是学生。", "我有一只猫。", "你好，今天天气很好！"]
CORPUS = (ENGLISH + GERMAN + CHINESE) * 20


@pytest.fixture(scope="module", params=[("bpe", 150), ("unigram", 70)], ids=["bpe", "unigram"])
def trained(request, tmp_path_factory):
    model_type, vocab_size = request.param
    settings = VocabularySettings(
        vocab_size=vocab_size, model_type=model_type, character_coverage=1.0, normalization="identity"
    )
    model_file = train_sentencepiece(CORPUS, settings, str(tmp_path_factory.mktemp("spm") / "spm"))
    return model_file, sentencepiece_to_transformers(model_file)


@pytest.mark.parametrize("text", ENGLISH + GERMAN + CHINESE)
def test_round_trip_is_lossless(trained, text):
    _, tokenizer = trained
    ids = tokenizer(text).input_ids
    assert ids[-1] == SPECIAL_IDS["</s>"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_pieces_are_sentencepieces_own(trained):
    model_file, tokenizer = trained
    processor = spm.SentencePieceProcessor(model_file=model_file)
    for text in ENGLISH + GERMAN + CHINESE + ["Unseen words: Straßenbahn, 学生们"]:
        assert tokenizer(text).input_ids[:-1] == processor.encode(text)


def test_special_ids_agree_with_the_model_config(trained):
    _, tokenizer = trained
    ids = special_token_ids(tokenizer)
    assert ids == {"pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3, "decoder_start_token_id": 2}
    assert tokenizer.unk_token_id == SPECIAL_IDS["<unk>"]
    config = VanillaTransformerConfig()
    assert {k: getattr(config, k) for k in ids} == ids


def test_text_target_gives_labels(trained):
    _, tokenizer = trained
    batch = tokenizer(ENGLISH[:2], text_target=GERMAN[:2])
    assert batch["labels"][0] == tokenizer(GERMAN[0]).input_ids


def test_saved_tokenizer_loads_with_auto_tokenizer_without_sentencepiece(trained, tmp_path):
    _, tokenizer = trained
    tokenizer.save_pretrained(tmp_path)
    assert (tmp_path / "tokenizer.json").exists()
    expected = tokenizer(GERMAN[0]).input_ids
    code = f"""
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained({str(tmp_path)!r})
        assert tokenizer({GERMAN[0]!r}).input_ids == {expected!r}, tokenizer({GERMAN[0]!r}).input_ids
        assert tokenizer.pad_token_id == 0 and tokenizer.eos_token_id == 3
        """
    run_python(code, tmp_path, without=(*PROJECT_PACKAGES, "sentencepiece"))
    assert AutoTokenizer.from_pretrained(tmp_path)(GERMAN[0]).input_ids == expected


def test_unknown_model_type_is_named(tmp_path):
    with pytest.raises(ValueError, match="'wordpiece'"):
        train_sentencepiece(CORPUS, VocabularySettings(model_type="wordpiece"), str(tmp_path / "spm"))
