"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a Hugging Face model.

Importing the package registers the classes with the Auto* factories, and marks them for auto classes so that
`save_pretrained` copies the code files into the folder and writes `auto_map`: such a folder then loads with
`trust_remote_code=True` where this package is not installed.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    sinusoidal_positional_encoding,
)

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True)

VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")

__all__ = [
    "VanillaTransformerConfig",
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "sinusoidal_positional_encoding",
]
