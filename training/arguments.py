"""Command-line and YAML arguments, parsed by transformers' `HfArgumentParser` as in its `run_translation.py`.

A YAML file (`--config FILE`) gives the defaults of a run; flags on the command line override it.
"""

import argparse
import dataclasses
import difflib
import json
import logging
import os
import sys
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
import yaml
from transformers import GenerationConfig, HfArgumentParser, SchedulerType, Seq2SeqTrainingArguments
from transformers.training_args import OptimizerNames
from transformers.utils import is_schedulefree_available

from vanilla_transformer import VanillaTransformerConfig
from vanilla_transformer.extras import MissingExtra
from vanilla_transformer.folder_checks import check_config_file, check_tokenizer_file, is_hub_id

from .data import DATA_SOURCES, DataArguments
from .loss import narrows_softmax
from .precision import cpu_bf16_instructions
from .schedule_free import is_schedule_free
from .tokenizer import VocabularySettings

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    _argument_group_name: ClassVar[str] = "model (§3; the paper's base or big model, Table 3)"

    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "Fine-tune this trained model folder (its tokenizer is reused); else train from scratch."},
    )
    preset: str = field(default="base", metadata={"help": "The paper's 'base' or 'big' model (Table 3)."})
    d_model: int | None = field(default=None, metadata={"help": "Overrides the preset's d_model."})
    layers: int | None = field(default=None, metadata={"help": "Encoder and decoder layers (N)."})
    encoder_layers: int | None = field(default=None, metadata={"help": "Encoder layers alone; overrides --layers."})
    decoder_layers: int | None = field(default=None, metadata={"help": "Decoder layers alone; overrides --layers."})
    attention_heads: int | None = field(default=None, metadata={"help": "Heads (h) in every attention block."})
    ffn_dim: int | None = field(default=None, metadata={"help": "Inner FFN width (d_ff)."})
    dropout: float | None = field(default=None, metadata={"help": "P_drop (§5.4)."})
    attention_dropout: float | None = field(default=None, metadata={"help": "Dropout on attention weights."})
    activation_dropout: float | None = field(default=None, metadata={"help": "Dropout after the FFN activation."})
    activation_function: str | None = field(default=None, metadata={"help": "relu (paper), gelu, ..."})
    layer_norm_position: str | None = field(default=None, metadata={"help": "post (paper) or pre."})
    share_embeddings: bool = field(default=True, metadata={"help": "One matrix for both embeddings and the output."})

    def __post_init__(self):
        if self.preset not in ("base", "big"):
            raise ValueError(f"--preset {self.preset!r}: use 'base' or 'big'.")
        self.model_config()  # the configuration checks every value now, before data and vocabulary take minutes

    def config_overrides(self) -> dict:
        """The configuration fields that these arguments set (both stacks alike)."""
        overrides = {}
        for argument, config_fields in CONFIG_FIELDS.items():
            if getattr(self, argument) is not None:
                overrides.update(dict.fromkeys(config_fields, getattr(self, argument)))
        return overrides

    def model_config(self, **fields) -> VanillaTransformerConfig:
        """The preset's configuration with these arguments' overrides and `fields` (vocabulary, special ids)."""
        make_config = VanillaTransformerConfig.big if self.preset == "big" else VanillaTransformerConfig
        tied = {"share_encoder_decoder_embeddings": self.share_embeddings, "tie_word_embeddings": self.share_embeddings}
        return make_config(**tied, **fields, **self.config_overrides())


DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")
# The optimizers `--muon` pairs with: it replaces torch's AdamW by training.muon's Muon with AdamW.
TORCH_ADAMW = (OptimizerNames.ADAMW_TORCH, OptimizerNames.ADAMW_TORCH_FUSED)
# ModelArguments -> VanillaTransformerConfig fields
CONFIG_FIELDS = {
    "layers": ("encoder_layers", "decoder_layers"),
    "encoder_layers": ("encoder_layers",),  # after "layers": a stack's own count wins
    "decoder_layers": ("decoder_layers",),
    "attention_heads": ("encoder_attention_heads", "decoder_attention_heads"),
    "ffn_dim": ("encoder_ffn_dim", "decoder_ffn_dim"),
    "d_model": ("d_model",),
    "activation_function": ("activation_function",),
    "layer_norm_position": ("layer_norm_position",),
    **{name: (name,) for name in DROPOUTS},
}


