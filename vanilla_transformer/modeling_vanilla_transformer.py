"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a Hugging Face model.

Read top to bottom, the file follows the paper: positional encoding (§3.5), embeddings (§3.4), scaled
dot-product and multi-head attention (§3.2), the position-wise feed-forward network (§3.3), residual +
LayerNorm around each sub-layer (§3.1, §5.4), encoder and decoder layers and stacks (§3.1), then the
transformers classes (PreTrainedModel, Model, ForConditionalGeneration) in the layout of BART and Marian.

Shapes in comments: B batch, S source length, T target length, D d_model, H heads, K head dim (D / H), V vocab.

This file imports only torch, transformers and its two siblings (the configuration, and `transformers_versions.py`,
where the differences between transformers 5.x and 4.57 live): all three are copied into saved model folders and
load with `trust_remote_code=True` where this package is not installed.
"""

import contextlib
import inspect
import json
import math
import os
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.generation import GenerationConfig, GenerationMixin
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.utils import TransformersKwargs, can_return_tuple, is_torchdynamo_compiling, logging
from typing_extensions import Unpack

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .transformers_versions import (
    OutputRecorder,
    PreTrainedModel,
    attention_function,
    cache_of,
    cache_output,
    create_bidirectional_mask,
    decoder_self_attention_mask,
    init,
    records_outputs,
    takes_cache_by_either_name,
)

logger = logging.get_logger(__name__)

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

    It holds no parameter and no buffer: there is nothing to save, nothing that a meta-device or low-memory
    load can leave uninitialised, and no maximum length ("it may allow the model to extrapolate to sequence
    lengths longer than the ones encountered during training"). The rows computed so far are kept in a plain
    attribute, doubled whenever a longer sequence comes: generate() asks for one position per step, and computing
    that row afresh each time (sin, cos, float64) cost more than the rest of the embedding step.
    """

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.table: torch.Tensor | None = None  # (L, D), rows 0 .. L-1

    def forward(self, start: int, length: int, device: torch.device) -> torch.Tensor:
        if is_torchdynamo_compiling():
            # A compiled graph gets the rows it needs, with no Python-side state. `start` is a tensor when a static
            # cache reports its length: it is added to the positions, never read as a number (no graph break).
            return sinusoidal_positional_encoding(torch.arange(length, device=device) + start, self.d_model)
        start = int(start)  # a static cache reports its length as a tensor
        end = start + length
        if self.table is None or self.table.shape[0] < end or self.table.device != device:
            rows = max(256, 1 << (end - 1).bit_length())  # the next power of two
            self.table = sinusoidal_positional_encoding(torch.arange(rows, device=device), self.d_model)
        return self.table[start:end]  # (length, D)


# ---------------------------------------------------------------------------------------------------------------
# §3.4 Embeddings (+ §3.5 positions, + §5.4 dropout on the sums)
# ---------------------------------------------------------------------------------------------------------------


class VanillaTransformerEmbeddings(nn.Module):
    """Token embedding x sqrt(d_model) (§3.4) + positional encoding (§3.5), then dropout (§5.4)."""

    def __init__(self, config: VanillaTransformerConfig, input_name: str = "input_ids"):
        super().__init__()
        self.input_name = input_name  # what bad-input errors call the tokens
        self.embed_tokens = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = VanillaTransformerSinusoidalPositionalEncoding(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        past_length: int = 0,
    ) -> torch.Tensor:
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids and inputs_embeds.")
        if inputs_embeds is None:
            check_token_ids(input_ids, self.embed_tokens.num_embeddings, self.input_name)  # resizing changes it
            inputs_embeds = self.embed_tokens(input_ids)  # (B, L, D)
        positions = self.embed_positions(past_length, inputs_embeds.shape[1], inputs_embeds.device)  # (L, D)
        hidden_states = inputs_embeds * self.embed_scale + positions.to(inputs_embeds.dtype)
        return self.dropout(hidden_states)  # (B, L, D)


