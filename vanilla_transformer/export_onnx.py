"""Export a trained model folder to ONNX, for onnxruntime (Python) and onnxruntime-web (the browser explorer).

`write_onnx(model_dir, folder)`; on the command line, `vt-export onnx MODEL_DIR OUT_DIR [--quantization int8]`
(`vanilla_transformer.tools.export`).

Two graphs, traced from the modeling file's own modules by `torch.onnx.export` (optimum-onnx, which exports Marian,
requires transformers < 4.58):
- `encoder.onnx`: input_ids, attention_mask (B, S) -> last_hidden_state (B, S, D), and `encoder_attentions`
  (layers, B, H, S, S) for the explorer;
- `decoder.onnx`: input_ids (B, T), encoder_attention_mask (B, S), encoder_hidden_states (B, S, D) and
  `past_key_values.{i}.decoder.key` / `.value` (B, H, P, D/H) of each layer -> logits (B, T, V),
  `present.{i}.decoder.key` / `.value` (B, H, P + T, D/H), `decoder_attentions` (layers, B, H, T, P + T) and
  `cross_attentions`
  (layers, B, H, T, S). The names are optimum's and transformers.js's. One graph serves every use: P = 0 and T = the
  whole target is teacher forcing (every position predicted in one pass under the causal mask, §3.2.3), P = 0 and
  T = 1 the first step of decoding, P > 0 and T = 1 each later step. The encoder-decoder attention's keys and values are
  computed from the encoder output at every step instead of being cached: for a model of a few million parameters
  that costs less than a second graph would in bytes.
Their weights lie in one file beside them, `weights.onnx_data` (ONNX external data), each tensor once: the embedding
that the encoder, the decoder and the pre-softmax projection share (§3.4) is downloaded once, not twice. The tokenizer
and generation config are copied beside them.

`onnx`, `onnxscript` and `onnxruntime` are optional dependencies: `pip install 'vanilla-transformer[onnx]'`.
"""

import contextlib
import hashlib
import logging
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from packaging.version import Version
from torch import nn
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .export_base import COPIED_FILES, ExportError, load_checked
from .extras import MissingExtra
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration

if TYPE_CHECKING:  # onnx is the onnx extra's
    from onnx import ModelProto

ENCODER, DECODER = "encoder.onnx", "decoder.onnx"
ONNX_FILES = (ENCODER, DECODER)  # what every ONNX export holds: how an earlier one is told from other folders
WEIGHTS = "weights.onnx_data"  # both graphs' weights, each stored once
ONNX_QUANTIZATIONS = ("int8",)
OPSET = 18


def past_names(config: VanillaTransformerConfig, prefix: str) -> list[str]:
    """`prefix.{i}.decoder.key`, `prefix.{i}.decoder.value` for each decoder layer, in that order."""
    return [f"{prefix}.{i}.decoder.{kind}" for i in range(config.decoder_layers) for kind in ("key", "value")]