@dataclass
class VocabularyArguments(VocabularySettings):
    """sentencepiece settings (see training.tokenizer.VocabularySettings); ignored when fine-tuning."""

    _argument_group_name: ClassVar[str] = "vocabulary (sentencepiece, joint source + target; not when fine-tuning)"


@dataclass
class TranslationTrainingArguments(Seq2SeqTrainingArguments):
    """Seq2SeqTrainingArguments with the paper's defaults (§5.3, §5.4, §6.1) and the token budget."""

    _argument_group_name: ClassVar[str] = "training: the recipe's settings (§5, §6.1), then Seq2SeqTrainingArguments'"

    max_tokens: int = field(default=4096, metadata={"help": "Padded tokens per batch and side (paper: ~25000)."})
    regroup_batches: bool = field(
        default=False,
        metadata={
            "help": "Every epoch, put pairs of the same lengths into batches with other such pairs (the same batch "
            "shapes, other company, as Marian's shuffled batches have). Off: the batches are formed once and only "
            "their order changes (fairseq's)."
        },
    )
    curriculum_steps: int = field(
        default=0,
        metadata={
            "help": "A competence-based curriculum (Platanios et al., NAACL 2019): for this many steps, batches are "
            "drawn from the shortest pairs only, a share that grows with the square root of the step from a hundredth "
            "to all; 0: off."
        },
    )
    learning_rate: float = field(
        default=0.0,
        metadata={"help": "Peak learning rate; 0 means the paper's d_model^-0.5 * warmup^-0.5 (times --lr_scale)."},
    )
    lr_scale: float = field(default=1.0, metadata={"help": "Multiplies the paper's learning rate (with 0 above)."})
    warmup_steps: float = field(default=4000, metadata={"help": "Warmup steps of the inverse-sqrt schedule."})
    lr_scheduler_type: str = field(
        default="inverse_sqrt",
        metadata={"help": "§5.3: linear warmup over --warmup_steps, then decay with 1/sqrt(step) (the paper's)."},
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam beta1 (§5.3: 0.9)."})
    adam_beta2: float = field(default=0.98, metadata={"help": "Adam beta2 (§5.3: 0.98)."})
    adam_epsilon: float = field(default=1e-9, metadata={"help": "Adam epsilon (§5.3: 1e-9)."})
    weight_decay: float = field(default=0.0, metadata={"help": "None in the paper."})
    max_grad_norm: float = field(default=0.0, metadata={"help": "0: no clipping, as in the paper."})
    label_smoothing_factor: float = field(default=0.1, metadata={"help": "Label smoothing epsilon (§5.4: 0.1)."})
    bpe_dropout: float = field(
        default=0.0,
        metadata={
            "help": "BPE-dropout (Provilkov et al., 2020): every epoch the training pairs are segmented anew, each "
            "merge skipped with this probability (their 0.1); evaluation and the shipped tokenizer are unchanged. "
            "0: off."
        },
    )
    r_drop_alpha: float = field(
        default=0.0,
        metadata={
            "help": "R-Drop (Liang et al., 2021): each training pair runs twice under two dropout masks and the loss "
            "adds this times the symmetric KL divergence of the two predictions (their 5 for translation); a step "
            "costs over twice as much. 0: off."
        },
    )
    word_dropout: float = field(
        default=0.0,
        metadata={
            "help": "Word dropout as blank noising (Xie et al., 2017; Sennrich and Zhang, 2019, for small corpora): "
            "each token of the encoder's and the decoder's inputs in training becomes <unk> with this probability; "
            "the labels stay whole. 0: off."
        },
    )
    late_dropout_steps: int = field(
        default=0,
        metadata={
            "help": "Late dropout (Liu et al., ICML 2023): the model trains without dropout for this many steps, then "
            "with its rates (--dropout); for a model that overfits small data. 0: off."
        },
    )
    layer_drop: float = field(
        default=0.0,
        metadata={
            "help": "LayerDrop (Fan et al., ICLR 2020): each encoder and decoder layer is skipped for a whole training "
            "batch with this probability, its input passed on (training.layer_drop). 0: off."
        },
    )
    muon: bool = field(
        default=False,
        metadata={
            "help": "Muon (Jordan et al., 2024) for the layers' weight matrices, at Liu et al.'s (2025) rate that "
            "matches AdamW's update size, so --learning_rate and its schedule apply unchanged; AdamW for the "
            "embeddings, LayerNorms and biases (training.muon)."
        },
    )
    target_vocabulary_softmax: bool = field(
        default=False,
        metadata={
            "help": "The loss's softmax over the tokens that occur in the training targets only, not the whole joint "
            "vocabulary (training.loss.TargetVocabulary): smaller products in the output layer at every step. The "
            "saved generation config suppresses the other tokens and renormalises the rest (suppress_tokens, "
            "renormalize_logits), so generate() never writes one and scores the rest as the loss did. Off.",
        },
    )
    fused_output_loss: bool | None = field(
        default=None,
        metadata={
            "help": "Compute the output layer and the label-smoothed loss together, 256 target positions at a time "
            "(training.loss): faster training steps on a CPU, the same loss. Default: on where it applies (one CPU "
            "process, this package's model, neither --r_drop_alpha nor --torch_compile); else off.",
            "nargs": "?",
            "const": True,
        },
    )
    random_bits_dropout: bool | None = field(
        default=None,
        metadata={
            "help": "Draw dropout's masks from 16-bit random integers instead of torch's CPU bernoulli_ "
            "(training.dropout): the same dropout, faster training steps on a CPU. Default: on where it applies (a "
            "CPU); else off.",
            "nargs": "?",
            "const": True,
        },
    )
    cuda_graphs: bool | None = field(
        default=None,
        metadata={
            "help": "Record each batch shape's forward pass, loss and backward pass as CUDA graphs and replay them "
            "(training.cuda_graphs): a step costs the GPU's work instead of its kernel launches from Python. Default: "
            "on where it applies (one CUDA GPU process, this package's model and this recipe's loss, none of "
            "--torch_compile, --gradient_accumulation_steps and --late_dropout_steps); else off.",
            "nargs": "?",
            "const": True,
        },
    )
    predict_with_generate: bool = field(default=True, metadata={"help": "Evaluate BLEU on beam-search output."})
    num_beams: int = field(default=4, metadata={"help": "Beam size for evaluation and the saved model (§6.1)."})
    length_penalty: float = field(default=0.6, metadata={"help": "Beam length penalty alpha (§6.1)."})
    max_length_beyond_source: int = field(default=50, metadata={"help": "Output limit: source length + this."})
    max_train_minutes: float = field(
        default=0,
        metadata={
            "help": "Stop training at the first logging step after this many minutes of wall time (with a "
            "checkpoint), or at max_steps if sooner; 0: no time limit. Final evaluations and averaging follow."
        },
    )
    average_checkpoints: int = field(
        default=0, metadata={"help": "Average the last N checkpoints into the final model (§6.1: 5); 0 or 1: off."}
    )
    ema_decay: float = field(
        default=0.0,
        metadata={
            "help": "Keep an exponential moving average of the weights (Marian's exponential smoothing, fairseq's "
            "--ema-decay), moved 1 - this toward them after every step (training.exponential_average); it is "
            "evaluated after the last and the averaged model, and ships. 0: off."
        },
    )
    test_every_model: bool = field(
        default=True,
        metadata={
            "help": "Translate the test sets with every final model (the last, the averaged, the exponential "
            "average); false: with the model that ships only, the others scored on the validation set alone, where "
            "they are compared (the minutes of their test translations saved)."
        },
    )
    reuse_freed_memory: bool = field(
        default=True,
        metadata={
            "help": "Keep the memory a training step frees for the next step (glibc's malloc: no mmap, no trimming; "
            "training.allocator): a Multi30K step on 2 CPU cores took 0.59 s instead of 0.80-0.85 s, for a fifth more "
            "resident memory. Linux with glibc only; false: malloc's defaults."
        },
    )
    flush_denormal: bool = field(
        default=True,
        metadata={
            "help": "Read and write floats below float32's smallest normal number (1.2e-38) as zero (torch's "
            "set_flush_denormal, x86 CPUs): arithmetic on such subnormal numbers is many times slower there, and the "
            "optimizer's moments of FFN units that no longer fire decay into them. false: IEEE's subnormals."
        },
    )
    mkl_intel_kernels: bool = field(
        default=True,
        metadata={
            "help": "On an AMD CPU with AVX2, have MKL (torch's float32 matrix products on x86) run the kernels it "
            "keeps for Intel's CPUs, by making its vendor check answer Intel (training.mkl_kernels): faster products, "
            "the same arithmetic. Other CPUs are left as they are. false: MKL's own choice."
        },
    )
    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={
            "help": "Under several processes, search each step's graph for parameters without a gradient (the "
            "Trainer's default for a PreTrainedModel). Off: every parameter of this model gets one at every step, so "
            "the search finds nothing (and torch warns that it searched in vain)."
        },
    )
    dataloader_num_workers: int | None = field(
        default=None,
        metadata={
            "help": "Processes that build the batches. Default: 2 with a CUDA GPU (batches are padded while the GPU "
            "computes), 0 on a CPU."
        },
    )
    dataloader_pin_memory: bool = field(
        default=False,
        metadata={
            "help": "Copy batches to the GPU from pinned memory. Off: a batch is under a megabyte, and with persistent "
            "workers torch 2.11 and older waits 5 s for each worker at exit (pytorch#81794)."
        },
    )
    bf16: bool | None = field(
        default=None,
        # nargs/const: a bare --bf16 still means true, as for the Trainer's own flag (HfArgumentParser passes these on).
        metadata={
            "help": "bf16 autocast. Default: on where a CUDA GPU computes bf16 natively, or where the CPU has AMX or "
            "AVX512-BF16 and a timed training step of the model is faster in bf16; else off.",
            "nargs": "?",
            "const": True,
        },
    )

    def __post_init__(self):
        least_values = (
            ("max_tokens", 1),
            ("num_beams", 1),
            ("max_length_beyond_source", 0),
            ("warmup_steps", 1),
            ("curriculum_steps", 0),
            ("late_dropout_steps", 0),
        )
        for name, least in least_values:
            if getattr(self, name) < least:
                raise ValueError(f"--{name} {getattr(self, name)}: must be at least {least}.")
        if self.max_train_minutes < 0:
            raise ValueError(f"--max_train_minutes {self.max_train_minutes}: must be positive (or 0: no limit).")
        if not 0 <= self.label_smoothing_factor < 1:
            raise ValueError(f"--label_smoothing_factor {self.label_smoothing_factor}: must be in [0, 1).")
        if self.r_drop_alpha < 0:
            raise ValueError(f"--r_drop_alpha {self.r_drop_alpha}: must be at least 0 (0: off).")
        if not 0 <= self.bpe_dropout < 1:
            raise ValueError(f"--bpe_dropout {self.bpe_dropout}: must be in [0, 1) (0: off).")
        if not 0 <= self.word_dropout < 1:
            raise ValueError(f"--word_dropout {self.word_dropout}: must be in [0, 1) (0: off).")
        if not 0 <= self.layer_drop < 1:
            raise ValueError(f"--layer_drop {self.layer_drop}: must be in [0, 1) (0: off).")
        if self.layer_drop:
            self.ddp_find_unused_parameters = True  # a skipped layer's parameters get no gradient in that step
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"--ema_decay {self.ema_decay}: must be in [0, 1) (0: off).")
        if self.load_best_model_at_end and (self.average_checkpoints > 1 or self.ema_decay):
            raise ValueError(
                "--load_best_model_at_end ships the checkpoint that validated best, --average_checkpoints and "
                "--ema_decay an average of the last steps' weights: use one of them (the best checkpoint: add "
                "--average_checkpoints 0 --ema_decay 0)."
            )
        if self.fp16 and not torch.cuda.is_available():
            raise ValueError("--fp16 needs a CUDA GPU (a CPU run would ignore it): leave it out, or use --bf16.")
        if self.fp16 and self.bf16 is None:
            self.bf16 = False
        if self.torch_compile_backend == "cudagraphs":
            raise ValueError(
                "--torch_compile_backend cudagraphs replays the CUDA graph it recorded for one batch shape on the "
                "next, and token-budget batches change shape every step (a size error at the third step); for CUDA "
                "graphs use --cuda_graphs, which records one graph a shape."
            )
        if self.dataloader_num_workers is None:
            self.dataloader_num_workers = 2 if torch.cuda.is_available() else 0
            # Not restarted at every epoch; except with BPE-dropout, whose segmentations of an epoch reach the workers
            # when they start.
            self.dataloader_persistent_workers = torch.cuda.is_available() and not self.bpe_dropout
        if self.bpe_dropout and self.regroup_batches:
            raise ValueError("--regroup_batches with --bpe_dropout: BPE-dropout already cuts new batches every epoch.")
        if self.bpe_dropout and self.dataloader_persistent_workers and self.dataloader_num_workers:
            raise ValueError(
                "--bpe_dropout with --dataloader_persistent_workers: persistent workers would keep the first "
                "epoch's segmentations; leave --dataloader_persistent_workers out."
            )
        if not (torch.cuda.is_available() or torch.backends.mps.is_available()):
            # accelerate runs several CPU processes as DDP (gloo), and bf16 on CPU, only when told the run is on CPU.
            self.use_cpu = True
            self.dataloader_pin_memory = False  # pinned memory only helps copies to a GPU
        if self.bf16 and self.use_cpu and not cpu_bf16_instructions():
            logger.warning(
                "--bf16 on a CPU without AMX or AVX512-BF16: it emulates bf16's products, many times slower than "
                "fp32's. Leave --bf16 out (a CPU run then measures which is faster) or give --bf16 false."
            )
        if is_schedule_free(self.optim):
            self.check_schedule_free()
        if self.muon and self.optim not in TORCH_ADAMW:
            raise ValueError(
                f"--muon steps the layers' matrices with Muon and the rest with torch's AdamW: leave --optim "
                f"{self.optim} out."
            )
        if self.target_vocabulary_softmax and self.bpe_dropout:
            raise ValueError(
                "--target_vocabulary_softmax with --bpe_dropout: BPE-dropout writes the targets in pieces that their "
                "segmentation without it does not hold; use one of them."
            )
        if self.fused_output_loss and (clash := self.fused_output_loss_clash()):
            raise ValueError(clash)
        if self.random_bits_dropout and (clash := self.random_bits_dropout_clash()):
            raise ValueError(clash)
        if self.cuda_graphs and (clash := self.cuda_graphs_clash()):
            raise ValueError(clash)
        super().__post_init__()

    @property
    def schedule_name(self) -> str:
        """The rate's schedule as transformers names it (parsing makes the flag a SchedulerType)."""
        return getattr(self.lr_scheduler_type, "value", self.lr_scheduler_type)

    def check_schedule_free(self) -> None:
        """A schedule-free optimizer (`--optim schedule_free_adamw`) sets its own rate and needs no decaying one, and
        its package is an extra: both checked now, not after the vocabulary has trained."""
        if not is_schedulefree_available():
            raise MissingExtra(f"--optim {self.optim} needs schedulefree", "schedulefree")
        if self.schedule_name != SchedulerType.CONSTANT.value:
            raise ValueError(
                f"--optim {self.optim} sets its own rate (a warmup over --warmup_steps, then --learning_rate): add "
                f"--lr_scheduler_type constant (not {self.schedule_name})."
            )
        if self.ema_decay:
            raise ValueError(
                f"--ema_decay with --optim {self.optim}: the optimizer keeps an average of its own, and trains at "
                "other weights than that average; use one of them."
            )

    def fused_output_loss_clash(self) -> str | None:
        """Why the fused output loss cannot run here, or None: it replaces the model's output layer and the loss on
        one CPU process only (`use_cpu`: set where there is no GPU, or asked for on a machine with one)."""
        if not self.use_cpu:
            return "--fused_output_loss is for training on a CPU; on a GPU leave it out."
        if self.r_drop_alpha:
            return "--fused_output_loss with --r_drop_alpha: R-Drop needs the logits; use one of them."
        if self.torch_compile:
            return "--fused_output_loss with --torch_compile: the fused loss bypasses the compiled model."
        if launched_as_several_processes():
            return "--fused_output_loss trains in one process; leave it out under torchrun / accelerate."
        return None

    def random_bits_dropout_clash(self) -> str | None:
        """Why dropout's masks are left to torch here, or None: on a GPU its fused dropout kernel draws them fast."""
        if not self.use_cpu:
            return "--random_bits_dropout is for training on a CPU; on a GPU leave it out."
        return None

    def cuda_graphs_clash(self) -> str | None:
        """Why the training step cannot be recorded as CUDA graphs here, or None."""
        if self.use_cpu or not torch.cuda.is_available():
            return "--cuda_graphs needs a CUDA GPU: leave it out."
        if self.torch_compile:
            return "--cuda_graphs with --torch_compile: use one of them."
        if self.late_dropout_steps:
            return "--cuda_graphs with --late_dropout_steps: a graph keeps the dropout it was recorded with."
        if self.layer_drop:
            return "--cuda_graphs with --layer_drop: a graph keeps the layers it was recorded with."
        if self.gradient_accumulation_steps > 1:
            return (
                "--cuda_graphs with --gradient_accumulation_steps: a shape's second batch in one step would overwrite "
                "the first one's gradients (pytorch#181723); use a larger --max_tokens instead."
            )
        if launched_as_several_processes():
            return "--cuda_graphs records one process's step; leave it out under torchrun / accelerate."
        return None

    def paper_learning_rate(self, d_model: int) -> float:
        """§5.3's peak, lrate = d_model^-0.5 · warmup_steps^-0.5 (at the last warmup step), times --lr_scale."""
        return self.lr_scale * d_model**-0.5 * int(self.warmup_steps) ** -0.5

    def set_bf16(self, enabled: bool) -> None:
        """Decide bf16 after parsing (train.py measures it when no flag was given: None until then, which the
        Trainer reads as off), before the Trainer hands the precision to accelerate."""
        self.bf16 = enabled
        self.mixed_precision = "bf16" if enabled else "no"  # what TrainingArguments.__post_init__ derives from bf16


