"""Command-line and YAML arguments, parsed by transformers' `HfArgumentParser` as in its `run_translation.py`.

A YAML file (`--config FILE`) gives the defaults of a run; flags on the command line override it.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml
from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from .data import DataArguments
from .tokenizer import VocabularySettings


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Fine-tune this trained model folder (its tokenizer is reused); else train from scratch."},
    )
    preset: str = field(default="base", metadata={"help": "The paper's 'base' or 'big' model (Table 3)."})
    d_model: int | None = field(default=None, metadata={"help": "Overrides the preset's d_model."})
    layers: int | None = field(default=None, metadata={"help": "Encoder and decoder layers (N)."})
    attention_heads: int | None = field(default=None, metadata={"help": "Heads (h) in every attention block."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Inner FFN width (d_ff)."})
    dropout: float | None = field(default=None, metadata={"help": "P_drop (§5.4)."})
    attention_dropout: float | None = field(default=None, metadata={"help": "Dropout on attention weights."})
    activation_dropout: float | None = field(default=None, metadata={"help": "Dropout after the FFN activation."})
    activation_function: str | None = field(default=None, metadata={"help": "relu (paper), gelu, ..."})
    layer_norm_position: str | None = field(default=None, metadata={"help": "post (paper) or pre."})
    share_embeddings: bool = field(default=True, metadata={"help": "One matrix for both embeddings and the output."})


@dataclass
class VocabularyArguments(VocabularySettings):
    """sentencepiece settings (see training.tokenizer.VocabularySettings); ignored when fine-tuning."""


@dataclass
class TranslationTrainingArguments(Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments with the paper's defaults (§5.3, §5.4, §6.1) and the token budget."""

    max_tokens: int = field(default=4096, metadata={"help": "Padded tokens per batch and side (paper: ~25000)."})
    learning_rate: float = field(
        default=0.0,
        metadata={"help": "Peak learning rate; 0 means the paper's d_model^-0.5 * warmup^-0.5 (times --lr_scale)."},
    )
    lr_scale: float = field(default=1.0, metadata={"help": "Multiplies the paper's learning rate (with 0 above)."})
    warmup_steps: float = field(default=4000, metadata={"help": "Warmup steps of the inverse-sqrt schedule."})
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_epsilon: float = 1e-9
    weight_decay: float = 0.0
    max_grad_norm: float = field(default=0.0, metadata={"help": "0: no clipping, as in the paper."})
    label_smoothing_factor: float = 0.1
    predict_with_generate: bool = True
    num_beams: int = field(default=4, metadata={"help": "Beam size for evaluation and the saved model (§6.1)."})
    length_penalty: float = field(default=0.6, metadata={"help": "Beam length penalty alpha (§6.1)."})
    max_length_beyond_source: int = field(default=50, metadata={"help": "Output limit: source length + this."})
    average_checkpoints: int = field(
        default=0, metadata={"help": "Average the last N checkpoints into the final model (§6.1: 5); 0 or 1: off."}
    )
    bf16: bool | None = field(
        default=None,
        # nargs/const: a bare --bf16 still means true, as for the Trainer's own flag (HfArgumentParser passes these on).
        metadata={
            "help": "bf16 autocast. Default: on where a CUDA GPU computes bf16 natively, else off.",
            "nargs": "?",
            "const": True,
        },
    )

    def __post_init__(self):
        if self.bf16 is None:
            self.bf16 = native_bf16() and not self.fp16
        if not (torch.cuda.is_available() or torch.backends.mps.is_available()):
            # accelerate runs several CPU processes as DDP (gloo), and bf16 on CPU, only when told the run is on CPU.
            self.use_cpu = True
            self.dataloader_pin_memory = False  # pinned memory only helps copies to a GPU
        super().__post_init__()


def native_bf16() -> bool:
    """Whether bf16 matrix products run natively here (CUDA GPUs from Ampere on). CPUs are left out: without AMX or
    AVX512-BF16 torch emulates bf16, 10 to 40 times slower than fp32 on this project's machines."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


ARGUMENT_CLASSES = (ModelArguments, DataArguments, VocabularyArguments, TranslationTrainingArguments)


def yaml_to_flags(path: str) -> list[str]:
    """A YAML mapping as command-line flags, so that later flags on the real command line override it."""
    try:
        settings = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise SystemExit(f"Cannot read the config file {path}: {error}") from error
    if not isinstance(settings, dict):
        raise SystemExit(f"{path}: expected a mapping of argument names to values, got {type(settings).__name__}.")
    flags: list[str] = []
    for name, value in settings.items():
        if value is None:  # null in the file: keep the argument's default
            continue
        values = value if isinstance(value, list) else [value]
        flags += [f"--{name}", *(str(v) for v in values)]
    return flags


def parse_arguments(argv: list[str] | None = None):
    """(model, data, vocabulary, training) arguments from `--config FILE` and/or flags; flags win."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--config" in argv:
        at = argv.index("--config")
        if at + 1 >= len(argv):
            raise SystemExit("--config needs a YAML file.")
        argv = yaml_to_flags(argv[at + 1]) + argv[:at] + argv[at + 2 :]
    parser = HfArgumentParser(ARGUMENT_CLASSES)
    return parser.parse_args_into_dataclasses(args=argv)
