"""What the exports (CTranslate2 in `export.py`, ONNX in `export_onnx.py`) share: their error, the model folder
loaded and checked, and the files copied beside the converted model."""

from pathlib import Path

from safetensors import SafetensorError
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from .folder_checks import check_config_file, check_tokenizer_file
from .input_checks import check_tokenizer
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

# What an exported folder needs besides the weights: the tokenizer (the engines take and return tokens) and the
# decoding settings.
COPIED_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


# Longest source or output (in tokens) the exported model can encode positions for. Longer inputs need a larger
# --max_positions (the table costs max_positions x d_model floats: 2 MB at 1,024 x 512).
DEFAULT_MAX_POSITIONS = 1024
# CTranslate2's weight types.
QUANTIZATIONS = ("int8", "int8_float32", "int8_float16", "int8_bfloat16", "int16", "float16", "bfloat16", "float32")


class ExportError(ValueError):
    """The folder is not a model of this package, or has a setting that the engine cannot express."""


def load_model(model_dir: str | Path) -> VanillaTransformerForConditionalGeneration:
    check_config_file(model_dir)
    try:
        return VanillaTransformerForConditionalGeneration.from_pretrained(model_dir).eval()
    except SafetensorError:  # an interrupted copy or download; safetensors' own wording changes between releases
        damaged = "its weights file cannot be read, cut short or damaged: copy or download it again"
        raise ExportError(f"{model_dir} cannot be loaded: {damaged}") from None
    except (OSError, ValueError) as error:  # no weights, or a setting out of range
        reason = str(error).strip().split("\n")[0]
        raise ExportError(f"{model_dir} cannot be loaded: {reason}") from None


def load_tokenizer(model_dir: str | Path) -> PreTrainedTokenizerBase:
    check_tokenizer_file(model_dir)
    return AutoTokenizer.from_pretrained(model_dir)


def load_checked(model_dir: str | Path) -> tuple[VanillaTransformerForConditionalGeneration, PreTrainedTokenizerBase]:
    """The model and tokenizer of a model folder, the tokenizer checked to be the model's; else an ExportError."""
    try:
        model, tokenizer = load_model(model_dir), load_tokenizer(model_dir)
        check_tokenizer(model.config, tokenizer, str(model_dir))
    except ExportError:
        raise
    except ValueError as error:  # the folder checks': as ExportError, what an export that cannot be made raises
        raise ExportError(str(error)) from None
    return model, tokenizer