def launched_as_several_processes() -> bool:
    """Whether torchrun / accelerate launched this run as several processes (read from the environment they set,
    since the arguments are checked before the Trainer sets up its processes)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


# Trainer settings that the recipe replaces: given, they would be silently ignored, or change the evaluations alone.
TOKEN_BATCHES = "has no effect here: training batches hold --max_tokens padded tokens per side (§5.1)"
RECIPE_DECODING = "would change how the evaluations decode, not the saved model's generation config: give"
REPLACED_BY_THE_RECIPE = {
    "per_device_train_batch_size": f"{TOKEN_BATCHES}, not a number of sentences.",
    "train_sampling_strategy": f"{TOKEN_BATCHES}, formed of pairs of similar lengths in an order of their own; "
    "--regroup_batches and --curriculum_steps change it.",
    "group_by_length": f"{TOKEN_BATCHES}, formed of pairs of similar lengths already.",  # its name in 4.x and early 5.x
    "sortish_sampler": f"{TOKEN_BATCHES}, formed of pairs of similar lengths already.",
    "dataloader_drop_last": f"{TOKEN_BATCHES}; the Trainer's rule for a last batch of fewer sentences does not reach "
    "them.",
    "auto_find_batch_size": f"{TOKEN_BATCHES}: where a step runs out of memory, give a smaller --max_tokens.",
    "generation_num_beams": f"{RECIPE_DECODING} --num_beams, which both read (§6.1).",
    "generation_max_length": f"{RECIPE_DECODING} --max_length_beyond_source (the paper's limit: the source's length "
    "+ N), which both read (§6.1).",
    "generation_config": f"{RECIPE_DECODING} --num_beams, --length_penalty and --max_length_beyond_source, which both "
    "read (§6.1).",
}

ARGUMENT_CLASSES = (ModelArguments, DataArguments, VocabularyArguments, TranslationTrainingArguments)


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice (again on line {key_node.start_mark.line + 1})"
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def unknown_names(unknown: Collection[str], known: Collection[str]) -> str:
    """The `unknown` setting names for a message, each with the `known` one it is likely a misspelling of."""
    hints = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, known, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return ", ".join(hints)


SHIPPED_CONFIGS = Path(__file__).parent / "configs"  # beside this module in the wheel too: found after pip install


def config_file(name: str) -> Path:
    """The YAML file `name` names: a path, else a config shipped in training/configs, by its name (`tatoeba_en_zh`,
    `tatoeba_en_zh.yaml` or `training/configs/tatoeba_en_zh.yaml`): the docs' commands then run from a pip install."""
    path = Path(name)
    shipped = SHIPPED_CONFIGS / (path.name if path.suffix in (".yaml", ".yml") else f"{path.name}.yaml")
    return shipped if not path.exists() and shipped.is_file() else path


