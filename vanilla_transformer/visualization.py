"""Look inside the Transformer: attention maps, the positional encoding and the parameter table.

    from vanilla_transformer.visualization import attention_maps, plot_attention
    maps = attention_maps(model, tokenizer, "Two dogs play in the snow.", "Zwei Hunde spielen im Schnee.")
    plot_attention(maps, "cross").savefig("cross_attention.png")

The plotting functions need matplotlib (`pip install vanilla-transformer[viz]`, which also brings a font with
Chinese characters); the rest of the package does not. The same pictures come from the command line:
`vt-visualize --help`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch
from torch import nn

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .extras import MissingExtra
from .modeling_vanilla_transformer import (
    VanillaTransformerAttention,
    VanillaTransformerFeedForward,
    VanillaTransformerForConditionalGeneration,
    sinusoidal_positional_encoding,
)
from .pipeline_vanilla_transformer import reads_nothing, text_preparation

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from transformers import PreTrainedTokenizerBase

ATTENTION_KINDS = {
    "encoder": "encoder self-attention",
    "decoder": "masked decoder self-attention",
    "cross": "encoder-decoder attention",
}

# ---------------------------------------------------------------------------------------------------------------
# Attention maps (§3.2.3: the three ways the model uses attention)
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class AttentionMaps:
    """The attention weights of one sentence pair, as the model computed them (teacher forcing).

    Rows of each map are queries, columns keys; every row sums to 1. Decoder rows are the decoder inputs: the
    start token, then the target, so row i shows what the model looked at to predict target token i.
    """

    source_tokens: list[str]  # S: the source pieces, ending with </s>
    target_tokens: list[str]  # T: the decoder inputs, starting with the decoder start token
    encoder: torch.Tensor  # (layers, heads, S, S)
    decoder: torch.Tensor  # (layers, heads, T, T), zero above the diagonal (causal mask)
    cross: torch.Tensor  # (layers, heads, T, S)

    def weights(self, kind: str) -> torch.Tensor:
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"Attention kind {kind!r} is not one of {sorted(ATTENTION_KINDS)}.")
        return getattr(self, kind)

    def bertviz_arguments(self) -> dict:
        """The keyword arguments of BertViz's encoder-decoder views: `bertviz.head_view(**maps.bertviz_arguments())`
        and `bertviz.model_view(...)` take, per kind of attention, one (batch, heads, queries, keys) tensor per layer
        (what transformers models return with output_attentions=True), and the two token lists."""
        return {
            "encoder_attention": tuple(layer.unsqueeze(0) for layer in self.encoder),
            "decoder_attention": tuple(layer.unsqueeze(0) for layer in self.decoder),
            "cross_attention": tuple(layer.unsqueeze(0) for layer in self.cross),
            "encoder_tokens": self.source_tokens,
            "decoder_tokens": self.target_tokens,
        }

    def axis_tokens(self, kind: str) -> tuple[list[str], list[str]]:
        """(query tokens, key tokens) of a kind of map."""
        queries = self.source_tokens if kind == "encoder" else self.target_tokens
        keys = self.target_tokens if kind == "decoder" else self.source_tokens
        return queries, keys


def translate_one(
    model: VanillaTransformerForConditionalGeneration, tokenizer: PreTrainedTokenizerBase, source: str
) -> str:
    """The model's own translation of `source`, with its saved generation settings (beam 4 after training)."""
    inputs = tokenizer([source], return_tensors="pt").to(model.device)
    with torch.inference_mode():
        generated = model.generate(**inputs)
    return tokenizer.decode(generated[0], skip_special_tokens=True)


def attention_maps(
    model: VanillaTransformerForConditionalGeneration,
    tokenizer: PreTrainedTokenizerBase,
    source: str,
    target: str | None = None,
) -> AttentionMaps:
    """Run `source` → `target` through the model and keep every attention weight; without a target, the model's
    own translation is used. `source` is prepared as the model's training text was (`text_preparation`); `target`
    is taken as the model writes it. Weights come from the eager implementation (sdpa and flash never materialise
    them); the model's attention implementation is restored afterwards."""
    source = text_preparation(tokenizer)(source)
    if reads_nothing(tokenizer, tokenizer(source)["input_ids"]):
        raise ValueError(f"The source {source!r} gives the model no token to read: there is no attention to draw.")
    if target is None:
        target = translate_one(model, tokenizer, source)
    batch = tokenizer([source], text_target=[target], return_tensors="pt").to(model.device)
    decoder_input_ids = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    implementation = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            outputs = model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                decoder_input_ids=decoder_input_ids,
                output_attentions=True,
            )
    finally:
        model.set_attn_implementation(implementation)

    def stacked(per_layer: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.stack([layer[0] for layer in per_layer]).float().cpu()  # batch of one: (layers, H, Lq, Lk)

    return AttentionMaps(
        source_tokens=tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist()),
        target_tokens=tokenizer.convert_ids_to_tokens(decoder_input_ids[0].tolist()),
        encoder=stacked(outputs.encoder_attentions),
        decoder=stacked(outputs.decoder_attentions),
        cross=stacked(outputs.cross_attentions),
    )


