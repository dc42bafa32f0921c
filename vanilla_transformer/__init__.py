"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a Hugging Face model.

Importing the package registers the classes with the Auto* factories, and marks them for auto classes so that
`save_pretrained` copies the code files into the folder and writes `auto_map`: such a folder then loads with
`trust_remote_code=True` where this package is not installed. These registrations concern this model type only.

`TranslationPipeline` is the translation pipeline that transformers 5.x no longer has. It works on its own
(`TranslationPipeline(model=model, tokenizer=tokenizer)`) and from the folders that training writes
(`pipeline("translation", model=folder, trust_remote_code=True)`); `register_translation_task()`, called once, makes
it transformers' "translation" task for every model in the process.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

import transformers.pipelines
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .configuration_vanilla_transformer import VanillaTransformerConfig
from .modeling_vanilla_transformer import (
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
    VanillaTransformerPreTrainedModel,
    sinusoidal_positional_encoding,
)
from .pipeline_vanilla_transformer import TranslationPipeline, task_languages

AutoConfig.register(VanillaTransformerConfig.model_type, VanillaTransformerConfig, exist_ok=True)
AutoModel.register(VanillaTransformerConfig, VanillaTransformerModel, exist_ok=True)
AutoModelForSeq2SeqLM.register(VanillaTransformerConfig, VanillaTransformerForConditionalGeneration, exist_ok=True)

VanillaTransformerConfig.register_for_auto_class()
VanillaTransformerModel.register_for_auto_class("AutoModel")
VanillaTransformerForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")


def register_translation_task() -> None:
    """Make `pipeline("translation", ...)` build this package's TranslationPipeline, for any seq2seq model (Marian
    too) and for our folders without trust_remote_code. transformers 5.x removed its own translation task; on 4.x,
    which still has it, nothing changes. A process-wide setting of transformers, hence a call, not an import."""
    registry = transformers.pipelines.PIPELINE_REGISTRY
    if "translation" in registry.supported_tasks:
        return  # transformers' own task (4.x), or this one, registered by an earlier call
    # From 5.19 transformers names the task in REMOVED_TASKS, whose message would win over the registry; before, the
    # task is simply absent.
    getattr(transformers.pipelines, "REMOVED_TASKS", {}).pop("translation", None)
    registry.register_pipeline(
        "translation", pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
    )
    registry.check_task = partial(check_task_with_languages, registry.check_task)


def check_task_with_languages(check_task: Callable, task: str) -> tuple[str, dict, Any]:
    """The registry's task check, which in 5.x no longer reads 4.x's "translation_en_to_de": such a task is
    "translation" with its languages as options, as 4.x returned it (the pipeline checks them against the model's)."""
    source, target = task_languages(task)
    if source is None:
        return check_task(task)
    name, implementation, _ = check_task("translation")
    return name, implementation, (source, target)


__all__ = [
    "VanillaTransformerConfig",
    "VanillaTransformerPreTrainedModel",
    "VanillaTransformerModel",
    "VanillaTransformerForConditionalGeneration",
    "sinusoidal_positional_encoding",
    "TranslationPipeline",
    "register_translation_task",
]
