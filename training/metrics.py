"""BLEU and chrF with sacreBLEU, plus the tokenized, lowercased BLEU that Multi30K papers report.

`evaluate.load("sacrebleu")` is a thin wrapper around these same sacrebleu calls that fetches its script from the
Hub, so it fails offline; calling sacrebleu directly gives the same numbers (and signature) online and offline, and
the project does not depend on `evaluate`.
"""

from collections.abc import Callable, Sequence

import numpy as np
import sacrebleu
from transformers import EvalPrediction, PreTrainedTokenizerBase

from vanilla_transformer.pipeline_vanilla_transformer import lowercase_tokenizer, primary_language

CJK_LANGUAGES = ("zh", "ja", "ko")


def bleu_metric(target_lang: str) -> sacrebleu.metrics.BLEU:
    """sacreBLEU with the tokenizer for the target language: "zh" for Chinese (zh-CN, cmn ...), MeCab for Japanese
    and Korean, "13a" (its default) otherwise."""
    language = primary_language(target_lang)
    tokenize = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}.get(language, "13a")
    try:
        return sacrebleu.metrics.BLEU(tokenize=tokenize)
    except RuntimeError:  # sacreBLEU's MeCab tokenizers say so, over several lines, when MeCab is not installed
        raise ImportError(
            f"sacreBLEU's {tokenize} tokenizer needs MeCab: pip install 'sacrebleu[{language}]'"
        ) from None


def translation_scores(
    hypotheses: Sequence[str], references: Sequence[str], target_lang: str
) -> dict[str, float | str]:
    """Corpus sacreBLEU (cased, detokenized) and chrF with their signatures; for non-CJK targets also BLEU on
    lowercased, Moses-tokenized text (multi-bleu style, as in the Multi30K literature)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} translations for {len(references)} references.")
    bleu = bleu_metric(target_lang)
    chrf = sacrebleu.metrics.CHRF()
    scores: dict[str, float | str] = {
        "bleu": bleu.corpus_score(hypotheses, [references]).score,
        "chrf": chrf.corpus_score(hypotheses, [references]).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }
    if primary_language(target_lang) not in CJK_LANGUAGES:
        try:
            tokenize = lowercase_tokenizer(target_lang)
        except ImportError:
            raise ImportError(
                "the tokenized BLEU (lowercased, Moses-tokenized, as Multi30K papers report it) needs sacremoses: "
                "pip install sacremoses"
            ) from None
        tokenized = sacrebleu.metrics.BLEU(tokenize="none", force=True)
        scores["tokenized_bleu"] = tokenized.corpus_score(
            [tokenize(h) for h in hypotheses], [[tokenize(r) for r in references]]
        ).score
    return scores


def check_scoring(target_lang: str, nothing_done: str = "nothing was trained") -> None:
    """The evaluation's scores can be computed in this Python: one sentence scored before the work, so that a missing
    package ends a command before its training or translating rather than after it."""
    try:
        translation_scores(["a"], ["a"], target_lang)
    except ImportError as error:
        raise ValueError(f"scoring translations into {target_lang!r}: {error}; {nothing_done}.") from None


def decode(tokenizer: PreTrainedTokenizerBase, token_ids: np.ndarray) -> list[str]:
    """Generated ids or labels to text; -100 (label padding, or padding across processes) becomes <pad>."""
    token_ids = np.where(token_ids == -100, tokenizer.pad_token_id, token_ids)
    return [text.strip() for text in tokenizer.batch_decode(token_ids, skip_special_tokens=True)]


def make_compute_metrics(
    tokenizer: PreTrainedTokenizerBase, target_lang: str
) -> Callable[[EvalPrediction], dict[str, float]]:
    """The Trainer's `compute_metrics` for `predict_with_generate`: numeric scores only (the Trainer logs them)."""

    def compute_metrics(eval_prediction: EvalPrediction) -> dict[str, float]:
        hypotheses = decode(tokenizer, eval_prediction.predictions)
        references = decode(tokenizer, eval_prediction.label_ids)
        scores = translation_scores(hypotheses, references, target_lang)
        numeric = {name: value for name, value in scores.items() if not isinstance(value, str)}
        return {**numeric, "translations": len(hypotheses)}

    return compute_metrics