@torch.no_grad()
def attention_by_hand(
    model: VanillaTransformerForConditionalGeneration,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    layer: int,
    head: int,
) -> torch.Tensor:
    """One encoder self-attention head recomputed from the layer's own weights (§3.2.1, Eq. 1):
    softmax(Q K^T / sqrt(d_k)) with Q = x W_Q^head, K = x W_K^head. Returns (B, S, S).

    x is what the layer's attention sees: the previous layer's output (post-LN), or its LayerNorm (pre-LN).
    The result equals `model(..., output_attentions=True).encoder_attentions[layer][:, head]`.
    """
    encoder = model.get_encoder()
    hidden_states = encoder(input_ids, attention_mask, output_hidden_states=True).hidden_states[layer]  # (B, S, D)
    block = encoder.layers[layer]
    sublayer, attention = block.self_attn_sublayer, block.self_attn
    x = sublayer.layer_norm(hidden_states) if sublayer.pre_norm else hidden_states
    d_k = attention.head_dim
    rows = slice(head * d_k, (head + 1) * d_k)  # this head's slice of the D x D projection
    query = x @ attention.q_proj.weight[rows].T + attention.q_proj.bias[rows]  # (B, S, d_k)
    key = x @ attention.k_proj.weight[rows].T + attention.k_proj.bias[rows]  # (B, S, d_k)
    scores = query @ key.transpose(1, 2) / d_k**0.5  # (B, S, S)
    if attention_mask is not None:  # padding keys get no weight
        scores = scores.masked_fill(attention_mask[:, None, :] == 0, torch.finfo(scores.dtype).min)
    return scores.softmax(dim=-1)


# ---------------------------------------------------------------------------------------------------------------
# §3.5 The positional encoding
# ---------------------------------------------------------------------------------------------------------------


def positional_dot_products(d_model: int, start: int, max_distance: int) -> torch.Tensor:
    """PE(start) · PE(start + k) for k = 0 .. max_distance, from the float32 encoding the model adds.

    sin(a)sin(b) + cos(a)cos(b) = cos(a - b), so the sum over the 2i/2i+1 pairs is sum_i cos(k · ω_i): a
    function of the distance k alone, whatever `start` is. That is why the paper expected relative positions
    to be easy to attend to.
    """
    positions = torch.arange(start, start + max_distance + 1, dtype=torch.float64)
    encoding = sinusoidal_positional_encoding(positions, d_model).double()  # (k + 1, D)
    return encoding @ encoding[0]  # (k + 1,)


# ---------------------------------------------------------------------------------------------------------------
# Parameter table (Table 3's "params" column, counted from the model)
# ---------------------------------------------------------------------------------------------------------------

PAPER_PARAMETERS = {"base": "65M", "big": "213M"}
COMPONENT_ORDER = [
    "embeddings",
    *(
        f"{stack} {part}"
        for stack in ("encoder", "decoder")
        for part in ("self-attention", "cross-attention", "feed-forward", "layer norms")
    ),
    "total",
]


def parameter_breakdown(model: nn.Module) -> dict[str, int]:
    """Trainable parameters per component of a model (or of one stack), each shared tensor counted once; the last
    entry is the total.

    Components: embeddings (V·D, shared by encoder, decoder and pre-softmax projection when tied, §3.4),
    attention blocks (4·D² + 4·D each: W^Q, W^K, W^V, W^O and their biases), FFNs (2·D·d_ff + d_ff + D),
    LayerNorms (2·D each).
    """
    counts: dict[str, int] = {}
    seen: set[int] = set()

    def add(component: str, module: nn.Module) -> None:
        for parameter in module.parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                counts[component] = counts.get(component, 0) + parameter.numel()

    for name, module in model.named_modules():
        stack = "decoder" if ".decoder." in f".{name}." else "encoder"
        if isinstance(module, nn.Embedding) or name.endswith("lm_head"):
            add("embeddings", module)
        elif isinstance(module, VanillaTransformerAttention):
            kind = "cross-attention" if name.endswith("encoder_attn") else "self-attention"
            add(f"{stack} {kind}", module)
        elif isinstance(module, VanillaTransformerFeedForward):
            add(f"{stack} feed-forward", module)
        elif isinstance(module, nn.LayerNorm):
            add(f"{stack} layer norms", module)
    counts["total"] = sum(counts.values())
    return counts


