"""The output folder's README.md: the card of the model this run trained, rendered by huggingface_hub's `ModelCard`
from the top-level `model_card.md` (a Jinja template) with the run's own settings and results."""

import platform
import re
from pathlib import Path

import torch
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from vanilla_transformer.pipeline_vanilla_transformer import language_subtag

# The top-level model_card.md, linked into this package so that a wheel carries it (setuptools copies the file).
TEMPLATE = Path(__file__).resolve().parent / "model_card.md"

# What a card says of the corpora it knows (matched in the data's name or path); other data is named as it was given.
KNOWN_DATASETS = {
    "multi30k": (
        "Multi30K",
        "Multi30K Task 1 (Elliott et al., 2016, 2017): 29,000 English image descriptions with German (and French) "
        "translations; validation 1,014 pairs; tests 2016 and 2017 of 1,000 each. For non-commercial research and "
        "education.",
    ),
    "tatoeba": (
        "Tatoeba",
        "English–Chinese sentence pairs from Tatoeba (tatoeba.org), CC-BY 2.0 (France), the attribution of every "
        "pair kept in the source file's third column. The file has no split: validation and test pairs were held "
        "out of it with the run's seed.",
    ),
}


def hardware_description() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    threads = torch.get_num_threads()
    return f"a CPU ({platform.processor() or platform.machine()}, {threads} thread{'s' if threads > 1 else ''})"


def duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} seconds"


def hub_languages(*codes: str) -> dict[str, list[str] | None]:
    """The card's `language` and `language_bcp47` fields for the pair's codes as the user gave them. The Hub takes
    only ISO 639 codes, lowercase, in `language` ("zh-CN" and "FR" there are metadata errors): each code's language
    part where it is one ("cmn" stays: Mandarin is its own ISO 639-3 language), and codes with a region or script in
    `language_bcp47`."""
    languages = [language_subtag(code) for code in codes]
    regional = [
        code.replace("_", "-") for code, language in zip(codes, languages, strict=True) if language != code.lower()
    ]
    return {
        "language": list(dict.fromkeys(code for code in languages if re.fullmatch("[a-z]{2,3}", code))) or None,
        "language_bcp47": regional or None,
    }


def evaluation_results(task_languages: tuple[str, str], dataset: str, results: dict[str, dict]) -> list[EvalResult]:
    """The Hub's model-index entries: BLEU and chrF of every evaluated split."""
    source, target = task_languages
    return [
        EvalResult(
            task_type="translation",
            task_name=f"Translation {source}-{target}",
            dataset_type=dataset,
            dataset_name=dataset,
            dataset_split=split,
            metric_type=metric,
            metric_name=label,
            metric_value=round(scores[metric], 2),
        )
        for split, scores in results.items()
        for metric, label in (("bleu", "sacreBLEU"), ("chrf", "chrF"))
    ]


def score_cells(scores: dict) -> str:
    """BLEU | chrF | tokenized BLEU of one split as table cells ("–" where there is no tokenized BLEU, e.g. Chinese)."""
    tokenized = f"{scores['tokenized_bleu']:.2f}" if "tokenized_bleu" in scores else "–"
    return f"{scores['bleu']:.2f} | {scores['chrf']:.2f} | {tokenized}"


def architecture(config: dict, parameters: int) -> str:
    """The model in one line, from its configuration."""
    layer_norm = "pre-LN" if config.get("layer_norm_position") == "pre" else "post-LN (the paper's)"
    return (
        f"{config['encoder_layers']}+{config['decoder_layers']} layers, d_model {config['d_model']}, "
        f"{config['encoder_attention_heads']} heads, FFN {config['encoder_ffn_dim']}, {layer_norm}, "
        f"a vocabulary of {config['vocab_size']:,} tokens, {parameters / 1e6:.1f}M parameters"
    )


def render_model_card(
    *,
    repo_id: str,
    source_lang: str,
    target_lang: str,
    dataset: str,
    hub_dataset: bool,
    config: dict,
    parameters: int,
    settings: dict[str, object],
    summary: dict,
    results: dict[str, dict],
    generation: dict[str, object],
    example_source: str,
    text_preprocessing: str | None = None,
) -> str:
    """The card as markdown with YAML front matter. `results` maps split -> translation_scores() of the shipped
    model; `dataset` is a Hub dataset id where `hub_dataset`, else the local path the data came from."""
    name = repo_id.split("/")[-1]
    title, description = next(
        (known for key, known in KNOWN_DATASETS.items() if key in dataset.lower()), (dataset, f"`{dataset}`.")
    )
    card_data = ModelCardData(
        **hub_languages(source_lang, target_lang),
        license="apache-2.0",
        library_name="transformers",
        pipeline_tag="translation",
        tags=["translation", "vanilla-transformer", "attention-is-all-you-need"],
        datasets=[dataset] if hub_dataset else None,  # the Hub's field names a dataset id, not a local folder
        metrics=["bleu", "chrf"],
        model_name=name,
        eval_results=evaluation_results((source_lang, target_lang), title, results),
    )
    first = next(iter(results.values()), {})
    card = ModelCard.from_template(
        card_data,
        template_path=str(TEMPLATE),
        model_name=name,  # ModelCardData keeps it for the model-index only
        repo_id=repo_id,
        source_lang=source_lang,
        target_lang=target_lang,
        dataset_title=title,
        dataset_description=description,
        architecture=architecture(config, parameters),
        text_preprocessing=text_preprocessing,
        example_source=example_source.replace("\\", "\\\\").replace('"', '\\"'),
        hardware=hardware_description(),
        summary=(
            f"{summary['steps']:,} steps ({summary['epochs']} epochs) in {duration(summary['wall_time_s'])} in all, "
            f"{summary['train_tokens_per_s']:,} training tokens/s"
        ),
        settings=settings,
        shipped_model=summary["shipped_model"],
        results=results,
        tokenized=any("tokenized_bleu" in scores for scores in results.values()),
        bleu_signature=first.get("bleu_signature", "–"),
        chrf_signature=first.get("chrf_signature", "–"),
        **generation,
    )
    return str(card)
