"""An ONNX export (`vt-export onnx`) translating through transformers' own `generate()`, with onnxruntime running
the graphs: the same search code (greedy, beam search, length penalty, the §6.1 length rule) as the PyTorch model, so
that the two give the same tokens wherever the graphs compute what the model computes.

    model = VanillaTransformerOnnxModel.from_export("runs/multi30k_en_de-onnx")
    tokenizer = AutoTokenizer.from_pretrained("runs/multi30k_en_de-onnx")
    model.generate(**tokenizer(["A dog runs."], return_tensors="pt"))

It is the model class with its weights left on the meta device (none is read) and its two stacks replaced by
sessions, as optimum's ORTModelForSeq2SeqLM does for the models it exports.
"""

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .export_onnx import DECODER, ENCODER, past_names
from .modeling_vanilla_transformer import VanillaTransformerForConditionalGeneration
from .transformers_versions import Seq2SeqLMOutput, deprecate_kwarg

if TYPE_CHECKING:  # onnxruntime is the onnx extra's
    from onnxruntime import InferenceSession


def session(path: Path, threads: int | None = None) -> "InferenceSession":
    import onnxruntime

    options = onnxruntime.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


class OnnxEncoder(nn.Module):
    """`encoder.onnx` in the encoder's place: what generate() calls once per batch."""

    main_input_name = "input_ids"

    def __init__(self, encoder_session):
        super().__init__()
        self.session = encoder_session

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs) -> BaseModelOutput:
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        states, _ = self.session.run(None, {"input_ids": input_ids.numpy(), "attention_mask": mask.numpy()})
        return BaseModelOutput(last_hidden_state=torch.from_numpy(states))


class VanillaTransformerOnnxModel(VanillaTransformerForConditionalGeneration):
    """generate() over `encoder.onnx` and `decoder.onnx`; CPU only."""

    def __init__(self, config: VanillaTransformerConfig, folder: str | Path, threads: int | None = None):
        with torch.device("meta"):  # the weights are in the graphs
            super().__init__(config)
        self.encoder = OnnxEncoder(session(Path(folder) / ENCODER, threads))
        self.decoder_session = session(Path(folder) / DECODER, threads)
        self.past_inputs = past_names(config, "past_key_values")
        self.config._attn_implementation = "eager"

    @classmethod
    def from_export(cls, folder: str | Path, threads: int | None = None) -> "VanillaTransformerOnnxModel":
        """The model of an ONNX export folder, with the folder's generation config."""
        from transformers import GenerationConfig

        model = cls(VanillaTransformerConfig.from_pretrained(folder), folder, threads)
        if (Path(folder) / "generation_config.json").is_file():
            model.generation_config = GenerationConfig.from_pretrained(folder)
        return model

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def get_encoder(self) -> OnnxEncoder:
        return self.encoder

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        decoder_input_ids: torch.Tensor,
        encoder_outputs: BaseModelOutput | tuple,
        attention_mask: torch.Tensor | None = None,
        cache: EncoderDecoderCache | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput:
        states = encoder_outputs[0]
        config = self.config
        heads, width = config.decoder_attention_heads, config.d_model // config.decoder_attention_heads
        batch = decoder_input_ids.shape[0]
        self_attention = cache.self_attention_cache if cache is not None else None
        if self_attention is not None and cache.get_seq_length():  # the positions decoded so far
            past = [tensor for layer in self_attention.layers for tensor in (layer.keys, layer.values)]
        else:  # the first step: P = 0
            past = [torch.zeros(batch, heads, 0, width)] * (2 * config.decoder_layers)
        mask = attention_mask if attention_mask is not None else torch.ones(states.shape[:2], dtype=torch.long)
        feeds = {
            "input_ids": decoder_input_ids.numpy(),
            "encoder_attention_mask": mask.numpy(),
            "encoder_hidden_states": states.numpy(),
            **{name: np.ascontiguousarray(tensor.numpy()) for name, tensor in zip(self.past_inputs, past, strict=True)},
        }
        logits, *presents = self.decoder_session.run(None, feeds)[: 1 + 2 * config.decoder_layers]
        if cache is not None:
            cached = past[0].shape[2]
            for layer in range(config.decoder_layers):
                keys, values = (torch.from_numpy(presents[2 * layer + i][:, :, cached:]) for i in (0, 1))
                self_attention.update(keys, values, layer)
        return Seq2SeqLMOutput(logits=torch.from_numpy(logits), cache=cache)
