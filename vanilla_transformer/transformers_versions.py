"""transformers 5.24's names for what the modeling file uses, on every release it is tested on (5.9 and later, 4.57).

The modeling file imports these names from here instead of from transformers, so that it reads like 5.24's
`modeling_marian.py` line for line; this file is the one place that knows how older releases differ. Model folders
carry it next to the modeling file (transformers copies a modeling file's relative imports), so remote code loads
on each of them. The configuration's own difference (dataclass configs in 5.x only) stays in the configuration file.
"""

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import transformers
from transformers import PretrainedConfig, modeling_outputs
from transformers.cache_utils import Cache
from transformers.masking_utils import create_causal_mask as transformers_create_causal_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS as TRANSFORMERS_ATTENTION_FUNCTIONS
from transformers.modeling_utils import PreTrainedModel as TransformersPreTrainedModel

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

# The releases the model is tested on: pyproject.toml's lower bound, which .ci/run tests (tests/test_compatibility.py
# checks that the two agree), and 4.57. Earlier 5.x releases fail inside transformers, far from the reason: 5.0-5.1
# lack its output recording, 5.2-5.3 need other mask arguments, 5.4-5.8 fail tests of gradient accumulation, resized
# embeddings or resuming a run (tied weights reported missing).
OLDEST_5 = (5, 9)
OLDEST_4 = (4, 57)


def tested_release(version: str) -> tuple[int, int]:
    """(major, minor) of a transformers release the model is tested on; an ImportError naming the one to install for
    any other."""
    release = tuple(int(part) for part in version.split(".")[:2])
    if not (release >= OLDEST_5 or OLDEST_4 <= release < (5, 0)):
        wanted = ".".join(map(str, OLDEST_5))
        raise ImportError(
            f"vanilla_transformer needs transformers {wanted} or later (or 4.57.x), not {version}: "
            f"pip install 'transformers>={wanted},<6'"
        )
    return release


RELEASE = tested_release(transformers.__version__)
# 5.24 renamed the cache from `past_key_values` to `cache`: in forward's arguments, the output classes and the masks.
CACHE_IS_NAMED_CACHE = "cache" in modeling_outputs.Seq2SeqLMOutput.__dataclass_fields__


# The cache's name ------------------------------------------------------------------------------------------------
if CACHE_IS_NAMED_CACHE:
    from transformers.modeling_outputs import (
        BaseModelOutputWithPastAndCrossAttentions,
        Seq2SeqLMOutput,
        Seq2SeqModelOutput,
    )
    from transformers.utils.deprecation import deprecate_kwarg

    create_causal_mask = transformers_create_causal_mask

else:  # 4.57-5.23: generate() passes `past_key_values=`, and the outputs hold it under that name

    def deprecate_kwarg(old_name: str, version: str, new_name: str, **kwargs) -> Callable:
        """Takes `old_name` as `new_name`, silently: in these releases the old name is the current one."""

        def decorator(forward: Callable) -> Callable:
            @functools.wraps(forward)
            def renamed(*args, **call_kwargs) -> object:
                if old_name in call_kwargs:
                    if call_kwargs.get(new_name) is not None:
                        raise ValueError(f"Pass the cache once: as {new_name}= or as {old_name}=, not both.")
                    call_kwargs[new_name] = call_kwargs.pop(old_name)
                return forward(*args, **call_kwargs)

            return renamed

        return decorator

    def with_cache_field(output_class: type) -> type:
        """`output_class` taking and giving its `past_key_values` under 5.24's name, `cache`."""

        class Output(output_class):
            def __init__(self, *args, cache: Cache | None = None, **kwargs) -> None:
                super().__init__(*args, **{"past_key_values": cache, **kwargs})

            @property
            def cache(self) -> Cache | None:
                return self.past_key_values

        Output.__name__ = Output.__qualname__ = output_class.__name__
        return Output

    BaseModelOutputWithPastAndCrossAttentions = with_cache_field(
        modeling_outputs.BaseModelOutputWithPastAndCrossAttentions
    )
    Seq2SeqModelOutput = with_cache_field(modeling_outputs.Seq2SeqModelOutput)
    Seq2SeqLMOutput = with_cache_field(modeling_outputs.Seq2SeqLMOutput)