def parameter_table(vocab_size: int = 37000) -> str:
    """A markdown table of the parameters per component of the base and big models, next to the paper's counts.

    The models are built on the meta device: no memory is allocated, only shapes are counted."""
    presets = {
        "base": VanillaTransformerConfig(vocab_size=vocab_size),
        "big": VanillaTransformerConfig.big(vocab_size=vocab_size),
    }
    counts = {}
    for name, config in presets.items():
        with torch.device("meta"):
            counts[name] = parameter_breakdown(VanillaTransformerForConditionalGeneration(config))
    rows = ["| component | base | big |", "|---|---:|---:|"]
    for component in COMPONENT_ORDER:
        if component not in counts["base"]:
            continue  # the encoder has no cross-attention
        label = "embeddings (shared, tied)" if component == "embeddings" else component
        values = [f"{counts[name][component]:,}" for name in presets]
        if component == "total":
            label, values = f"**{label}**", [f"**{v}**" for v in values]
        rows.append(f"| {label} | {' | '.join(values)} |")
    rows.append(f"| paper (Table 3) | {' | '.join(PAPER_PARAMETERS[name] for name in presets)} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------------------------
# Figures (matplotlib, optional)
# ---------------------------------------------------------------------------------------------------------------

# Fonts with Chinese characters, in order of preference; the viz extra brings the first (through mplfonts).
CJK_FAMILIES = (
    "Noto Sans CJK SC",
    "Source Han Sans SC",
    "WenQuanYi Zen Hei",
    "SimHei",
    "Microsoft YaHei",
    "PingFang SC",
)


def pyplot() -> ModuleType:
    """matplotlib.pyplot, or an ImportError that says how to install it."""
    try:
        from matplotlib import pyplot as plt
    except ImportError as error:
        raise MissingExtra("The figures need matplotlib", "viz") from error
    return plt


def token_font_families() -> list[str]:
    """Fonts for token labels: matplotlib's own for Latin text, then a CJK font that the glyphs it lacks fall back
    to. The Noto Sans CJK SC of `mplfonts` is registered when the system has none of CJK_FAMILIES."""
    from matplotlib import font_manager

    def installed_cjk() -> list[str]:
        names = {font.name for font in font_manager.fontManager.ttflist}
        return [family for family in CJK_FAMILIES if family in names]

    if not installed_cjk():
        try:
            import mplfonts
        except ImportError:
            return ["DejaVu Sans"]  # Chinese glyphs would show as boxes
        bundled = Path(mplfonts.__file__).parent / "fonts" / "NotoSansCJKsc-Regular.otf"
        if bundled.exists():
            font_manager.fontManager.addfont(str(bundled))
    return ["DejaVu Sans", *installed_cjk()[:1]]


def draw_heatmap(
    axis: Axes,
    weights: torch.Tensor,
    query_tokens: list[str],
    key_tokens: list[str],
    title: str,
    families: list[str],
) -> None:
    axis.imshow(weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=7, family=families)
    axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=7, family=families)
    axis.set_title(title, fontsize=8)


def displayed_weights(maps: AttentionMaps, kind: str, layers: list[int]) -> torch.Tensor:
    """The weights of `kind` for `layers` (layers, H, Lq, Lk), the decoder's masked future as NaN: drawn blank rather
    than coloured as a zero weight. A layer the model does not have is a ValueError naming the range."""
    weights = maps.weights(kind)
    if not all(0 <= layer < weights.shape[0] for layer in layers):
        raise ValueError(
            f"Layers {layers}: the model has {weights.shape[0]} layers, numbered 0 to {weights.shape[0] - 1}."
        )
    weights = weights[layers]
    if kind == "decoder":
        future = torch.ones(weights.shape[-2:], dtype=torch.bool).triu(diagonal=1)
        weights = weights.masked_fill(future, float("nan"))
    return weights


