"""What differs between transformers 5.x and 4.57 for the model: the one place that knows both.

The modeling file imports its helpers from here and reads the same on either version. Model folders carry this file
next to the modeling file (transformers copies a modeling file's relative imports), so remote code loads on both.
The configuration's own difference (dataclass configs in 5.x only) stays in the configuration file.
"""

import functools
import inspect
from collections.abc import Callable

import torch
import transformers
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.modeling_utils import PreTrainedModel as TransformersPreTrainedModel

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


TRANSFORMERS_5 = tested_release(transformers.__version__) >= (5, 0)


def takes_cache_by_either_name(forward: Callable) -> Callable:
    """transformers 5.24 renamed the cache argument of forward from `past_key_values` to `cache` (generate() passes
    `cache=`; output classes still take `past_key_values=` and have it as a property); 4.57-5.23 pass
    `past_key_values=`. The model's forwards take `past_key_values`, given under either name."""

    @functools.wraps(forward)
    def renamed(*args, **kwargs):
        if "cache" in kwargs:
            if kwargs.get("past_key_values") is not None:
                raise ValueError("Pass the cache once: as cache= or as past_key_values=, not both.")
            kwargs["past_key_values"] = kwargs.pop("cache")
        return forward(*args, **kwargs)

    return renamed


# The output classes' name for the cache: "cache" from 5.24 (where "past_key_values" works, with a warning).
OUTPUT_CACHE_FIELD = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"


def cache_output(cache: object) -> dict:
    """The cache as the keyword argument of an output class: `Seq2SeqLMOutput(..., **cache_output(cache))`."""
    return {OUTPUT_CACHE_FIELD: cache}


def cache_of(outputs: object) -> object:
    """The cache that a model output holds (5.24's `past_key_values` property warns that the name is deprecated)."""
    return getattr(outputs, OUTPUT_CACHE_FIELD)


if TRANSFORMERS_5:
    from transformers import initialization as init  # initialisers that respect weights already loaded
    from transformers.masking_utils import create_bidirectional_mask
    from transformers.utils.generic import merge_with_config_defaults
    from transformers.utils.output_capturing import OutputRecorder, capture_outputs

    def records_outputs(forward: Callable) -> Callable:
        """Fill use_cache/return_dict from the config; collect hidden states and attentions when asked."""
        return merge_with_config_defaults(capture_outputs(forward))

    def attention_function(implementation: str, eager: Callable) -> Callable:
        """The attention kernel registered under `implementation` ("eager": the modeling file's own)."""
        return ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager)

    # The mask helpers' name for the cache: "cache" from 5.24 ("past_key_values" works there, with a warning).
    MASK_CACHE_ARGUMENT = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"

    def decoder_self_attention_mask(config, inputs_embeds, attention_mask, self_attention_cache):
        """Causal + padding mask for the decoder's new positions, after those already in the cache."""
        return create_causal_mask(
            config=config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            **{MASK_CACHE_ARGUMENT: self_attention_cache},
        )

    PreTrainedModel = TransformersPreTrainedModel  # 5.x ties weights from _tied_weights_keys ({target: source})

else:  # 4.57
    from torch.nn import init
    from transformers.modeling_attn_mask_utils import _prepare_4d_attention_mask, _prepare_4d_attention_mask_for_sdpa
    from transformers.utils.generic import OutputRecorder
    from transformers.utils.generic import check_model_inputs as records_outputs

    def create_bidirectional_mask(
        config,
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

    def attention_function(implementation: str, eager: Callable) -> Callable:
        return eager if implementation == "eager" else ALL_ATTENTION_FUNCTIONS[implementation]

    def decoder_self_attention_mask(config, inputs_embeds, attention_mask, self_attention_cache):
        past_length = self_attention_cache.get_seq_length() if self_attention_cache is not None else 0
        positions = torch.arange(past_length, past_length + inputs_embeds.shape[1], device=inputs_embeds.device)
        return create_causal_mask(
            config=config,
            input_embeds=inputs_embeds,
            attention_mask=attention_mask,
            cache_position=positions,
            past_key_values=self_attention_cache,
        )

    class PreTrainedModel(TransformersPreTrainedModel):
        """4.x ties weights through the `_tie_weights` hook, not from `_tied_weights_keys` ({target: source})."""

        def _tie_weights(self) -> None:
            for target, source in (getattr(self, "_tied_weights_keys", None) or {}).items():
                module_path, _, name = target.rpartition(".")
                setattr(self.get_submodule(module_path), name, self.get_parameter(source))


__all__ = [
    "OutputRecorder",
    "PreTrainedModel",
    "attention_function",
    "cache_of",
    "cache_output",
    "create_bidirectional_mask",
    "decoder_self_attention_mask",
    "init",
    "records_outputs",
    "takes_cache_by_either_name",
]
