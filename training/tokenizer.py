"""A joint source+target sentencepiece vocabulary (§5.1: "a shared source-target vocabulary"), trained on the
training split only and shipped as a transformers tokenizer (`tokenizer.json`) that loads with `AutoTokenizer`
without sentencepiece or this package.

The special-token ids are decided here, once: the model config takes them from the tokenizer.
"""

import logging
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import sentencepiece as spm
from tokenizers import processors
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import SentencePieceExtractor, SpmConverter
from transformers.tokenization_utils_base import generate_merges

from .text_files import CorpusError

logger = logging.getLogger(__name__)

# id: piece. Pad first so that zero-filled tensors are padding; the decoder starts from <s> and ends at </s>.
PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
SPECIAL_IDS = {PAD: 0, UNK: 1, BOS: 2, EOS: 3}
# Written next to a run's tokenizer.json: the settings and training pairs it was trained on (training.train compares
# them before reusing it). Run state, not part of the published model.
VOCABULARY_RECORD = "vocabulary_training.json"


@dataclass
class VocabularySettings:
    vocab_size: int = field(default=8000, metadata={"help": "Tokens in the joint vocabulary (paper: 37000 BPE)."})
    model_type: str = field(default="bpe", metadata={"help": "bpe or unigram."})
    character_coverage: float = field(
        default=1.0, metadata={"help": "0.9995 for Chinese/Japanese (sentencepiece's advice), 1.0 for Latin scripts."}
    )
    normalization: str = field(
        default="nmt_nfkc",
        metadata={"help": "nmt_nfkc; identity keeps full-width CJK punctuation as it is in the references."},
    )
    max_sentences: int = field(
        default=2_000_000, metadata={"help": "sentencepiece samples this many sentences from a larger corpus."}
    )


class _SentencePieceFile:
    """What SpmConverter reads from a slow tokenizer: the model file, and no legacy prefix-space behaviour."""

    legacy = False

    def __init__(self, path: str):
        self.vocab_file = path


class _BpeMergesExtractor(SentencePieceExtractor):
    """Merges of a sentencepiece BPE model, highest score (earliest merge) first.

    transformers 5.23's SpmConverter calls `extract(vocab_scores)` for BPE models, which its own extractor does
    not accept (it expects a model class); this gives the converter the (vocab, merges) it expects.
    """

    def extract(self, vocab_scores: list[tuple[str, float]]) -> tuple[dict[str, int], list[tuple[str, str]]]:
        vocab = {piece: i for i, (piece, _) in enumerate(vocab_scores)}
        return vocab, generate_merges(vocab, vocab_scores)


class _TranslationSpmConverter(SpmConverter):
    """sentencepiece model -> `tokenizers` pipeline, appending </s> to every sequence like Marian and T5."""

    SpmExtractor = _BpeMergesExtractor

    def post_processor(self) -> processors.TemplateProcessing:
        return processors.TemplateProcessing(
            single=["$A", EOS], pair=["$A", EOS, "$B", EOS], special_tokens=[(EOS, SPECIAL_IDS[EOS])]
        )


def train_sentencepiece(sentences: Iterable[str], settings: VocabularySettings, model_prefix: str) -> str:
    """Train sentencepiece on `sentences` (source and target sides together); returns the .model path."""
    if settings.model_type not in ("bpe", "unigram"):
        raise ValueError(f"Unknown sentencepiece model_type {settings.model_type!r}: use 'bpe' or 'unigram'.")
    corpus = Path(model_prefix + ".corpus.txt")
    with corpus.open("w", encoding="utf-8") as f:
        for sentence in sentences:
            f.write(sentence.replace("\n", " ") + "\n")
    try:
        train_sentencepiece_file(str(corpus), settings, model_prefix)
    except RuntimeError as error:  # "INTERNAL: src/trainer_interface.cc(744) [...] Vocabulary size too high ..."
        reason = str(error).split("] ")[-1].strip()
        raise CorpusError(
            f"--vocab_size {settings.vocab_size}: sentencepiece cannot train such a vocabulary on this corpus "
            f"({reason})"
        ) from None
    corpus.unlink()
    return model_prefix + ".model"


def train_sentencepiece_file(corpus: str, settings: VocabularySettings, model_prefix: str) -> None:
    spm.SentencePieceTrainer.train(
        input=corpus,
        model_prefix=model_prefix,
        vocab_size=settings.vocab_size,
        model_type=settings.model_type,
        character_coverage=settings.character_coverage,
        normalization_rule_name=settings.normalization,
        input_sentence_size=settings.max_sentences,
        shuffle_input_sentence=True,
        pad_id=SPECIAL_IDS[PAD],
        unk_id=SPECIAL_IDS[UNK],
        bos_id=SPECIAL_IDS[BOS],
        eos_id=SPECIAL_IDS[EOS],
        pad_piece=PAD,
        unk_piece=UNK,
        bos_piece=BOS,
        eos_piece=EOS,
        minloglevel=2,
    )


def sentencepiece_to_transformers(model_file: str) -> PreTrainedTokenizerFast:
    """The same segmentation as a `tokenizers` pipeline: saved as tokenizer.json, it needs no sentencepiece."""
    backend = _TranslationSpmConverter(_SentencePieceFile(model_file)).converted()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=PAD, unk_token=UNK, bos_token=BOS, eos_token=EOS)


def train_tokenizer(sentences: Iterable[str], settings: VocabularySettings) -> PreTrainedTokenizerFast:
    """A joint vocabulary trained on `sentences`, as a transformers tokenizer."""
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer = sentencepiece_to_transformers(train_sentencepiece(sentences, settings, f"{workdir}/spm"))
    logger.info("Trained a %s vocabulary of %d pieces", settings.model_type, len(tokenizer))
    return tokenizer


def special_token_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """The model config's special ids, read from the tokenizer (the one place that decides them)."""
    return {
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "decoder_start_token_id": tokenizer.bos_token_id,
    }


def check_text_preprocessing(tokenizer: PreTrainedTokenizerFast, preprocess: str, model: str) -> None:
    """A fine-tune must prepare its text as the fine-tuned model's vocabulary was learned on it: other text would reach
    the model as words it never saw, and the record rewritten would have the pipeline prepare a user's sentences for
    a model that never read such text."""
    learned_on = tokenizer.init_kwargs.get("text_preprocessing")  # None: saved before the record was kept
    if learned_on is not None and learned_on != preprocess:
        raise CorpusError(
            f"{model}: its vocabulary was learned on text prepared with --preprocess {learned_on}, and this run asks "
            f"for --preprocess {preprocess}; fine-tune it with --preprocess {learned_on}."
        )


def record_text_preprocessing(
    tokenizer: PreTrainedTokenizerFast, preprocess: str, source_lang: str, target_lang: str
) -> None:
    """Write into the tokenizer's configuration (saved with it in every checkpoint and in the model folder) what
    `--preprocess` did to the text before the vocabulary saw it: the translation pipeline, vt-translate and the demo
    then do the same to a user's sentences (`vanilla_transformer.pipeline_vanilla_transformer.text_preparation`)."""
    # "none" is written too: a tokenizer without the record is one saved before it was kept (tools.tune_decoding).
    tokenizer.init_kwargs.update(text_preprocessing=preprocess, source_lang=source_lang, target_lang=target_lang)