def plot_attention(maps: AttentionMaps, kind: str = "cross", layers: list[int] | None = None) -> Figure:
    """A grid of heatmaps of one kind of attention ("encoder", "decoder", "cross"): a row per layer, a column per
    head, and a last column with the heads' average. Keys along x, queries along y."""
    layers = list(range(maps.weights(kind).shape[0])) if layers is None else layers
    weights = displayed_weights(maps, kind, layers)  # (len(layers), H, Lq, Lk)
    heads = weights.shape[1]
    queries, keys = maps.axis_tokens(kind)
    plt = pyplot()
    cell = 0.28  # inches per token, so that labels stay readable at any length
    width = (heads + 1) * max(2.0, cell * len(keys) + 1.0)
    height = len(layers) * max(2.0, cell * len(queries) + 1.0)
    figure, axes = plt.subplots(len(layers), heads + 1, figsize=(width, height), squeeze=False)
    families = token_font_families()
    for row, layer in enumerate(layers):
        for head in range(heads):
            title = f"layer {layer + 1}, head {head + 1}"
            draw_heatmap(axes[row, head], weights[row, head], queries, keys, title, families)
        draw_heatmap(axes[row, heads], weights[row].mean(0), queries, keys, f"layer {layer + 1}, average", families)
    figure.suptitle(ATTENTION_KINDS[kind])
    figure.tight_layout()
    return figure


def plot_attention_head(maps: AttentionMaps, kind: str, layer: int, head: int | None = None) -> Figure:
    """One heatmap: head `head` of layer `layer` (both from 0), or the heads' average when `head` is None."""
    weights = displayed_weights(maps, kind, [layer])[0]  # (H, Lq, Lk)
    if head is not None and not 0 <= head < weights.shape[0]:
        raise ValueError(f"Head {head}: the model has {weights.shape[0]} heads, numbered 0 to {weights.shape[0] - 1}.")
    queries, keys = maps.axis_tokens(kind)
    plt = pyplot()
    size = (max(4.0, 0.35 * len(keys) + 1.5), max(3.5, 0.35 * len(queries) + 1.5))
    figure, axis = plt.subplots(figsize=size)
    shown = weights.mean(0) if head is None else weights[head]
    which = "average of the heads" if head is None else f"head {head + 1}"
    draw_heatmap(
        axis, shown, queries, keys, f"{ATTENTION_KINDS[kind]}, layer {layer + 1}, {which}", token_font_families()
    )
    axis.set_xlabel("keys")
    axis.set_ylabel("queries")
    figure.tight_layout()
    return figure


def plot_positional_encoding(d_model: int = 128, length: int = 100) -> Figure:
    """The PE matrix as a heatmap: positions down, dimensions across (even columns sin, odd columns cos)."""
    plt = pyplot()
    encoding = sinusoidal_positional_encoding(torch.arange(length), d_model)  # (length, D)
    figure, axis = plt.subplots(figsize=(8, 5))
    image = axis.imshow(encoding.numpy(), cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    axis.set_xlabel("dimension")
    axis.set_ylabel("position")
    axis.set_title(f"Sinusoidal positional encoding (§3.5), d_model = {d_model}")
    figure.colorbar(image, ax=axis)
    figure.tight_layout()
    return figure


def plot_positional_curves(
    d_model: int = 128, length: int = 100, dimensions: tuple[int, ...] = (6, 7, 30, 31)
) -> Figure:
    """PE(pos, dim) against pos for a few dimensions: sine and cosine waves whose wavelength grows with dim."""
    plt = pyplot()
    encoding = sinusoidal_positional_encoding(torch.arange(length), d_model)  # (length, D)
    figure, axis = plt.subplots(figsize=(8, 4))
    for dim in dimensions:
        kind = "sin" if dim % 2 == 0 else "cos"
        axis.plot(encoding[:, dim].numpy(), label=f"dim {dim} ({kind}, i = {dim // 2})")
    title = "PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d))"
    return labelled_curves(figure, axis, "position", "PE(pos, dim)", title)


def plot_positional_distance(
    d_model: int = 128, max_distance: int = 100, starts: tuple[int, ...] = (0, 50, 500)
) -> Figure:
    """PE(pos) · PE(pos + k) against k, for several starting positions: the curves coincide."""
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(8, 4))
    for start, style in zip(starts, ("-", "--", ":", "-."), strict=False):
        curve = positional_dot_products(d_model, start, max_distance)
        axis.plot(curve.numpy(), style, label=f"pos = {start}")
    title = "The dot product of two encodings depends on their distance only"
    return labelled_curves(figure, axis, "distance k", "PE(pos) · PE(pos + k)", title)


def labelled_curves(figure: Figure, axis: Axes, x_label: str, y_label: str, title: str) -> Figure:
    axis.set_xlabel(x_label)
    axis.set_ylabel(y_label)
    axis.set_title(title)
    axis.legend(fontsize=8)
    figure.tight_layout()
    return figure


__all__ = [
    "AttentionMaps",
    "attention_maps",
    "attention_by_hand",
    "positional_dot_products",
    "parameter_table",
    "plot_attention",
    "plot_attention_head",
    "plot_positional_encoding",
    "plot_positional_curves",
    "plot_positional_distance",
]
