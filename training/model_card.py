"""The output folder's README.md: the top-level `model_card.md` template filled with the run's real results."""

import platform
from pathlib import Path
from string import Template

import torch
import yaml

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


def model_index(name: str, task_languages: tuple[str, str], dataset: str, results: dict[str, dict]) -> list[dict]:
    """The Hub's model-index metadata: one entry per evaluated split, with BLEU and chrF."""
    source, target = task_languages
    entries = []
    for split, scores in results.items():
        entries.append(
            {
                "task": {"type": "translation", "name": f"Translation {source}-{target}"},
                "dataset": {"type": dataset, "name": dataset, "split": split},
                "metrics": [
                    {"type": "bleu", "value": round(scores["bleu"], 2), "name": "sacreBLEU"},
                    {"type": "chrf", "value": round(scores["chrf"], 2), "name": "chrF"},
                ],
            }
        )
    return [{"name": name, "results": entries}]


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
    front_matter = {
        "language": [source_lang, target_lang],
        "license": "apache-2.0",
        "library_name": "transformers",
        "pipeline_tag": "translation",
        "tags": ["translation", "vanilla-transformer", "attention-is-all-you-need"],
        "datasets": [dataset],
        "metrics": ["bleu", "chrf"],
        "model-index": model_index(name, (source_lang, target_lang), dataset, results),
    }
    description = next((text for key, text in KNOWN_DATASETS.items() if key in dataset.lower()), f"`{dataset}`.")
    first = next(iter(results.values()), {})
    fields = {
        "front_matter": yaml.safe_dump(front_matter, sort_keys=False, allow_unicode=True).strip(),
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