def read_config(path: str) -> dict:
    """The settings of a YAML config file (null values left out: they keep the argument's default)."""
    file = config_file(path)
    if not file.exists():
        shipped = ", ".join(sorted(config.stem for config in SHIPPED_CONFIGS.glob("*.yaml")))
        raise SystemExit(f"error: no config file {path}, and no shipped config of that name ({shipped}).")
    try:
        settings = yaml.load(file.read_text(encoding="utf-8"), Loader=UniqueKeyLoader) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise SystemExit(f"error: cannot read the config file {path}: {error}") from None
    if not isinstance(settings, dict):
        raise SystemExit(
            f"error: {path}: expected a mapping of argument names to values, got {type(settings).__name__}."
        )
    return {name: value for name, value in settings.items() if value is not None}


def config_flags(settings: dict, config: str | None) -> tuple[list[str], dict]:
    """A config file's settings as command-line flags, so that argparse checks their types as it checks the command
    line's (a YAML `max_tokens: true` or `max_steps: 8.5` is refused, not taken as given), and the empty lists that no
    flag can say, as defaults. A mapping (`lr_scheduler_kwargs: {num_decay_steps: 3000}`) becomes the JSON string
    that the command line gives the settings that take one."""
    list_fields = {
        entry.name
        for arguments in ARGUMENT_CLASSES
        for entry in dataclasses.fields(arguments)
        if list in {typing.get_origin(entry.type), *map(typing.get_origin, typing.get_args(entry.type))}
    }
    flags, empty_lists = [], {}
    for name, value in settings.items():
        # The fields the Trainer's arguments read as JSON when given a string (HfArgumentParser retypes them str).
        if isinstance(value, dict) and name in TranslationTrainingArguments._VALID_DICT_FIELDS:
            flags += [f"--{name}", json.dumps(value)]
            continue
        if isinstance(value, dict) or (isinstance(value, list) and name not in list_fields):
            raise SystemExit(f"error: {config}: {name}: {value!r} is not one value; {name} takes one.")
        if value == []:
            empty_lists[name] = []
            continue
        values = value if isinstance(value, list) else [value]
        flags += [f"--{name}", *(str(item).lower() if isinstance(item, bool) else str(item) for item in values)]
    return flags, empty_lists