def check_token_ids(input_ids: torch.Tensor, vocab_size: int, name: str = "input_ids", values: bool = False) -> None:
    """Raise a ValueError naming the problem (shape, type or the offending id), instead of an error deep inside
    torch.

    The ids themselves are read only where that is free: on the CPU, or when `values` asks for it. On a GPU, reading
    them makes the host wait for the device at every forward; there `generate()` checks its input once per call and
    the training data are checked once when the trainer starts (`training.recipe`).
    """
    if is_torchdynamo_compiling():
        return
    if input_ids.dim() != 2 or 0 in input_ids.shape:
        raise ValueError(f"{name} has shape {tuple(input_ids.shape)}: expected (batch, length), both at least 1.")
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise ValueError(f"{name} holds {input_ids.dtype} values: token ids are integers (torch.long).")
    if not (values or input_ids.device.type == "cpu"):
        return
    low, high = torch.aminmax(input_ids)
    if low < 0 or high >= vocab_size:
        bad = int(low) if low < 0 else int(high)
        raise ValueError(f"Token id {bad} in {name} is outside the vocabulary (ids must be in [0, {vocab_size - 1}]).")


def check_batch_sizes(**inputs: torch.Tensor | None) -> None:
    """The inputs of one call describe the same sentences: their first dimensions must agree."""
    shapes = {name: tuple(tensor.shape) for name, tensor in inputs.items() if tensor is not None}
    if len({shape[0] for shape in shapes.values()}) > 1:
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"The inputs disagree on the batch size (the first dimension): {listed}.")