# Outputs, masks, attention functions and initialisers ----------------------------------------------------------
if RELEASE >= (5, 0):
    from transformers import initialization as init  # initialisers that respect weights already loaded
    from transformers.masking_utils import create_bidirectional_mask
    from transformers.utils.generic import merge_with_config_defaults
    from transformers.utils.output_capturing import OutputRecorder, capture_outputs

    ALL_ATTENTION_FUNCTIONS = TRANSFORMERS_ATTENTION_FUNCTIONS

    if not CACHE_IS_NAMED_CACHE:  # 5.9-5.23: the mask helper takes the cache as `past_key_values`

        def create_causal_mask(
            config: PretrainedConfig,
            inputs_embeds: torch.Tensor,
            attention_mask: torch.Tensor | None,
            cache: Cache | None = None,
        ) -> "torch.Tensor | BlockMask | None":
            return transformers_create_causal_mask(
                config=config, inputs_embeds=inputs_embeds, attention_mask=attention_mask, past_key_values=cache
            )

    PreTrainedModel = TransformersPreTrainedModel  # 5.x ties weights from _tied_weights_keys ({target: source})

else:  # 4.57
    from torch.nn import init
    from transformers.modeling_attn_mask_utils import _prepare_4d_attention_mask, _prepare_4d_attention_mask_for_sdpa
    from transformers.utils.generic import OutputRecorder
    from transformers.utils.generic import check_model_inputs as capture_outputs

    def merge_with_config_defaults(forward: Callable) -> Callable:
        return forward  # 4.57's check_model_inputs (capture_outputs here) fills use_cache/return_dict itself

    class AttentionFunctions:
        """5.x's `ALL_ATTENTION_FUNCTIONS.get_interface` over 4.57's registry."""

        def get_interface(self, implementation: str, eager: Callable) -> Callable:
            return eager if implementation == "eager" else TRANSFORMERS_ATTENTION_FUNCTIONS[implementation]

    ALL_ATTENTION_FUNCTIONS = AttentionFunctions()

    def create_bidirectional_mask(
        config: PretrainedConfig,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor | None = None,
    ) -> torch.Tensor | None:
        """What 5.x's masking_utils.create_bidirectional_mask gives: padding keys hidden from every query."""
        if attention_mask is None:
            return None
        if "flash" in config._attn_implementation:
            return attention_mask if (attention_mask == 0).any() else None
        if config._attn_implementation == "sdpa":
            return _prepare_4d_attention_mask_for_sdpa(attention_mask, inputs_embeds.dtype, inputs_embeds.shape[1])
        return _prepare_4d_attention_mask(attention_mask, inputs_embeds.dtype, inputs_embeds.shape[1])

    def create_causal_mask(
        config: PretrainedConfig,
        inputs_embeds: torch.Tensor,
        attention_mask: torch.Tensor | None,
        cache: Cache | None = None,
    ) -> "torch.Tensor | BlockMask | None":
        past_length = cache.get_seq_length() if cache is not None else 0
        positions = torch.arange(past_length, past_length + inputs_embeds.shape[1], device=inputs_embeds.device)
        return transformers_create_causal_mask(
            config=config,
            input_embeds=inputs_embeds,
            attention_mask=attention_mask,
            cache_position=positions,
            past_key_values=cache,
        )

    class PreTrainedModel(TransformersPreTrainedModel):
        """4.x ties weights through the `_tie_weights` hook, not from `_tied_weights_keys` ({target: source})."""

        def _tie_weights(self) -> None:
            for target, source in (getattr(self, "_tied_weights_keys", None) or {}).items():
                module_path, _, name = target.rpartition(".")
                setattr(self.get_submodule(module_path), name, self.get_parameter(source))

        def post_init(self) -> None:
            """5.x's post_init also names the keys its submodels leave out of a checkpoint, under their prefixes, so
            that the Trainer, resuming, ties those weights instead of warning that they are missing."""
            super().post_init()
            ignored = set(self._keys_to_ignore_on_save or [])
            for prefix, module in self.named_children():
                ignored.update(f"{prefix}.{key}" for key in getattr(module, "_keys_to_ignore_on_save", None) or [])
            self._keys_to_ignore_on_save = ignored


__all__ = [
    "ALL_ATTENTION_FUNCTIONS",
    "BaseModelOutputWithPastAndCrossAttentions",
    "OutputRecorder",
    "PreTrainedModel",
    "Seq2SeqLMOutput",
    "Seq2SeqModelOutput",
    "capture_outputs",
    "create_bidirectional_mask",
    "create_causal_mask",
    "deprecate_kwarg",
    "init",
    "merge_with_config_defaults",
]