def data_arguments(settings: dict, config: str) -> DataArguments:
    """The data settings among a config's `settings`, parsed as vt-train parses them (its defaults where unset), for a
    tool that reads the corpus a run will read."""
    names = {entry.name for entry in dataclasses.fields(DataArguments)}
    # A null keeps the default, as read_config has it.
    given = {name: value for name, value in settings.items() if name in names and value is not None}
    (data,) = parse_settings(HfArgumentParser(DataArguments, exit_on_error=False), given, config, [], f"{config}: ")
    return data


def parse_settings(parser: HfArgumentParser, settings: dict, config: str | None, argv: list[str], origin: str) -> tuple:
    """The parser's dataclasses from a config's `settings` and then the command line's `argv` (later flags win); a
    malformed value, or one a dataclass refused, ends the run with one line that `origin` begins."""
    flags, empty_lists = config_flags(settings, config)
    parser.set_defaults(**empty_lists)
    try:
        return tuple(parser.parse_args_into_dataclasses(args=flags + argv))
    except (argparse.ArgumentError, ValueError) as error:
        raise SystemExit(f"error: {origin}{error}") from None


def parse_arguments(
    argv: list[str] | None = None,
) -> tuple[ModelArguments, DataArguments, VocabularyArguments, TranslationTrainingArguments]:
    """(model, data, vocabulary, training) arguments from `--config FILE` and/or flags; flags win. Every value is
    checked here, before any data is read: a bad one ends the run with one line naming it (and the config file)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(
        ARGUMENT_CLASSES,
        exit_on_error=False,
        prog="vt-train",
        usage="%(prog)s [--config FILE] [--FLAG VALUE ...]",
        description="Train (or fine-tune) the Transformer of 'Attention Is All You Need' with the paper's recipe, "
        "evaluate it and write a Hub-ready model folder. Every flag can also be a key of the --config file.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="A YAML file of settings, or a shipped config's name, e.g. tatoeba_en_zh (flags on the command line win).",
    )
    settings, config = {}, None
    if argv.count("--config") > 1:
        raise SystemExit("error: --config is given twice: give one YAML file (flags on the command line override it).")
    if "--config" in argv:
        at = argv.index("--config")
        if at + 1 >= len(argv):
            raise SystemExit("error: --config needs a YAML file.")
        config, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
        settings = read_config(config)
        known = {entry.name for arguments in ARGUMENT_CLASSES for entry in dataclasses.fields(arguments)}
        unknown = set(settings) - known
        if unknown:
            hints = unknown_names(unknown, known)
            raise SystemExit(f"error: {config}: unknown setting(s) {hints}; `vt-train --help` lists them all.")
    given = {flag.split("=")[0].removeprefix("--") for flag in argv if flag.startswith("--")}
    ignored = sorted((given | set(settings)) & set(REPLACED_BY_THE_RECIPE))
    if ignored:
        name = ignored[0]
        raise SystemExit(f"error: --{name} {REPLACED_BY_THE_RECIPE[name]}")
    if given & set(DATA_SOURCES):  # a data source on the command line replaces the config's, not joins it
        settings = {name: value for name, value in settings.items() if name not in DATA_SOURCES}
    origin = f"{config} with the command line: " if config else ""
    # The last item would be the namespace of --config, which was read above: only the dataclasses are returned.
    parsed = parse_settings(parser, settings, config, argv, origin)[: len(ARGUMENT_CLASSES)]
    model_args, _, vocab_args, training_args = parsed
    check_folders(training_args)
    check_base_model(model_args.model_name_or_path, training_args.target_vocabulary_softmax)
    if training_args.bpe_dropout and not model_args.model_name_or_path and vocab_args.model_type != "bpe":
        raise SystemExit(
            f"error: --bpe_dropout {training_args.bpe_dropout} skips BPE merges: it needs --model_type bpe, "
            f"not {vocab_args.model_type!r}."
        )
    return parsed


def check_folders(args: TranslationTrainingArguments) -> None:
    """--output_dir must be a folder or new, and --resume_from_checkpoint a checkpoint folder that exists: the Trainer
    finds either out only with a traceback, the second after the data and vocabulary are ready."""
    output_dir = Path(args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise SystemExit(f"error: --output_dir {output_dir} is a file: give a folder for the run.")
    checkpoint = args.resume_from_checkpoint
    if checkpoint and not (Path(checkpoint) / "trainer_state.json").is_file():
        raise SystemExit(
            f"error: --resume_from_checkpoint {checkpoint}: no checkpoint folder there (one with trainer_state.json). "
            "A killed run needs no flag: the same command resumes from its newest checkpoint."
        )


def narrowed_softmax(folder: str) -> int:
    """How many tokens a model folder's generation config suppresses and renormalises around (what
    --target_vocabulary_softmax writes there); 0 where it narrows nothing, or where its file does not read (loading the
    model names that file's fault)."""
    try:
        config = GenerationConfig.from_pretrained(folder)
    except (OSError, ValueError):
        return 0
    return len(config.suppress_tokens) if narrows_softmax(config) else 0


def check_base_model(name: str | None, target_vocabulary_softmax: bool) -> None:
    """--model_name_or_path names a model folder of this package with its tokenizer, or a Hub id. A folder whose
    model was trained with --target_vocabulary_softmax is fine-tuned so too: its softmax never learned to give the
    other tokens a low score, and a loss over every token would spend the fine-tune on that (docs/training.md)."""
    if name and Path(name).is_dir():
        try:
            check_config_file(name)
            check_tokenizer_file(name)
        except ValueError as error:
            raise SystemExit(f"error: --model_name_or_path {error}") from None
        suppressed = narrowed_softmax(name)
        if suppressed and not target_vocabulary_softmax:
            raise SystemExit(
                f"error: --model_name_or_path {name} was trained with --target_vocabulary_softmax (its generation "
                f"config suppresses the {suppressed:,} tokens its softmax never scored): fine-tune it with "
                "--target_vocabulary_softmax true, which keeps the tokens it writes and adds the new targets'."
            )
    elif name and not is_hub_id(name):
        raise SystemExit(f"error: --model_name_or_path {name}: no such folder.")
