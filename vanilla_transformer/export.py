"""Export a trained model folder to CTranslate2, the inference engine that serves OpenNMT and Marian models.

`write_ctranslate2(model_dir, folder)`; on the command line, `vt-export ctranslate2 MODEL_DIR OUT_DIR`
(`vanilla_transformer.tools.export`).

Built on CTranslate2's own converter API (`ctranslate2.converters.Converter` and `specs.TransformerSpec`): this file
only says which of our weights is which of the spec's, so it sits next to the modeling file whose module names it
reads. The paper's model maps one to one: embeddings x sqrt(d_model) (§3.4), post- or pre-LN residual blocks,
multi-head attention with fused projections, the ReLU FFN, and the shared embedding matrix as the pre-softmax
projection. Two things are written explicitly:
- the positional encoding, as a table of `max_positions` rows: CTranslate2's built-in sinusoid puts all sines
  before all cosines, where §3.5 (and this model) interleaves them, sin on even and cos on odd dimensions;
- the tokenizer and generation_config.json, copied into the output folder, so that it translates on its own with
  the folder's beam size, length penalty and output limit.

`ctranslate2` is an optional dependency: `pip install vanilla-transformer[serve]`.
"""

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedTokenizerBase

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .export_base import COPIED_FILES, DEFAULT_MAX_POSITIONS, QUANTIZATIONS, ExportError, load_checked
from .extras import MissingExtra
from .modeling_vanilla_transformer import (
    VanillaTransformerAttention,
    VanillaTransformerDecoderLayer,
    VanillaTransformerEncoderLayer,
    VanillaTransformerForConditionalGeneration,
    sinusoidal_positional_encoding,
)

if TYPE_CHECKING:  # CTranslate2 is the serve extra's
    from ctranslate2.specs.attention_spec import MultiHeadAttentionSpec
    from ctranslate2.specs.common_spec import LayerNormSpec, LinearSpec
    from ctranslate2.specs.transformer_spec import FeedForwardSpec

try:
    from ctranslate2.converters import Converter
    from ctranslate2.specs.common_spec import Activation
    from ctranslate2.specs.transformer_spec import TransformerSpec
except ImportError as error:
    raise MissingExtra("Exporting needs CTranslate2", "serve") from error

# activation_function (transformers' ACT2FN names) -> CTranslate2's FFN activations
ACTIVATIONS = {
    "relu": Activation.RELU,  # the paper's max(0, x)
    "gelu": Activation.GELU,
    "gelu_new": Activation.GELUTanh,
    "gelu_pytorch_tanh": Activation.GELUTanh,
    "silu": Activation.SWISH,
    "swish": Activation.SWISH,
}

# What every CTranslate2 model folder holds: how an earlier export is told from other folders.
CTRANSLATE2_FILES = ("config.json", "model.bin")


def unsupported_settings(config: VanillaTransformerConfig) -> list[str]:
    """The settings of `config` that CTranslate2's TransformerSpec has no place for, each with the reason."""
    problems = []
    if config.encoder_attention_heads != config.decoder_attention_heads:
        problems.append(
            f"encoder_attention_heads={config.encoder_attention_heads} and decoder_attention_heads="
            f"{config.decoder_attention_heads}: TransformerSpec has one head count for both stacks"
        )
    if config.activation_function not in ACTIVATIONS:
        problems.append(
            f"activation_function={config.activation_function!r}: CTranslate2 has {', '.join(sorted(ACTIVATIONS))}"
        )
    return problems


class VanillaTransformerConverter(Converter):
    """CTranslate2's converter for a model folder written by `training.train` (or `save_pretrained`)."""

    def __init__(self, model_dir: str | Path, max_positions: int = DEFAULT_MAX_POSITIONS):
        self.model_dir = model_dir
        self.max_positions = max_positions

    def _load(self) -> TransformerSpec:
        return transformer_spec(*load_checked(self.model_dir), self.max_positions)


