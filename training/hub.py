"""Publishing a trained model folder with `huggingface_hub`: model, tokenizer, code, generation config and card.

The Trainer's own `push_to_hub` creates the repository when the run starts and writes its own card; this uploads
the finished folder once, with the card rendered from `model_card.md`, and leaves the training state behind.
"""

import json
from pathlib import Path

from huggingface_hub import HfApi
from huggingface_hub.utils import filter_repo_objects
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from vanilla_transformer import TranslationPipeline

from .console import first_line
from .tokenizer import VOCABULARY_RECORD

# Inside a run's output folder but not part of the model: checkpoints, logs, Trainer state. huggingface_hub's
# patterns: fnmatch on the path inside the folder ("*" also crosses "/"; a trailing "/" means the whole folder).
NOT_PUBLISHED = [
    "checkpoint-*/",
    "runs/",
    "averaged/",
    "*.bin",
    "trainer_state.json",
    "*.log",
    ".*",
    "*/.*",
    VOCABULARY_RECORD,
    "run_settings.json",  # training.train.RUN_SETTINGS
]


def make_tokenizer_config_portable(folder: str | Path) -> None:
    """Let transformers 4.x load the tokenizer that 5.x saved: 5.x names its class "TokenizersBackend", unknown to
    4.x, where "PreTrainedTokenizerFast" loads on both (5.x keeps it as an alias); and 4.x's PreTrainedTokenizerFast
    adds token_type_ids, which the model does not take, unless the config lists the inputs."""
    path = Path(folder) / "tokenizer_config.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    if settings.get("tokenizer_class") == "TokenizersBackend":
        settings["tokenizer_class"] = "PreTrainedTokenizerFast"
    settings["model_input_names"] = ["input_ids", "attention_mask"]
    path.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def save_translation_folder(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: str | Path) -> None:
    """The model and its tokenizer as a folder that translates wherever transformers runs: the translation pipeline's
    code beside them, named in config.json (`pipeline("translation", trust_remote_code=True)` without this package),
    and a tokenizer config that transformers 4.x loads too."""
    TranslationPipeline(model=model, tokenizer=tokenizer, device=model.device).save_pretrained(folder)
    make_tokenizer_config_portable(folder)


def hub_files(folder: str | Path) -> list[str]:
    """The files (relative paths, sorted) that `publish` uploads from `folder`, chosen by huggingface_hub's own
    pattern matching."""
    folder = Path(folder)
    files = [path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()]
    return sorted(filter_repo_objects(files, ignore_patterns=NOT_PUBLISHED))


class PublishError(ValueError):
    """The upload of a finished run failed; the message names the repository, the reason and where the model is."""


def publish(folder: str | Path, repo_id: str, token: str | None = None, private: bool = False) -> str:
    """Create (or reuse) the model repository and upload the folder; returns the commit URL."""
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            ignore_patterns=NOT_PUBLISHED,
            commit_message="Upload vanilla Transformer trained with training.train",
        )
    except Exception as error:  # no network, token or rights: the Hub client's error classes are not OSError's
        failure = f"{type(error).__name__}: {first_line(error)}"
        raise PublishError(
            f"publishing {folder} to the Hub as {repo_id} failed ({failure}). The trained model is in {folder}: "
            "the same command run again evaluates it and publishes it, without training."
        ) from error
    return str(commit)
