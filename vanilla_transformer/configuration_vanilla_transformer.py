"""Configuration of the Transformer of "Attention Is All You Need" (Vaswani et al., 2017).

The defaults are the paper's base model (Table 3, row "base"); `VanillaTransformerConfig.big()` gives the big
model. Field names follow BART/Marian so that transformers' generic code (cache sizing, `get_text_config`,
the Trainer) finds what it looks for.
"""

import dataclasses
import os
import shutil

from transformers import PretrainedConfig  # 4.x's name; 5.x keeps it as an alias of PreTrainedConfig
from transformers.utils import logging

logger = logging.get_logger(__name__)

LAYER_NORM_POSITIONS = ("post", "pre")
POSITIVE_INTEGERS = (
    "vocab_size",
    "d_model",
    "encoder_layers",
    "decoder_layers",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
)
PROBABILITIES = ("dropout", "attention_dropout", "activation_dropout")
BOOLEANS = ("scale_embedding", "share_encoder_decoder_embeddings", "tie_word_embeddings")
SPECIAL_TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id")

# The translation pipeline's code, which config.json names under `custom_pipelines` in the folders training writes.
PIPELINE_FILE = "pipeline_vanilla_transformer.py"

# The paper's big model (Table 3, row "big") differs from the base model in these fields only.
BIG_MODEL_OVERRIDES = {
    "d_model": 1024,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "dropout": 0.3,
}