class EncoderGraph(nn.Module):
    """The encoder stack (§3.1), with its self-attention weights."""

    def __init__(self, model: VanillaTransformerForConditionalGeneration):
        super().__init__()
        self.encoder = model.get_encoder()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.encoder(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
        return outputs.last_hidden_state, torch.stack(outputs.attentions)  # (B, S, D), (layers, B, H, S, S)


class DecoderGraph(nn.Module):
    """T decoder positions after P cached ones, with the pre-softmax projection (§3.4) and every attention weight."""

    def __init__(self, model: VanillaTransformerForConditionalGeneration):
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        encoder_attention_mask: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        *past: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        config = self.model.config
        self_attention = DynamicCache(config=config)
        for layer in range(config.decoder_layers):
            self_attention.update(past[2 * layer], past[2 * layer + 1], layer)  # (B, H, P, D/H) each
        cache = EncoderDecoderCache(self_attention, DynamicCache(config=config))  # cross: computed, not kept
        outputs = self.model(
            decoder_input_ids=input_ids,
            encoder_outputs=(encoder_hidden_states,),
            attention_mask=encoder_attention_mask,
            cache=cache,
            use_cache=True,
            output_attentions=True,
        )
        presents = [tensor for layer in self_attention.layers for tensor in (layer.keys, layer.values)]
        decoder_attentions, cross_attentions = (
            torch.stack(outputs.decoder_attentions),
            torch.stack(outputs.cross_attentions),
        )
        return outputs.logits, *presents, decoder_attentions, cross_attentions


def export_encoder(model: VanillaTransformerForConditionalGeneration, path: Path) -> None:
    ids = torch.tensor([[5, 6, 7, model.config.eos_token_id]] * 2)
    batch, source = torch.export.Dim("batch"), torch.export.Dim("source")
    torch.onnx.export(
        EncoderGraph(model),
        (ids, torch.ones_like(ids)),
        str(path),
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state", "encoder_attentions"],
        dynamic_shapes=({0: batch, 1: source}, {0: batch, 1: source}),
        opset_version=OPSET,
        dynamo=True,
        external_data=False,
        verbose=False,
    )


def export_decoder(model: VanillaTransformerForConditionalGeneration, path: Path) -> None:
    config = model.config
    heads = config.decoder_attention_heads
    batch, source = torch.export.Dim("batch"), torch.export.Dim("source")
    target, past = torch.export.Dim("target"), torch.export.Dim("past", min=0)
    ids = torch.tensor([[config.decoder_start_token_id, 5, 6]] * 2)
    encoder_mask = torch.ones(2, 4, dtype=torch.long)
    encoder_states = torch.randn(2, 4, config.d_model)
    cached = [torch.randn(2, heads, 3, config.d_model // heads) for _ in range(2 * config.decoder_layers)]
    torch.onnx.export(
        DecoderGraph(model),
        (ids, encoder_mask, encoder_states, *cached),
        str(path),
        input_names=[
            "input_ids",
            "encoder_attention_mask",
            "encoder_hidden_states",
            *past_names(config, "past_key_values"),
        ],
        output_names=["logits", *past_names(config, "present"), "decoder_attentions", "cross_attentions"],
        dynamic_shapes=(
            {0: batch, 1: target},
            {0: batch, 1: source},
            {0: batch, 1: source},
            tuple({0: batch, 2: past} for _ in cached),  # *past, as torch.export sees the signature
        ),
        opset_version=OPSET,
        dynamo=True,
        external_data=False,
        verbose=False,
    )


@contextlib.contextmanager
def quiet_exporter() -> Iterator[None]:
    """torch.onnx's notes while it traces (axis names it merges, torchvision ops it skips, deprecations of its own
    internals) and onnxruntime's advice while it quantizes (logged on the root logger) are not the user's to act on:
    hidden; errors still raise."""
    loggers = [logging.getLogger("torch.onnx"), logging.getLogger()]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def quantize_int8(path: Path) -> None:
    """Weights of the matrix products as int8, activations quantized on the fly (onnxruntime's dynamic
    quantization): about a quarter of the float32 bytes."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantized = path.with_suffix(".int8.onnx")
    quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8)
    quantized.replace(path)


def without_trace_records(model: "ModelProto") -> None:
    """Drop the records torch.onnx keeps on each node (the Python stack that made it, with this machine's paths):
    a third of an int8 graph's bytes, read by no runtime."""
    for node in model.graph.node:
        del node.metadata_props[:]


def share_weights(models: list, path: Path, smallest: int = 1024) -> None:
    """Move the initializers of `models` (of at least `smallest` bytes) into one external-data file at `path`, each
    distinct tensor once (by its bytes): tied weights traced into two graphs are stored and downloaded once."""
    from onnx.external_data_helper import set_external_data

    offsets: dict[bytes, int] = {}
    with open(path, "wb") as weights:
        for tensor in (tensor for model in models for tensor in model.graph.initializer):
            data = tensor.raw_data
            if len(data) < smallest:
                continue
            key = hashlib.sha256(data).digest() + tensor.data_type.to_bytes(4, "little")
            if key not in offsets:
                weights.write(b"\0" * (-weights.tell() % 64))  # aligned, as runtimes that map the file want
                offsets[key] = weights.tell()
                weights.write(data)
            set_external_data(tensor, path.name, offset=offsets[key], length=len(data))
            tensor.ClearField("raw_data")


def export_bytes(folder: str | Path) -> int:
    """What a page downloads of an ONNX export: its graphs and their weights."""
    return sum((Path(folder) / name).stat().st_size for name in (*ONNX_FILES, WEIGHTS))


def check_exporter(torch_version: str) -> None:
    """torch 2.9's exporter guards its decomposed matrix products on a length other than 1, so neither graph can take
    the lengths that vary (2.8 and 2.10 and later export them)."""
    if Version(torch_version).release[:2] == (2, 9):
        raise ExportError(
            f"torch {torch_version} cannot export this model to ONNX (its exporter fixes the sentence lengths): "
            "install torch 2.10 or later (pip install 'torch>=2.10'), or 2.8."
        )


def write_onnx(model_dir: str | Path, folder: str | Path, quantization: str | None = None) -> Path:
    """Write the ONNX graphs of `model_dir` into `folder` (made if needed), with its tokenizer and generation config.
    `vt-export` (`vanilla_transformer.tools.export`) puts it in place without losing anything."""
    if quantization is not None and quantization not in ONNX_QUANTIZATIONS:
        raise ExportError(f"quantization {quantization!r} is not one of {', '.join(ONNX_QUANTIZATIONS)} for ONNX.")
    try:
        import onnx
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401  torch.onnx's exporter needs it
    except ImportError:
        raise MissingExtra("Exporting to ONNX needs onnx, onnxscript and onnxruntime", "onnx") from None
    check_exporter(torch.__version__)
    model, _ = load_checked(model_dir)
    model.set_attn_implementation("eager")  # the attention weights are outputs: sdpa never materialises them
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with torch.no_grad(), quiet_exporter():
        export_encoder(model, folder / ENCODER)
        export_decoder(model, folder / DECODER)
        for name in ONNX_FILES if quantization == "int8" else ():
            quantize_int8(folder / name)
    graphs = {name: onnx.load(folder / name) for name in ONNX_FILES}
    for graph in graphs.values():
        without_trace_records(graph)
    share_weights(list(graphs.values()), folder / WEIGHTS)
    for name, graph in graphs.items():
        onnx.save(graph, folder / name)
    for name in (*COPIED_FILES, "config.json"):
        if (Path(model_dir) / name).is_file():
            shutil.copy(Path(model_dir) / name, folder / name)
    return folder