def check_attention_mask(attention_mask: torch.Tensor | None, expected_shape: tuple[int, int], name: str) -> None:
    """A (batch, length) padding mask must match its tokens. A 4D mask (batch, 1, queries, keys) is already the
    attention pattern (generate() makes one for a static cache) and goes to the masking functions as it is."""
    if attention_mask is None or attention_mask.dim() == 4:
        return
    if tuple(attention_mask.shape) != tuple(expected_shape):
        raise ValueError(
            f"{name} has shape {tuple(attention_mask.shape)}, but the tokens it masks have shape "
            f"{tuple(expected_shape)} (batch, length)."
        )


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

    For bf16 on recent GPUs torch prefers cuDNN's fused attention, which builds a plan for every new shape (about
    18 ms each on an H100), and translation brings new shapes all the time: every batch of a token budget, every
    decoding step. A training step of the Multi30K model took 189 ms with it and 52 ms without. The others compute
    the same Eq. 1 with no per-shape set-up.
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

    def split_heads(self, states: torch.Tensor) -> torch.Tensor:
        return states.view(*states.shape[:-1], self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, L, K)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        is_cross_attention = key_value_states is not None
        query = self.split_heads(self.q_proj(hidden_states))  # (B, H, Lq, K)

        cache = None
        if past_key_values is not None:
            cache = past_key_values.cross_attention_cache if is_cross_attention else past_key_values
            if isinstance(cache, EncoderDecoderCache):
                cache = cache.self_attention_cache

        if is_cross_attention and cache is not None and past_key_values.is_updated.get(self.layer_idx):
            # The encoder output does not change while decoding: its keys and values were computed once,
            # at the first step, and are reused at every later one.
            key, value = cache.layers[self.layer_idx].keys, cache.layers[self.layer_idx].values
        else:
            source = key_value_states if is_cross_attention else hidden_states
            key = self.split_heads(self.k_proj(source))  # (B, H, Lk, K)
            value = self.split_heads(self.v_proj(source))  # (B, H, Lk, K)
            if cache is not None:
                key, value = cache.update(key, value, self.layer_idx)
                if is_cross_attention:
                    past_key_values.is_updated[self.layer_idx] = True

        # set_attn_implementation() looks for these words in this file: ALL_ATTENTION_FUNCTIONS.get_interface( (5.x),
        # ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation] (4.57); the lookup is in transformers_versions.py.
        attention_interface = attention_function(self.config._attn_implementation, eager_attention_forward)
        output, weights = attention_interface(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout if self.training else 0.0,
            scaling=self.scaling,
            **kwargs,
        )
        output = output.reshape(*hidden_states.shape[:-1], -1)  # Concat(head_1, ..., head_h): (B, Lq, D)
        return self.out_proj(output), weights


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

    def forward(
        self,
        hidden_states: torch.Tensor,
        sublayer: Callable[[torch.Tensor], torch.Tensor],
        needed_positions: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if needed_positions is not None:
            # A position-wise sub-layer (§3.3) computed on the (N, D) rows that something reads; the others (padding)
            # pass through unchanged. See `skips_unread_positions`.
            return hidden_states.index_put((needed_positions,), self(hidden_states[needed_positions], sublayer))
        if self.pre_norm:
            return hidden_states + self.dropout(sublayer(self.layer_norm(hidden_states)))
        return self.layer_norm(hidden_states + self.dropout(sublayer(hidden_states)))


def skips_unread_positions(module: nn.Module, tensor: torch.Tensor) -> bool:
    """Whether the FFN may leave out the positions that nothing reads: in training on a CPU only. There a padded
    batch spends a share of every step on padding rows, and leaving them out of the FFN, the largest position-wise
    product, is free. On a GPU the number of rows kept would make the host wait for the device, and torch.compile
    would break its graph; at inference the outputs stay exactly as before."""
    return module.training and tensor.device.type == "cpu" and not is_torchdynamo_compiling()


def positions_to_compute(module: nn.Module, positions: torch.Tensor | None) -> torch.Tensor | None:
    """`positions` (B, L), true where an output is read, as the boolean mask of the rows the FFN computes; None where
    it computes them all (see `skips_unread_positions`; a 4D attention pattern names no positions)."""
    if positions is None or positions.dim() != 2 or not skips_unread_positions(module, positions):
        return None
    return positions.bool()


def positions_up_to_last_label(labels: torch.Tensor) -> torch.Tensor:
    """(B, T) true at and before each row's last labelled position: what a causal decoder's loss reads. Positions
    after it (the padding of shorter targets) reach no loss term, since position t is seen only by t and later."""
    labelled = labels != -100  # (B, T)
    return labelled.flip(-1).cumsum(-1).flip(-1) > 0


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
        needed_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        hidden_states = self.self_attn_sublayer(
            hidden_states, lambda x: self.self_attn(x, attention_mask=attention_mask, **kwargs)[0]
        )
        return self.ffn_sublayer(hidden_states, self.ffn, needed_positions)  # (B, S, D)


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

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        needed_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        hidden_states = self.self_attn_sublayer(
            hidden_states,
            lambda x: self.self_attn(x, attention_mask=attention_mask, past_key_values=past_key_values, **kwargs)[0],
        )
        hidden_states = self.encoder_attn_sublayer(
            hidden_states,
            lambda x: self.encoder_attn(
                x,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                past_key_values=past_key_values,
                **kwargs,
            )[0],
        )
        return self.ffn_sublayer(hidden_states, self.ffn, needed_positions)  # (B, T, D)


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
        # The paper does not state its initialisation; this is tensor2tensor's and fairseq's: Xavier-uniform
        # projections, and N(0, d_model^-0.5) embeddings, which sqrt(d_model) scales to unit variance (§3.4).
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

    @records_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutput:
        hidden_states = self.embeddings(input_ids, inputs_embeds)  # (B, S, D)
        check_attention_mask(attention_mask, hidden_states.shape[:2], "attention_mask")
        # Padding positions are hidden from every query (the mask holds the dtype's minimum there).
        mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, attention_mask=attention_mask)
        # A padding position is a key no query sees: its FFN output is never read.
        needed = positions_to_compute(self, attention_mask)
        with attention_kernels(self.config, hidden_states.device):
            for layer in self.layers:
                hidden_states = layer(hidden_states, mask, needed, **kwargs)
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
        self.embeddings = VanillaTransformerEmbeddings(config, input_name="decoder_input_ids")
        self.layers = nn.ModuleList(
            [VanillaTransformerDecoderLayer(config, layer_idx=i) for i in range(config.decoder_layers)]
        )
        self.layer_norm = final_layer_norm(config)
        self.kept_encoder_mask: tuple | None = None  # see encoder_padding_mask
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings.embed_tokens = value

    def encoder_padding_mask(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None,
    ) -> torch.Tensor | None:
        """The encoder-decoder attention's mask: source padding hidden from every target position.

        It depends on the source alone, and generate() passes the same source mask at every step, each step with one
        new position: the mask is built at the first step and kept for the others (transformers' helper took ~70 µs
        of each ~800 µs step of a Transformer-Tiny). Another mask, shape, device or an in-place change builds it anew.
        """
        source = encoder_attention_mask
        mask_arguments = dict(attention_mask=source, encoder_hidden_states=encoder_hidden_states)
        if hidden_states.shape[1] != 1 or is_torchdynamo_compiling():
            return create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, **mask_arguments)
        built_from = (
            id(source),  # the kept tuple holds `source` itself, so that its id cannot pass to another tensor
            None if source is None or source.is_inference() else source._version,  # bumped by in-place changes
            hidden_states.shape,
            hidden_states.dtype,
            hidden_states.device,
            encoder_hidden_states.shape[:2],
            self.config._attn_implementation,
        )
        kept = self.kept_encoder_mask  # read once: another thread generating with this model may replace it
        if kept is None or kept[0] != built_from:
            mask = create_bidirectional_mask(config=self.config, inputs_embeds=hidden_states, **mask_arguments)
            kept = self.kept_encoder_mask = (built_from, source, mask)
        return kept[2]

    @takes_cache_by_either_name
    @records_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        read_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        r"""
        read_positions (`torch.Tensor` of shape `(batch_size, target_length)`): true where the output is read (the
            loss's positions and all before them); in training on a CPU the FFN leaves the others out.
        """
        if use_cache and past_key_values is None:
            past_key_values = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        past_length = past_key_values.get_seq_length() if past_key_values is not None else 0

        hidden_states = self.embeddings(input_ids, inputs_embeds, past_length=past_length)  # (B, T, D)
        batch_size, target_length = hidden_states.shape[:2]
        check_attention_mask(attention_mask, (batch_size, past_length + target_length), "decoder_attention_mask")
        check_attention_mask(encoder_attention_mask, encoder_hidden_states.shape[:2], "attention_mask")

        # §3.2.3: position i may attend to positions <= i only ("masking out (setting to -inf) all values in the
        # input of the softmax which correspond to illegal connections"). sdpa gets is_causal instead of a tensor
        # when there is no padding to mask.
        self_attention_cache = past_key_values.self_attention_cache if past_key_values is not None else None
        if attention_mask is None and target_length == 1 and not getattr(self_attention_cache, "is_compileable", False):
            # One new position after the cached ones may attend to all of them: nothing to mask. These are the steps
            # of generate() with a dynamic cache; transformers' mask helper spent ~20 µs of each to find that out.
            # (A static cache holds empty rows past the current length, which its 4D mask hides.)
            causal_mask = None
        else:
            causal_mask = decoder_self_attention_mask(self.config, hidden_states, attention_mask, self_attention_cache)
        encoder_mask = self.encoder_padding_mask(hidden_states, encoder_hidden_states, encoder_attention_mask)
        needed = positions_to_compute(self, read_positions)
        with attention_kernels(self.config, hidden_states.device):
            for layer in self.layers:
                hidden_states = layer(
                    hidden_states,
                    causal_mask,
                    encoder_hidden_states,  # positional: gradient checkpointing re-runs the layer with these
                    encoder_attention_mask=encoder_mask,
                    past_key_values=past_key_values,
                    needed_positions=needed,
                    **kwargs,
                )
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states, **cache_output(past_key_values)
        )


