"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a Hugging Face model.

Read top to bottom, the file follows the paper: positional encoding (§3.5), embeddings (§3.4), scaled dot-product
and multi-head attention (§3.2), the position-wise feed-forward network (§3.3), residual + LayerNorm around each
sub-layer (§3.1), encoder and decoder layers and stacks (§3.1), then the transformers classes (PreTrainedModel,
Model, ForConditionalGeneration) in the layout of Marian, whose names it keeps. The training recipe (label
smoothing, token-budget batches, the learning rate) is not here: it lives in the repository's `training/`.

Shapes in comments: B batch, S source length, T target length, D d_model, H heads, K head dim (D / H), V vocab.

This file imports only torch, transformers and its sibling files (the configuration; `transformers_versions.py`,
which gives transformers 5.24's names on older releases; `input_checks.py`): all are copied into saved model
folders and load with `trust_remote_code=True` where this package is not installed.
"""

import contextlib
import math
import os
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationConfig, GenerationMixin
from transformers.generation.utils import GenerateOutput
from transformers.loss.loss_utils import fixed_cross_entropy
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import TransformersKwargs, can_return_tuple, is_torchdynamo_compiling, logging
from typing_extensions import Unpack

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .input_checks import (
    check_generation_file,
    check_generation_settings,
    check_labels,
    check_seq2seq_inputs,
    check_token_ids,
)
from .transformers_versions import (
    ALL_ATTENTION_FUNCTIONS,
    BaseModelOutputWithPastAndCrossAttentions,
    OutputRecorder,
    PreTrainedModel,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
    capture_outputs,
    create_bidirectional_mask,
    create_causal_mask,
    deprecate_kwarg,
    init,
    merge_with_config_defaults,
)

logger = logging.get_logger(__name__)


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs are the labels moved one step right behind the start token ("output embeddings are offset
    by one position", §3.2.3); the -100 that mark ignored labels become padding. The start token goes just before a
    target's first label, so that a target padded on the left (by a tokenizer whose padding_side is "left") is
    shifted as it is alone, with its padding before the start token."""
    shifted = labels.roll(1, dims=1)  # (B, T): column t holds labels[t - 1]; column 0, the last label, is replaced
    decoder_input_ids = shifted.masked_fill(shifted == -100, pad_token_id)
    first = (labels != -100).long().argmax(-1, keepdim=True)  # (B, 1): each row's first label; 0 in a row of none
    columns = torch.arange(labels.shape[1], device=labels.device)  # (T,)
    decoder_input_ids = decoder_input_ids.masked_fill(columns < first, pad_token_id)
    return decoder_input_ids.masked_fill(columns == first, decoder_start_token_id)  # (B, T)


# ---------------------------------------------------------------------------------------------------------------
# §3.5 Positional encoding
# ---------------------------------------------------------------------------------------------------------------


def sinusoidal_positional_encoding(positions: torch.Tensor, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)) and PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model)) (§3.5).

    `positions` has any shape (...,); the result has shape (..., d_model) and dtype float32. The angles are
    computed in float64: in float32, pos * 10000^(-2i/d) is already ~1e-3 off at position 5,000.
    """
    # MPS has no float64; everywhere else the table is tiny next to the matrix products, so precision is free.
    angle_dtype = torch.float32 if positions.device.type == "mps" else torch.float64
    two_i = torch.arange(0, d_model, 2, dtype=angle_dtype, device=positions.device)  # (ceil(D/2),)
    angles = positions.to(angle_dtype).unsqueeze(-1) / 10000 ** (two_i / d_model)  # (..., ceil(D/2))
    # Interleave so that even dimensions hold sin and odd dimensions hold cos, as in the paper.
    encoding = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (..., 2 * ceil(D/2))
    return encoding[..., :d_model].float()


class VanillaTransformerSinusoidalPositionalEncoding(nn.Module):
    """The fixed encoding of §3.5 for positions start, ..., start + length - 1.

    It holds no parameter and no buffer: nothing to save, nothing that a meta-device load can leave uninitialised, and
    no maximum length ("it may allow the model to extrapolate to sequence lengths longer than the ones encountered
    during training"). The rows computed so far are kept, doubled whenever a longer sequence comes, since
    generate() asks for one row at every step.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.table: torch.Tensor | None = None  # (L, D), rows 0 .. L-1

    def forward(self, start: int, length: int, device: torch.device) -> torch.Tensor:
        if is_torchdynamo_compiling():
            # A compiled graph computes the rows it needs, with no Python-side state; `start` may be a tensor there.
            return sinusoidal_positional_encoding(torch.arange(length, device=device) + start, self.d_model)
        end = int(start) + length
        if self.table is None or self.table.shape[0] < end or self.table.device != device:
            rows = max(256, 1 << (end - 1).bit_length())  # the next power of two
            self.table = sinusoidal_positional_encoding(torch.arange(rows, device=device), self.d_model)
        return self.table[int(start) : end]  # (length, D)


# ---------------------------------------------------------------------------------------------------------------
# §3.4 Embeddings (+ §3.5 positions, + §5.4 dropout on the sums)
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerEmbeddings(nn.Module):
    """Token embedding x sqrt(d_model) (§3.4) + positional encoding (§3.5), then dropout (§5.4)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = VanillaTransformerSinusoidalPositionalEncoding(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        past_length: int = 0,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)  # (B, L, D)
        length = inputs_embeds.shape[1]
        if attention_mask is not None and attention_mask.dim() == 2:
            # Each token's place among its own sentence's tokens (as fairseq counts them), so that a sentence padded
            # on the left is encoded as it is alone; on the right the places are 0, 1, ... as without the mask. The
            # mask covers the cached tokens too (B, past_length + L).
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]  # (B, L)
            positions = self.embed_positions(0, attention_mask.shape[1], inputs_embeds.device)[position_ids]
        else:
            positions = self.embed_positions(past_length, length, inputs_embeds.device)  # (L, D)
        hidden_states = inputs_embeds * self.embed_scale + positions.to(inputs_embeds.dtype)
        return self.dropout(hidden_states)  # (B, L, D)


# ---------------------------------------------------------------------------------------------------------------
# §3.2 Attention
# ---------------------------------------------------------------------------------------------------------------


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """§3.2.1, Eq. 1: Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, for all heads at once.

    query (B, H, Lq, K), key and value (B, H, Lk, K); attention_mask is added to the scores, and holds the
    dtype's minimum where attention is not allowed. Returns the output (B, Lq, H, K) and the weights (B, H, Lq, Lk).
    The "sdpa", "flash" and "flex" implementations registered in transformers compute the same thing faster.
    """
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # (B, H, Lq, Lk)
    if attention_mask is not None:
        scores = scores + attention_mask
    weights = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()  # (B, Lq, H, K)
    return output, weights


def attention_kernels(config: VanillaTransformerConfig, device: torch.device) -> contextlib.AbstractContextManager:
    """The kernels torch's "sdpa" may choose from on a GPU: flash and memory-efficient attention, not cuDNN's.

    For bf16 on recent GPUs torch prefers cuDNN's fused attention, which builds a plan for every new shape, and
    translation brings new shapes all the time (every batch of a token budget, every decoding step); the others
    compute the same Eq. 1 with no per-shape set-up (benchmarks/README.md, "On a GPU").
    """
    if device.type != "cuda" or config._attn_implementation != "sdpa":
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class VanillaTransformerAttention(nn.Module):
    """§3.2.2 Multi-head attention: MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,
    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V). The h projections of each kind are one D x D matrix.

    Used three ways (§3.2.3): encoder self-attention, masked decoder self-attention (is_causal) and
    encoder-decoder attention (key_value_states = the encoder output).
    """

    def __init__(
        self,
        config: VanillaTransformerConfig,
        num_heads: int,
        is_causal: bool = False,
        layer_idx: int | None = None,
    ):
        super().__init__()
        self.config = config
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5  # 1 / sqrt(d_k)
        self.dropout = config.attention_dropout
        self.is_causal = is_causal
        self.layer_idx = layer_idx

        self.q_proj = nn.Linear(config.d_model, config.d_model)  # W^Q of all heads
        self.k_proj = nn.Linear(config.d_model, config.d_model)  # W^K
        self.v_proj = nn.Linear(config.d_model, config.d_model)  # W^V
        self.out_proj = nn.Linear(config.d_model, config.d_model)  # W^O

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        cache: Cache | None = None,
        attention_mask: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        is_cross_attention = key_value_states is not None
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)  # (B, H, Lq, K)

        is_updated = False
        if cache is not None:
            if isinstance(cache, EncoderDecoderCache):
                is_updated = cache.is_updated.get(self.layer_idx)
                curr_cache = cache.cross_attention_cache if is_cross_attention else cache.self_attention_cache
            else:
                curr_cache = cache

        current_states = key_value_states if is_cross_attention else hidden_states
        if is_cross_attention and cache is not None and is_updated:
            # The encoder output does not change while decoding: its keys and values, computed at the first step,
            # are reused at every later one.
            key_states = curr_cache.layers[self.layer_idx].keys
            value_states = curr_cache.layers[self.layer_idx].values
        else:
            kv_shape = (*current_states.shape[:-1], -1, self.head_dim)
            key_states = self.k_proj(current_states).view(kv_shape).transpose(1, 2)  # (B, H, Lk, K)
            value_states = self.v_proj(current_states).view(kv_shape).transpose(1, 2)  # (B, H, Lk, K)
            if cache is not None:
                key_states, value_states = curr_cache.update(key_states, value_states, self.layer_idx)
                if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                    cache.is_updated[self.layer_idx] = True

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=0.0 if not self.training else self.dropout,
            scaling=self.scaling,
            **kwargs,
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()  # Concat(head_1, ..., head_h): (B, Lq, D)
        return self.out_proj(attn_output), attn_weights


# ---------------------------------------------------------------------------------------------------------------
# §3.3 Position-wise feed-forward network
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerFeedForward(nn.Module):
    """§3.3, Eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, applied to each position separately."""

    def __init__(self, config: VanillaTransformerConfig, ffn_dim: int):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim)  # W_1, b_1
        self.activation = ACT2FN[config.activation_function]  # max(0, .) for "relu"
        self.activation_dropout = nn.Dropout(config.activation_dropout)
        self.fc2 = nn.Linear(ffn_dim, config.d_model)  # W_2, b_2

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.activation_dropout(self.activation(self.fc1(hidden_states))))  # (B, L, D)


# ---------------------------------------------------------------------------------------------------------------
# §3.1 + §5.4 Residual connection and layer normalisation around each sub-layer
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerSublayerConnection(nn.Module):
    """Post-LN (the paper, §3.1): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (option): x + Dropout(Sublayer(LayerNorm(x))), with a final LayerNorm at the top of the stack."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__()
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.layer_norm_position == "pre"

    def forward(self, hidden_states: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        if self.pre_norm:
            return hidden_states + self.dropout(sublayer(self.layer_norm(hidden_states)))
        return self.layer_norm(hidden_states + self.dropout(sublayer(hidden_states)))


def final_layer_norm(config: VanillaTransformerConfig) -> nn.LayerNorm | None:
    """Pre-LN leaves the residual stream unnormalised, so each stack ends with one more LayerNorm."""
    if config.layer_norm_position == "pre":
        return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
    return None


# ---------------------------------------------------------------------------------------------------------------
# §3.1 Encoder and decoder layers
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerEncoderLayer(GradientCheckpointingLayer):
    """One of the N encoder layers: self-attention, then the FFN, each wrapped in a sublayer connection."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int | None = None):
        super().__init__()
        self.self_attn = VanillaTransformerAttention(config, config.encoder_attention_heads, layer_idx=layer_idx)
        self.self_attn_sublayer = VanillaTransformerSublayerConnection(config)
        self.ffn = VanillaTransformerFeedForward(config, config.encoder_ffn_dim)
        self.ffn_sublayer = VanillaTransformerSublayerConnection(config)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        hidden_states = self.self_attn_sublayer(
            hidden_states, lambda x: self.self_attn(x, attention_mask=attention_mask, **kwargs)[0]
        )
        return self.ffn_sublayer(hidden_states, self.ffn)  # (B, S, D)


class VanillaTransformerDecoderLayer(GradientCheckpointingLayer):
    """One of the N decoder layers: masked self-attention, encoder-decoder attention, then the FFN."""

    def __init__(self, config: VanillaTransformerConfig, layer_idx: int | None = None):
        super().__init__()
        heads = config.decoder_attention_heads
        self.self_attn = VanillaTransformerAttention(config, heads, is_causal=True, layer_idx=layer_idx)
        self.self_attn_sublayer = VanillaTransformerSublayerConnection(config)
        self.encoder_attn = VanillaTransformerAttention(config, heads, layer_idx=layer_idx)
        self.encoder_attn_sublayer = VanillaTransformerSublayerConnection(config)
        self.ffn = VanillaTransformerFeedForward(config, config.decoder_ffn_dim)
        self.ffn_sublayer = VanillaTransformerSublayerConnection(config)

    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> torch.Tensor:
        hidden_states = self.self_attn_sublayer(
            hidden_states, lambda x: self.self_attn(x, attention_mask=attention_mask, cache=cache, **kwargs)[0]
        )
        hidden_states = self.encoder_attn_sublayer(
            hidden_states,
            lambda x: self.encoder_attn(
                x,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                cache=cache,
                **kwargs,
            )[0],
        )
        return self.ffn_sublayer(hidden_states, self.ffn)  # (B, T, D)


# ---------------------------------------------------------------------------------------------------------------
# transformers integration: weights and initialisation
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerPreTrainedModel(PreTrainedModel):
    config_class = VanillaTransformerConfig
    config: VanillaTransformerConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["VanillaTransformerEncoderLayer", "VanillaTransformerDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _can_compile_fullgraph = True  # a decoding step with a static cache is one graph (tests/test_modeling_hf.py)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        # The paper does not state its initialisation; this is tensor2tensor's: Xavier-uniform projections, and
        # N(0, d_model^-0.5) embeddings, which sqrt(d_model) scales to unit variance (§3.4). fairseq's too, but for
        # the gain 1/sqrt(2) it gives W^Q, W^K, W^V (tried: docs/experiments.md, issue 41's fortieth part).
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.init_std)
            if module.padding_idx is not None:
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, VanillaTransformerForConditionalGeneration) and not self.config.tie_word_embeddings:
            # An untied pre-softmax projection is an embedding matrix read the other way: same init.
            init.normal_(module.lm_head.weight, mean=0.0, std=self.config.init_std)


# ---------------------------------------------------------------------------------------------------------------
# §3.1 The encoder and decoder stacks
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerEncoder(VanillaTransformerPreTrainedModel):
    """N encoder layers over the embedded source (§3.1)."""

    _can_record_outputs = {
        "hidden_states": VanillaTransformerEncoderLayer,
        "attentions": VanillaTransformerAttention,
    }

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.embeddings = VanillaTransformerEmbeddings(config)
        self.layers = nn.ModuleList(
            [VanillaTransformerEncoderLayer(config, layer_idx=i) for i in range(config.encoder_layers)]
        )
        self.layer_norm = final_layer_norm(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.embed_tokens = value

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        hidden_states = self.embeddings(input_ids, inputs_embeds, attention_mask=attention_mask)  # (B, S, D)
        # Padding positions are hidden from every query (the mask holds the dtype's minimum there).
        attention_mask = create_bidirectional_mask(
            config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask
        )
        with attention_kernels(self.config, hidden_states.device):
            for encoder_layer in self.layers:
                hidden_states = encoder_layer(hidden_states, attention_mask, **kwargs)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        return BaseModelOutput(last_hidden_state=hidden_states)


class VanillaTransformerDecoder(VanillaTransformerPreTrainedModel):
    """N decoder layers over the embedded target, attending to the encoder output (§3.1)."""

    _can_record_outputs = {
        "hidden_states": VanillaTransformerDecoderLayer,
        "attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="self_attn"),
        "cross_attentions": OutputRecorder(VanillaTransformerAttention, index=1, layer_name="encoder_attn"),
    }

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.embeddings = VanillaTransformerEmbeddings(config)
        self.layers = nn.ModuleList(
            [VanillaTransformerDecoderLayer(config, layer_idx=i) for i in range(config.decoder_layers)]
        )
        self.layer_norm = final_layer_norm(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.embed_tokens = value

    @merge_with_config_defaults
    @capture_outputs
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        cache_length = cache.get_seq_length() if cache is not None else 0
        hidden_states = self.embeddings(
            input_ids, inputs_embeds, past_length=cache_length, attention_mask=attention_mask
        )  # (B, T, D)

        # §3.2.3: position i may attend to positions <= i only ("masking out (setting to -inf) all values in the
        # input of the softmax which correspond to illegal connections"), and to no padding.
        self_attn_cache = cache.self_attention_cache if isinstance(cache, EncoderDecoderCache) else cache
        causal_mask = create_causal_mask(
            config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask, cache=self_attn_cache
        )
        # Source padding is hidden from every target position.
        encoder_attention_mask = create_bidirectional_mask(
            config=self.config,
            inputs_embeds=hidden_states,
            attention_mask=encoder_attention_mask,
            encoder_hidden_states=encoder_hidden_states,
        )
        with attention_kernels(self.config, hidden_states.device):
            for decoder_layer in self.layers:
                hidden_states = decoder_layer(
                    hidden_states,
                    causal_mask,
                    encoder_hidden_states,  # as a positional argument for gradient checkpointing
                    encoder_attention_mask=encoder_attention_mask,
                    cache=cache,
                    **kwargs,
                )
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden_states, cache=cache)


# ---------------------------------------------------------------------------------------------------------------
# The encoder-decoder (§3, Figure 1) and the translation model
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerModel(VanillaTransformerPreTrainedModel):
    """Encoder + decoder, returning the decoder's last hidden states (no pre-softmax projection)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        self.encoder = VanillaTransformerEncoder(config)
        self.decoder = VanillaTransformerDecoder(config)
        if config.share_encoder_decoder_embeddings:
            # §3.4: "we share the same weight matrix between the two embedding layers". Only the source is saved.
            self._tied_weights_keys = {
                "decoder.embeddings.embed_tokens.weight": "encoder.embeddings.embed_tokens.weight"
            }
            # Named as not saved, so that the Trainer, resuming from a checkpoint, ties them instead of warning.
            self._keys_to_ignore_on_save = set(self._tied_weights_keys)
        self.post_init()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        # transformers ties weights only where config.tie_word_embeddings is set; the two embeddings are shared
        # (§3.4) whether or not the pre-softmax projection is tied to them too.
        tied = super().get_expanded_tied_weights_keys(all_submodels)
        if not all_submodels and self.config.share_encoder_decoder_embeddings:
            tied = {**self._tied_weights_keys, **tied}
        return tied

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.set_input_embeddings(value)
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.set_input_embeddings(value)

    @can_return_tuple
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        if encoder_outputs is not None and not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        check_seq2seq_inputs(
            self.get_input_embeddings().num_embeddings,  # resizing the embeddings changes it
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            encoder_hidden_states=encoder_outputs.last_hidden_state if encoder_outputs is not None else None,
            cache=cache,
        )
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
            )

        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            cache=decoder_outputs.cache,
            decoder_hidden_states=decoder_outputs.hidden_states,
            decoder_attentions=decoder_outputs.attentions,
            cross_attentions=decoder_outputs.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


