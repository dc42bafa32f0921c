"""Checks of a model folder's files before transformers reads them: a missing, damaged or foreign config.json or
tokenizer.json ends in a ValueError that names the file, not in a JSONDecodeError, a KeyError or a question about
remote code from deep inside the loaders.

Used by the commands (`vanilla_transformer.tools`), the CTranslate2 export and fine-tuning; not copied into model
folders.
"""

import json
import re
from pathlib import Path

from tokenizers import Tokenizer
from transformers.utils import SAFE_WEIGHTS_NAME

from .configuration_vanilla_transformer import VanillaTransformerConfig

OURS = VanillaTransformerConfig.model_type
CHECKPOINT_MODEL = ("config.json", SAFE_WEIGHTS_NAME)  # what makes a checkpoint a model folder


def numbered_checkpoints(run_dir: str | Path) -> list[Path]:
    """The Trainer's `checkpoint-STEP` folders of a run, oldest first."""
    checkpoints = [p for p in Path(run_dir).glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    return sorted(checkpoints, key=lambda p: int(p.name.split("-")[1]))


def check_config_file(folder: str | Path) -> None:
    """`folder/config.json` exists, is a JSON object and describes a model of this package."""
    folder = Path(folder)
    path = folder / "config.json"
    if not path.is_file():
        raise ValueError(f"{folder} has no config.json (the model's configuration): {without_configuration(folder)}")
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise ValueError(f"{path} cannot be read ({error}): copy it again from the model's folder.") from None
    model_type = settings.get("model_type") if isinstance(settings, dict) else None
    if model_type == OURS:
        return
    if (folder / "model.bin").is_file():
        raise ValueError(f"{folder} is a CTranslate2 model (written by vt-export), not the folder that training wrote.")
    if model_type is None:
        raise ValueError(f"{path} names no model_type: a model folder of this package says {OURS!r}.")
    raise ValueError(f"{path} describes a {model_type!r} model, not a {OURS} one.")


def without_configuration(folder: Path) -> str:
    """What a folder without config.json is: a run that has not written its model yet (training writes it at the
    end), whose checkpoints are model folders, or no model folder at all."""
    models = [c for c in numbered_checkpoints(folder) if all((c / name).is_file() for name in CHECKPOINT_MODEL)]
    if not models:
        return "it is not a model folder."
    return (
        "it is a training run that has not written its model yet (it is still training, or it was stopped: the same "
        f"vt-train command finishes it); its newest checkpoint is a model folder: {models[-1]}"
    )


def check_tokenizer_file(folder: str | Path) -> None:
    """`folder/tokenizer.json` exists and is a tokenizer that the `tokenizers` library reads."""
    folder = Path(folder)
    path = folder / "tokenizer.json"
    if not path.is_file():
        raise ValueError(f"{folder} has no tokenizer.json (the model's vocabulary): copy it from the model's folder.")
    try:
        Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception for every kind of damage
        raise ValueError(f"{path} is not a tokenizer that can be read ({error}): copy it again.") from None


def is_hub_id(name: str) -> bool:
    """Whether a model name that is no folder here can still be a Hub id ("user/model" or "model"), not a path that
    is missing (transformers would look it up on the Hub and fail with a chain of errors about repo ids)."""
    return not (Path(name).is_absolute() or name.startswith(".") or name.count("/") > 1)