def label_smoothed_cross_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    label_smoothing: float = 0.0,
    num_items_in_batch: int | torch.Tensor | None = None,
) -> torch.Tensor:
    """Cross-entropy against the labels, with §5.4's label smoothing: the target distribution is (1 - eps) on the
    label and eps spread uniformly over the vocabulary. Positions labelled -100 are ignored.

    logits (..., V), labels (...). The sum over labelled positions is divided by `num_items_in_batch` when given
    (the Trainer's count over the whole accumulated, all-device batch, so that gradient accumulation and data
    parallelism give the gradient of one big batch), else by the number of labelled positions here.
    """
    total = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=-100,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    if isinstance(count, torch.Tensor):
        count = count.to(total.device)
    return total / count


# §6.1: "beam search with a beam size of 4 and length penalty alpha = 0.6 ... maximum output length to input length
# + 50, but terminate early when possible". What training.train saves in every model folder's generation_config.json.
PAPER_GENERATION = {"num_beams": 4, "length_penalty": 0.6, "max_length_beyond_source": 50, "early_stopping": True}


def checked_generation_config(config: VanillaTransformerConfig, folder: str, loaded: GenerationConfig):
    """`loaded` when the folder's generation_config.json could be read. Where it could not, transformers' loader has
    fallen back on its defaults (greedy, at most 20 tokens) without a word: a broken file is an error naming it
    instead, and a missing one gives the paper's settings with a warning."""
    path = os.path.join(folder, "generation_config.json")
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as file:
                GenerationConfig.from_dict(json.load(file))
        except (OSError, ValueError, TypeError) as error:
            raise ValueError(f"{path} cannot be read ({error}): repair or delete it.") from None
        return loaded
    logger.warning(
        "%s has no generation_config.json: generating with the paper's settings (beam 4, length penalty 0.6, at most "
        "source length + 50 tokens) instead of transformers' defaults (greedy, at most 20 tokens).",
        folder,
    )
    special_ids = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")
    return GenerationConfig(**PAPER_GENERATION, **{name: getattr(config, name) for name in special_ids})


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs are the labels moved one step right behind the start token ("output embeddings are offset
    by one position", §3.2.3); the -100 that mark ignored labels become padding."""
    decoder_input_ids = labels.new_full(labels.shape, decoder_start_token_id)
    decoder_input_ids[:, 1:] = labels[:, :-1]
    return decoder_input_ids.masked_fill(decoder_input_ids == -100, pad_token_id)


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

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.set_input_embeddings(value)
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.set_input_embeddings(value)

    @takes_cache_by_either_name
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        decoder_read_positions: torch.Tensor | None = None,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqModelOutput:
        r"""
        decoder_read_positions (`torch.Tensor` of shape `(batch_size, target_length)`): see the decoder's
            `read_positions`.
        """
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError(
                "The decoder needs decoder_input_ids (or labels, from which they are shifted right). With the "
                "Trainer's label smoothing the labels never reach the model: build batches with "
                "DataCollatorForSeq2Seq(tokenizer, model=model), which adds decoder_input_ids."
            )
        check_batch_sizes(
            input_ids=input_ids,
            attention_mask=attention_mask,
            inputs_embeds=inputs_embeds,
            decoder_input_ids=decoder_input_ids,
            decoder_inputs_embeds=decoder_inputs_embeds,
        )
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, inputs_embeds=inputs_embeds, **kwargs
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)

        decoder_outputs = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            past_key_values=past_key_values,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            read_positions=decoder_read_positions,
            **kwargs,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoder_outputs.last_hidden_state,
            **cache_output(cache_of(decoder_outputs)),
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
        # The loss is computed here, against labels aligned with the decoder positions. transformers would otherwise
        # read a loss type from the class name, "ForConditionalGeneration", which it maps to the causal-LM loss that
        # shifts its labels; the Trainer of transformers 5.10-5.14 then counted labels[:, 1:] as the batch's targets
        # (num_items_in_batch) and divided every loss by too few (11 for the 15 labels of tests/test_modeling_hf.py's
        # four examples).
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

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def adjust_generation_fn(self, generation_config, from_auto_class, from_pipeline, name_or_path, *args, **kwargs):
        """After `from_pretrained` read the folder's generation config (transformers 5.x calls this; 4.57 does not):
        see `checked_generation_config`. Hub repositories are left to transformers."""
        super().adjust_generation_fn(generation_config, from_auto_class, from_pipeline, name_or_path, *args, **kwargs)
        if generation_config is None and name_or_path and os.path.isdir(name_or_path):
            self.generation_config = checked_generation_config(self.config, str(name_or_path), self.generation_config)

    def generate(self, inputs: torch.Tensor | None = None, generation_config: GenerationConfig | None = None, **kwargs):
        """`GenerationMixin.generate`, plus the paper's output limit (§6.1: "maximum output length to input length
        + 50"): when the generation config has `max_length_beyond_source` and the call sets no length of its own,
        at most (source length + that many) tokens are generated. A length in the arguments always wins.
        """
        config = generation_config if generation_config is not None else self.generation_config
        beams = kwargs.get("num_beams", config.num_beams)
        if beams is not None and beams < 1:
            raise ValueError(f"num_beams={beams}: must be at least 1 (1 is greedy search).")
        beyond = getattr(config, "max_length_beyond_source", None)
        source = inputs if inputs is not None else kwargs.get("input_ids")
        if source is not None:
            check_token_ids(source, self.get_input_embeddings().num_embeddings, values=True)  # once per call
        length_given = any(kwargs.get(k) is not None for k in ("max_length", "max_new_tokens"))
        if generation_config is not None:
            length_given = length_given or generation_config.max_new_tokens is not None
        if beyond is not None and source is not None and not length_given:
            kwargs["max_new_tokens"] = source.shape[-1] + beyond
        return super().generate(inputs, generation_config, **kwargs)

    def _reorder_cache(self, past_key_values: EncoderDecoderCache, beam_idx: torch.LongTensor) -> EncoderDecoderCache:
        """Beam search's cache reordering, for the decoder's self-attention only. beam_idx moves rows only among the
        beams of one sentence, and those beams share its encoder output, so the cross-attention keys and values are
        the same rows before and after; transformers' default copies them anyway, at every step (2-7% of a beam-4
        step of the Tiny model at batches 1-16, benchmarks/README.md)."""
        past_key_values.self_attention_cache.reorder_cache(beam_idx)
        return past_key_values

    @takes_cache_by_either_name
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: tuple[torch.Tensor] | BaseModelOutput | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        label_smoothing: float = 0.0,
        skip_logits: bool = False,
        **kwargs: Unpack[TransformersKwargs],
    ) -> Seq2SeqLMOutput:
        r"""
        labels (`torch.LongTensor` of shape `(batch_size, target_length)`): target token ids, -100 where no loss
            is wanted. Without decoder inputs, they are shifted right behind `decoder_start_token_id`.
        num_items_in_batch: the number of non-ignored labels in the whole (accumulated, all-device) batch, passed
            by the Trainer: the loss is then sum / num_items_in_batch, so that gradient accumulation and data
            parallelism give the gradient of one big batch. Without it, the loss is the mean over this batch.
        label_smoothing: §5.4's epsilon for the loss (the paper: 0.1); `training.recipe.TranslationTrainer` passes
            the Trainer's `label_smoothing_factor` here.
        skip_logits: return no logits, only the loss (needs labels); `training.recipe.TranslationTrainer` asks for
            it in training steps. On a CPU the pre-softmax projection, the largest matrix product of a small model,
            is then applied to the labelled positions only: no (batch, length, vocabulary) tensor for the padding.
        """
        if labels is not None:
            check_token_ids(labels.masked_fill(labels == -100, 0), self.lm_head.out_features, "labels")
            check_batch_sizes(input_ids=input_ids, inputs_embeds=inputs_embeds, labels=labels)
            if decoder_input_ids is not None and decoder_input_ids.shape != labels.shape:
                raise ValueError(
                    f"labels {tuple(labels.shape)} and decoder_input_ids {tuple(decoder_input_ids.shape)} must have "
                    "the same shape: decoder position t predicts labels[t]."
                )
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        read_positions = None
        if labels is not None and skips_unread_positions(self, labels):
            read_positions = positions_up_to_last_label(labels)

        outputs: Seq2SeqModelOutput = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            decoder_read_positions=read_positions,
            **kwargs,
        )
        # Labels are aligned with the decoder positions (the inputs were shifted), so position t predicts labels[t].
        hidden_states = outputs.last_hidden_state  # (B, T, D)
        if skip_logits and labels is None:
            raise ValueError("skip_logits=True returns only the loss, which needs labels.")
        logits = loss = None
        if skip_logits and labels.device.type == "cpu" and not is_torchdynamo_compiling():
            # Picking the labelled rows is a selection whose size only the data tell: free on a CPU, but on a GPU
            # the host would wait for the device to count them, and torch.compile would break its graph there.
            labelled = labels != -100  # (B, T)
            labelled_logits = self.lm_head(hidden_states[labelled])  # (N, V) for the N labelled positions
            loss = label_smoothed_cross_entropy(labelled_logits, labels[labelled], label_smoothing, num_items_in_batch)
        else:
            logits = self.lm_head(hidden_states)  # (B, T, V); softmax is left to the loss / generate()
            if labels is not None:
                loss = label_smoothed_cross_entropy(logits, labels, label_smoothing, num_items_in_batch)
            if skip_logits:
                logits = None

        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **cache_output(cache_of(outputs)),
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )

    # transformers' prepare_inputs_for_generation() reads forward's signature at every decoding step of a model class
    # registered for the Auto classes, as this one is (~30 µs of each ~800 µs step of a Transformer-Tiny): read it once.
    forward.__signature__ = inspect.signature(forward)


__all__ = [
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "sinusoidal_positional_encoding",
]
