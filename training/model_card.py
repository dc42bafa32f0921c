"""The output folder's README.md: the top-level `model_card.md` template filled with the run's real results."""

import platform
from pathlib import Path
from string import Template

import torch
from huggingface_hub import EvalResult, ModelCardData

# The top-level model_card.md, linked into this package so that a wheel carries it (setuptools copies the file).
TEMPLATE = Path(__file__).resolve().parent / "model_card.md"

# What the card says about the corpora it knows; other data is described by its path or Hub name.
KNOWN_DATASETS = {
    "multi30k": (
        "Multi30K Task 1 (Elliott et al., 2016, 2017): 29,000 image descriptions with German translations; "
        "validation 1,014; tests 2016 and 2017 of 1,000 each. For non-commercial research and education."
    ),
    "tatoeba": (
        "Tatoeba English–Chinese sentence pairs (tatoeba.org), CC-BY 2.0 (France); the attribution of every pair "
        "is kept in the source file's third column. Split deterministically (seeded) into train/validation/test."
    ),
}


def hardware_description() -> str:
    if torch.cuda.is_available():
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    return f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


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


def results_table(results: dict[str, dict]) -> str:
    rows = ["| split | BLEU | chrF | tokenized BLEU |", "|---|---|---|---|"]
    for split, scores in results.items():
        rows.append(f"| {split} | {score_cells(scores)} |")
    return "\n".join(rows)


def render_model_card(
    *,
    repo_id: str,
    source_lang: str,
    target_lang: str,
    dataset: str,
    results: dict[str, dict],
    hyperparameters: dict[str, object],
    generation: dict[str, object],
    example_source: str,
) -> str:
    """The card as markdown with YAML front matter; `results` maps split -> translation_scores()."""
    name = repo_id.split("/")[-1]
    front_matter = ModelCardData(
        language=[source_lang, target_lang],
        license="apache-2.0",
        library_name="transformers",
        pipeline_tag="translation",
        tags=["translation", "vanilla-transformer", "attention-is-all-you-need"],
        datasets=[dataset],
        metrics=["bleu", "chrf"],
        model_name=name,
        eval_results=evaluation_results((source_lang, target_lang), dataset, results),
    )
    description = next((text for key, text in KNOWN_DATASETS.items() if key in dataset.lower()), f"`{dataset}`.")
    first = next(iter(results.values()), {})
    fields = {
        "front_matter": front_matter.to_yaml(),
        "model_name": name,
        "repo_id": repo_id,
        "source_lang": source_lang,
        "target_lang": target_lang,
        "dataset": dataset,
        "dataset_description": description,
        "example_source": example_source.replace('"', '\\"'),
        "hardware": hardware_description(),
        "hyperparameters": "\n".join(f"- {key}: {value}" for key, value in hyperparameters.items()),
        "results_table": results_table(results),
        "bleu_signature": first.get("bleu_signature", "–"),
        "chrf_signature": first.get("chrf_signature", "–"),
        **{key: str(value) for key, value in generation.items()},
    }
    return Template(TEMPLATE.read_text(encoding="utf-8")).substitute(fields)