class VanillaTransformerConfig(PretrainedConfig):
    r"""
    Configuration of [`VanillaTransformerModel`] and [`VanillaTransformerForConditionalGeneration`].

    Args:
        vocab_size: size of the (shared source+target) vocabulary; the paper's En-De BPE has 37000.
        d_model: width of every sub-layer output and of the embeddings (d_model in §3.1).
        encoder_layers / decoder_layers: N, the number of identical layers in each stack (§3.1).
        encoder_attention_heads / decoder_attention_heads: h, the number of heads (§3.2.2); d_k = d_v = d_model / h.
        encoder_ffn_dim / decoder_ffn_dim: d_ff, the inner width of the position-wise FFN (§3.3).
        dropout: P_drop, applied to every sub-layer output and to the embedding + PE sums (§5.4).
        attention_dropout: dropout on the attention weights (not in the paper; 0 by default).
        activation_dropout: dropout after the FFN's activation (not in the paper; 0 by default).
        activation_function: the FFN's non-linearity; "relu" is the paper's max(0, x) (Eq. 2); any key of
            `transformers.activations.ACT2FN` ("gelu", ...) is accepted.
        layer_norm_position: "post" is the paper's LayerNorm(x + Sublayer(x)); "pre" is x + Sublayer(LayerNorm(x))
            with a final LayerNorm at the top of each stack (Xiong et al., 2020), which trains without warmup.
        layer_norm_eps: epsilon of every LayerNorm.
        scale_embedding: multiply token embeddings by sqrt(d_model) (§3.4).
        init_std: standard deviation of the normal init of the embeddings; None means d_model^-0.5, so that
            the scaled embeddings have unit variance like the positional encoding they are added to.
        share_encoder_decoder_embeddings: one embedding matrix for source and target tokens (§3.4).
        tie_word_embeddings: the pre-softmax projection reuses the (target) embedding matrix (§3.4).
        trained_vocabulary: set by training: `{"tokens": n, "sha256": ...}` of the tokenizer the embeddings were
            trained with, which the pipeline and the tools compare with a folder's tokenizer.json.

    Example:

    ```python
    >>> from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration
    >>> base = VanillaTransformerConfig()             # Table 3, base
    >>> big = VanillaTransformerConfig.big()          # Table 3, big
    >>> model = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(vocab_size=8000, d_model=256))
    ```
    """

    model_type = "vanilla_transformer"
    keys_to_ignore_at_inference = ["past_key_values"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "encoder_attention_heads",
        "num_hidden_layers": "encoder_layers",
    }

    vocab_size: int = 37000
    d_model: int = 512
    encoder_layers: int = 6
    decoder_layers: int = 6
    encoder_attention_heads: int = 8
    decoder_attention_heads: int = 8
    encoder_ffn_dim: int = 2048
    decoder_ffn_dim: int = 2048
    dropout: float | int = 0.1
    attention_dropout: float | int = 0.0
    activation_dropout: float | int = 0.0
    activation_function: str = "relu"
    layer_norm_position: str = "post"
    layer_norm_eps: float = 1e-5
    scale_embedding: bool = True
    init_std: float | None = None
    pad_token_id: int | None = 0
    bos_token_id: int | None = 2
    eos_token_id: int | list[int] | None = 3
    decoder_start_token_id: int | None = 2
    share_encoder_decoder_embeddings: bool = True
    tie_word_embeddings: bool = True
    trained_vocabulary: dict | None = None
    use_cache: bool = True
    is_encoder_decoder: bool = True

    def __post_init__(self, **kwargs):  # transformers 5.x: configs are dataclasses
        super().__post_init__(**kwargs)
        self._complete()

    if not dataclasses.is_dataclass(PretrainedConfig):  # transformers 4.x: no dataclass machinery

        def __init__(self, **kwargs):
            declared = {name: kwargs.pop(name, getattr(type(self), name)) for name in type(self).__annotations__}
            super().__init__(**declared, **kwargs)  # sets the fields it knows, and the others as attributes
            self._complete()

    def _complete(self) -> None:
        self.validate_architecture()
        if self.init_std is None:
            self.init_std = self.d_model**-0.5

    def validate_architecture(self) -> None:
        """Refuse values that would break the model later, far from their cause, or silently: transformers 5.x's
        hook, which `save_pretrained` runs too. A plain ValueError naming the value (5.x's `@strict` would wrap it in
        an error of its own)."""
        # Imported here: configuration files must not pull in torch-heavy modules at import time.
        from transformers.activations import ACT2FN

        for name in POSITIVE_INTEGERS:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}={value!r}: must be a whole number of at least 1.")
        for name in BOOLEANS:
            value = getattr(self, name)
            if not isinstance(value, bool):  # a config.json's "false" is a string, which Python reads as true
                raise ValueError(f"{name}={value!r}: must be true or false.")
        for name in PROBABILITIES:
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
                raise ValueError(f"{name}={value!r}: a dropout probability must be a number from 0 to 1.")
        for side in ("encoder", "decoder"):
            heads = getattr(self, f"{side}_attention_heads")
            if self.d_model % heads != 0:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by {side}_attention_heads={heads}: "
                    "each head gets d_model / h dimensions (§3.2.2)."
                )
        for name in SPECIAL_TOKEN_IDS:
            value = getattr(self, name)
            for token_id in value if isinstance(value, list) else [value]:
                if token_id is not None and not (isinstance(token_id, int) and 0 <= token_id < self.vocab_size):
                    raise ValueError(
                        f"{name}={token_id!r} is not a token id of the vocabulary (vocab_size={self.vocab_size}: "
                        f"ids 0 to {self.vocab_size - 1})."
                    )
        if self.layer_norm_position not in LAYER_NORM_POSITIONS:
            raise ValueError(f"layer_norm_position={self.layer_norm_position!r} is not one of {LAYER_NORM_POSITIONS}.")
        if self.activation_function not in ACT2FN:
            raise ValueError(
                f"activation_function={self.activation_function!r} is unknown; use one of {sorted(ACT2FN)}."
            )

    @property
    def custom_pipelines(self) -> dict:
        """The pipelines that the model folder ships as code, less the tasks that transformers has a pipeline for
        (4.x's own "translation", or 5.x's after `vanilla_transformer.register_translation_task()`): those serve the
        folder without trust_remote_code, which transformers asks for only for the tasks listed here. config.json
        keeps them all."""
        from transformers.pipelines import PIPELINE_REGISTRY  # here: a configuration file imports no pipelines

        shipped = self.__dict__.get("custom_pipelines", {})
        return {task: entry for task, entry in shipped.items() if task not in PIPELINE_REGISTRY.supported_tasks}

    @custom_pipelines.setter
    def custom_pipelines(self, value: dict) -> None:
        self.__dict__["custom_pipelines"] = value  # where to_dict() finds it, so config.json keeps it

    def save_pretrained(self, save_directory: str | os.PathLike, **kwargs) -> None:
        """PreTrainedConfig's, and the translation pipeline's code beside config.json where it names it: a model loaded
        from a trained folder and saved again (Seq2SeqTrainer's `save_model` after a fine-tune) would otherwise name a
        file that its folder lacks, and `pipeline("translation", trust_remote_code=True)` would fail there."""
        super().save_pretrained(save_directory, **kwargs)
        if "translation" in self.__dict__.get("custom_pipelines", {}):
            try:
                shutil.copyfile(self._pipeline_code(), os.path.join(save_directory, PIPELINE_FILE))
            except OSError as error:  # the model's weights are written after its config, and must be
                logger.warning(
                    f"{PIPELINE_FILE} was not saved with the config ({error}): pipeline('translation') on the folder "
                    "then needs `import vanilla_transformer; vanilla_transformer.register_translation_task()`."
                )

    def _pipeline_code(self) -> str:
        """The pipeline's file: beside this one in the package, else in the folder (or Hub repo) this was loaded from,
        where transformers has loaded this file as remote code. Not imported: transformers 4.x, which would then copy
        it into its cache beside this file, does not copy the files that it imports in turn."""
        beside = os.path.join(os.path.dirname(__file__), PIPELINE_FILE)
        if os.path.isfile(beside):
            return beside
        from transformers.utils import cached_file  # here: the Hub's client is only needed for remote code

        return cached_file(self._name_or_path, PIPELINE_FILE)

    @classmethod
    def big(cls, **kwargs) -> "VanillaTransformerConfig":
        """The paper's big model (Table 3): d_model 1024, 16 heads, d_ff 4096, dropout 0.3; kwargs override."""
        return cls(**{**BIG_MODEL_OVERRIDES, **kwargs})


__all__ = ["VanillaTransformerConfig"]