@torch.no_grad()
def transformer_spec(
    model: VanillaTransformerForConditionalGeneration, tokenizer: PreTrainedTokenizerBase, max_positions: int
) -> TransformerSpec:
    """The `TransformerSpec` holding `model`'s weights, with the tokenizer's vocabulary and special tokens."""
    config = model.config
    problems = unsupported_settings(config)
    if problems:
        raise ExportError("CTranslate2 cannot express " + "; ".join(problems) + ".")
    tokens = tokens_by_id(tokenizer)
    if len(tokens) != config.vocab_size:
        raise ExportError(f"The tokenizer has {len(tokens)} tokens but the model's vocab_size is {config.vocab_size}.")
    spec = TransformerSpec.from_config(
        (config.encoder_layers, config.decoder_layers),
        config.encoder_attention_heads,
        pre_norm=config.layer_norm_position == "pre",
        activation=ACTIVATIONS[config.activation_function],
    )
    positions = sinusoidal_positional_encoding(torch.arange(max_positions), config.d_model)  # (max_positions, D)
    for stack_spec, stack in ((spec.encoder, model.model.encoder), (spec.decoder, model.model.decoder)):
        embeddings = stack_spec.embeddings[0] if isinstance(stack_spec.embeddings, list) else stack_spec.embeddings
        embeddings.weight = stack.embeddings.embed_tokens.weight
        stack_spec.scale_embeddings = stack.embeddings.embed_scale
        stack_spec.position_encodings.encodings = positions
        if stack.layer_norm is not None:  # pre-LN: the final LayerNorm of the stack
            set_layer_norm(stack_spec.layer_norm, stack.layer_norm)
    for layer_spec, layer in zip(spec.encoder.layer, model.model.encoder.layers, strict=True):
        set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_sublayer.layer_norm, fused=True)
        set_ffn(layer_spec.ffn, layer)
    for layer_spec, layer in zip(spec.decoder.layer, model.model.decoder.layers, strict=True):
        set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_sublayer.layer_norm, fused=True)
        set_attention(layer_spec.attention, layer.encoder_attn, layer.encoder_attn_sublayer.layer_norm, fused=False)
        set_ffn(layer_spec.ffn, layer)
    spec.decoder.projection.weight = model.lm_head.weight  # tied: the shared embedding matrix (§3.4)

    spec.config.bos_token = tokens[config.bos_token_id]
    spec.config.eos_token = tokens[config.eos_token_id]
    spec.config.unk_token = tokenizer.unk_token
    spec.config.decoder_start_token = tokens[config.decoder_start_token_id]
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def tokens_by_id(tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """The tokenizer's tokens in id order: the vocabulary CTranslate2 takes and returns."""
    return [token for token, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]


def check_exported_vocabulary(folder: str | Path, tokenizer: PreTrainedTokenizerBase) -> None:
    """The export's tokenizer.json is the one it was converted with: the same tokens as the vocabulary file that
    CTranslate2 wrote (another one translates into garbage without an error)."""
    path = Path(folder) / "shared_vocabulary.json"
    try:
        exported = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ExportError(f"{path} cannot be read ({error}): export the model again.") from None
    if exported != tokens_by_id(tokenizer):
        raise ExportError(
            f"{Path(folder) / 'tokenizer.json'} is not the tokenizer of this export (its tokens differ from "
            f"{path.name}'s): export the model again, or copy its tokenizer.json back."
        )


def set_layer_norm(spec: "LayerNormSpec", layer_norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = layer_norm.weight, layer_norm.bias


def set_linear(spec: "LinearSpec", linears: list[torch.nn.Linear]) -> None:
    """One CTranslate2 linear layer from one or more of ours, stacked along the output dimension."""
    spec.weight = torch.cat([linear.weight for linear in linears])
    spec.bias = torch.cat([linear.bias for linear in linears])


def set_attention(
    spec: "MultiHeadAttentionSpec", attention: VanillaTransformerAttention, layer_norm: torch.nn.LayerNorm, fused: bool
) -> None:
    """Self-attention: one Q|K|V product; encoder-decoder attention: Q, then K|V of the encoder output."""
    projections = [attention.q_proj, attention.k_proj, attention.v_proj]
    if fused:
        set_linear(spec.linear[0], projections)
    else:
        set_linear(spec.linear[0], projections[:1])
        set_linear(spec.linear[1], projections[1:])
    set_linear(spec.linear[-1], [attention.out_proj])
    set_layer_norm(spec.layer_norm, layer_norm)


def set_ffn(spec: "FeedForwardSpec", layer: VanillaTransformerEncoderLayer | VanillaTransformerDecoderLayer) -> None:
    set_linear(spec.linear_0, [layer.ffn.fc1])
    set_linear(spec.linear_1, [layer.ffn.fc2])
    set_layer_norm(spec.layer_norm, layer.ffn_sublayer.layer_norm)


def record_max_positions(tokenizer_config: Path, max_positions: int) -> None:
    """The exported model has positions for `max_positions` tokens of source and of output, no more: written as the
    tokenizer's `model_max_length`, where transformers keeps a model's longest input, for vt-translate to check."""
    if not tokenizer_config.is_file():
        return
    settings = json.loads(tokenizer_config.read_text(encoding="utf-8"))
    settings["model_max_length"] = max_positions
    tokenizer_config.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_ctranslate2(
    model_dir: str | Path,
    folder: str | Path,
    quantization: str | None = None,
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> Path:
    """Write the CTranslate2 model of `model_dir` into `folder` (made or overwritten), with its tokenizer and
    generation config. `vt-export` (`vanilla_transformer.tools.export`) puts it in place without losing anything."""
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(f"quantization {quantization!r} is not one of {', '.join(QUANTIZATIONS)}.")
    if max_positions < 1:
        raise ExportError(f"max_positions={max_positions}: must be at least 1.")
    folder = Path(folder)
    VanillaTransformerConverter(model_dir, max_positions).convert(str(folder), quantization=quantization, force=True)
    for name in COPIED_FILES:
        if (Path(model_dir) / name).is_file():
            shutil.copy(Path(model_dir) / name, folder / name)
    record_max_positions(folder / "tokenizer_config.json", max_positions)
    return folder