class VanillaTransformerForConditionalGeneration(VanillaTransformerPreTrainedModel, GenerationMixin):
    """The full translation model: encoder-decoder + the pre-softmax linear projection to the vocabulary (§3.4)."""

    def __init__(self, config: VanillaTransformerConfig):
        super().__init__(config)
        # The loss below is aligned with the labels (the decoder inputs are what is shifted); transformers would read
        # the causal-LM loss, which shifts its labels, from the class name, and its Trainer 5.10-5.14 then counted
        # too few labels in a batch.
        self.loss_type = None
        self.model = VanillaTransformerModel(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            # §3.4: "... and the pre-softmax linear transformation". Tie to the tensor that is saved.
            stack = "encoder" if config.share_encoder_decoder_embeddings else "decoder"
            self._tied_weights_keys = {"lm_head.weight": f"model.{stack}.embeddings.embed_tokens.weight"}
            self._keys_to_ignore_on_save = set(self._tied_weights_keys)  # as in VanillaTransformerModel
        self.post_init()

    def get_encoder(self) -> VanillaTransformerEncoder:
        return self.model.encoder

    def get_decoder(self) -> VanillaTransformerDecoder:
        return self.model.decoder

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        self.lm_head = new_embeddings

    @can_return_tuple
    @deprecate_kwarg("past_key_values", "5.40.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`): target token ids, -100 where no loss is
            wanted. Without decoder inputs, they are shifted right behind `decoder_start_token_id`. The loss is the
            plain cross-entropy, summed and divided by `num_items_in_batch` when the Trainer passes it; the paper's
            label smoothing (§5.4) is the training recipe's (`training.loss`).
        """
        if labels is not None:
            check_labels(
                labels, self.config.vocab_size, decoder_input_ids, input_ids=input_ids, inputs_embeds=inputs_embeds
            )
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        # Given no mask, teacher forcing masks the padding before each target's start token (labels padded on the
        # left); a compiled or recorded step (vt-train's, padded on the right) keeps the causal kernel instead.
        teacher_forcing = decoder_attention_mask is None and decoder_input_ids is not None and cache is None
        if teacher_forcing and not recording_a_graph(decoder_input_ids):
            decoder_attention_mask = target_padding_mask(
                decoder_input_ids, self.config.pad_token_id, self.config.decoder_start_token_id
            )

        outputs: Seq2SeqModelOutput = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            encoder_outputs=encoder_outputs,
            decoder_attention_mask=decoder_attention_mask,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        # Position t of the decoder predicts labels[t]; softmax is left to the loss and to generate().
        lm_logits = self.lm_head(outputs.last_hidden_state)  # (B, T, V)

        loss = None
        if labels is not None:
            loss = fixed_cross_entropy(lm_logits.view(-1, lm_logits.shape[-1]).float(), labels.view(-1), **kwargs)

        return Seq2SeqLMOutput(
            loss=loss,
            logits=lm_logits,
            cache=outputs.cache,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    # §6.1: generation ------------------------------------------------------------------------------------------

    def generate(
        self, inputs: torch.Tensor | None = None, generation_config: GenerationConfig | None = None, **kwargs
    ) -> GenerateOutput | torch.LongTensor:
        """`GenerationMixin.generate`, plus the paper's output limit (§6.1: "maximum output length to input length
        + 50"): when the generation config has `max_length_beyond_source` and neither the call nor the config sets a
        length (`configured_output_length`), at most (source length + that many) tokens are generated, the source given
        as token ids, embeddings or the encoder's output. Rows that end early are padded after their end in every mode
        (`pad_after_end`).
        """
        config = generation_config if generation_config is not None else self.generation_config
        vocab_size = self.get_input_embeddings().num_embeddings
        check_generation_settings({**config.to_dict(), **kwargs}, vocab_size, "generate()")
        source = inputs if inputs is not None else kwargs.get("input_ids")
        if source is not None:
            check_token_ids(source, vocab_size, "input_ids", values=True)  # once per call, also on a GPU
        prompt = kwargs.get("decoder_input_ids")
        prompt_length = 1 if prompt is None else prompt.shape[-1]  # the decoder's start token, or the given prefix
        beyond = getattr(config, "max_length_beyond_source", None)
        lengths = (kwargs.get("max_length"), kwargs.get("max_new_tokens"), configured_output_length(config))
        length_set = any(length is not None for length in lengths)  # by the call, or by the config
        source_length = encoder_input_length(source, kwargs)
        if beyond is not None and source_length is not None and not length_set:
            # As max_length, which outranks the config's default max_length without transformers' warning.
            kwargs["max_length"] = prompt_length + source_length + beyond
        output = super().generate(inputs, generation_config, **kwargs)
        sequences = output if isinstance(output, torch.Tensor) else output.sequences
        pad_after_end(
            sequences,
            kwargs.get("eos_token_id", config.eos_token_id),
            kwargs.get("pad_token_id", config.pad_token_id),
            start=prompt_length,
        )
        return output

    def _reorder_cache(self, cache: EncoderDecoderCache, beam_idx: torch.LongTensor) -> EncoderDecoderCache:
        """Beam search's reordering (GenerationMixin calls this hook where a model has it), for the decoder's
        self-attention only: the beams of one sentence share its encoder output, so the cross-attention keys and
        values are the same rows before and after, and copying them at every step is wasted."""
        cache.self_attention_cache.reorder_cache(beam_idx)
        return cache

    def adjust_generation_fn(
        self,
        generation_config: GenerationConfig | None,
        from_auto_class: bool,
        from_pipeline: str | None,
        name_or_path: str | os.PathLike | None,
        *args,
        **kwargs,
    ) -> None:
        """After `from_pretrained` read the folder's generation config (transformers 5.x calls this; 4.57 does not).
        transformers' loader fails deep in a broken generation_config.json, takes values out of range, and falls back
        on its defaults (greedy, at most 20 tokens) without a word where there is none: a bad file is an error naming
        it instead, and a missing one gives the paper's settings with a warning. Hub repositories are left to it."""
        folder = name_or_path if generation_config is None and name_or_path and os.path.isdir(name_or_path) else None
        path = os.path.join(folder, "generation_config.json") if folder else None
        if path and os.path.isfile(path):
            check_generation_file(path, self.config.vocab_size)
        super().adjust_generation_fn(generation_config, from_auto_class, from_pipeline, name_or_path, *args, **kwargs)
        if path and not os.path.isfile(path):
            logger.warning(
                "%s has no generation_config.json: generating with the paper's settings (beam 4, length penalty 0.6, "
                "at most source length + 50 tokens) instead of transformers' defaults (greedy, at most 20 tokens).",
                folder,
            )
            special_ids = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
            self.generation_config = GenerationConfig(
                **PAPER_GENERATION, **{name: getattr(self.config, name) for name in special_ids}
            )


# ---------------------------------------------------------------------------------------------------------------
# §6.1 generate()'s output: its length and its padding
# ---------------------------------------------------------------------------------------------------------------


def target_padding_mask(
    decoder_input_ids: torch.Tensor, pad_token_id: int, decoder_start_token_id: int
) -> torch.Tensor:
    """0 for the padding before a target's start token, which `shift_tokens_right` leaves there for labels padded on
    the left; 1 from the start token on (padding on the right stays 1: no earlier token sees it)."""
    started = decoder_input_ids != pad_token_id  # (B, T)
    if decoder_start_token_id == pad_token_id:  # then the start token is the last of the leading padding ids
        started |= torch.cat([started[:, 1:], torch.ones_like(started[:, :1])], dim=1)
    return (started.long().cumsum(-1) > 0).long()  # (B, T)


def recording_a_graph(tensor: torch.Tensor) -> bool:
    """Whether this forward pass is being compiled (torch.compile, torch.export) or recorded into a CUDA graph."""
    return is_torchdynamo_compiling() or (tensor.is_cuda and torch.cuda.is_current_stream_capturing())


def pad_after_end(
    sequences: torch.Tensor, eos_token_id: int | list[int] | None, pad_token_id: int | None, start: int
) -> None:
    """Sets every token after a generated sequence's first end-of-sentence token to padding, in place (from
    position `start`, past the decoder's prompt). transformers' beam search fills the ends of finished beams with
    the end-of-sentence token instead where the padding id is 0, as here (`pad_token_id or eos_token_id[0]`)."""
    if eos_token_id is None or pad_token_id is None:
        return
    eos = torch.as_tensor(eos_token_id, device=sequences.device).view(-1)
    generated = sequences[:, start:]  # (B, T - start)
    ends = torch.isin(generated, eos).int()
    after_first_end = (ends.cumsum(-1) - ends) > 0
    generated.masked_fill_(after_first_end, pad_token_id)


def encoder_input_length(input_ids: torch.Tensor | None, generate_kwargs: dict) -> int | None:
    """The source's length in tokens, however generate() was given it: token ids, `inputs_embeds`, or the encoder's
    output (`encoder_outputs`, computed once for several generate() calls); None where it has none of them."""
    if input_ids is not None:
        return input_ids.shape[-1]
    if generate_kwargs.get("inputs_embeds") is not None:
        return generate_kwargs["inputs_embeds"].shape[1]  # (B, S, D)
    if generate_kwargs.get("encoder_outputs") is not None:
        return generate_kwargs["encoder_outputs"][0].shape[1]  # last_hidden_state: (B, S, D)
    return None


def configured_output_length(config: GenerationConfig) -> int | None:
    """The most tokens a generation config lets a translation have: `max_new_tokens`, or `max_length` less the
    decoder's start token. None where it sets neither, or only transformers' default `max_length` of 20, which
    `Seq2SeqTrainer` writes into a model's config during evaluation (and which every 4.x config holds), so that a
    length no one chose does not replace the paper's rule."""
    if config.max_new_tokens is not None:
        return config.max_new_tokens
    return None if config.max_length in (None, 20) else config.max_length - 1


# §6.1: "beam search with a beam size of 4 and length penalty alpha = 0.6 ... maximum output length to input length
# + 50, but terminate early when possible". What training.train saves in every model folder's generation_config.json.
PAPER_GENERATION = {"num_beams": 4, "length_penalty": 0.6, "max_length_beyond_source": 50, "early_stopping": True}


__all__ = [
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "sinusoidal_positional_encoding",
]
