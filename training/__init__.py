"""The paper's training recipe (§5) on Hugging Face parts; installed as `vanilla_transformer.training`.

Run it with `vt-train` (`training.train`). What the commands of `vanilla_transformer.tools` use of it is imported
from here, the recipe's public face: they reach into none of its modules. Imports flow one way:
vanilla_transformer (the model) <- training <- tools.
"""

import importlib

# Each public name and the module that defines it, imported at first use: a command that only reads text files
# (vt-translate) then starts without importing the Trainer, datasets and sacreBLEU.
PUBLIC = {
    "AveragingError": "average_checkpoints",
    "CorpusError": "text_files",
    "DataArguments": "data",
    "bleu_metric": "metrics",
    "check_data_dir": "data",
    "check_scoring": "metrics",
    "config_file": "arguments",
    "data_arguments": "arguments",
    "decode_lines": "text_files",
    "existing_file": "text_files",
    "first_line": "console",
    "last_checkpoints": "average_checkpoints",
    "language_file": "data",
    "one_line_errors": "console",
    "load_parallel_corpus": "data",
    "loading_bars_for": "console",
    "preprocessed": "data",
    "read_lines": "text_files",
    "read_config": "arguments",
    "record_text_preprocessing": "tokenizer",
    "replacement_problem": "folders",
    "run_report": "train",
    "reuse_freed_memory": "allocator",
    "score_cells": "model_card",
    "translation_scores": "metrics",
    "transformers_bars_off": "console",
    "unknown_names": "arguments",
    "use_mkl_intel_kernels": "mkl_kernels",
    "write_averaged_model": "average_checkpoints",
    "write_folder": "folders",
}


def __getattr__(name: str) -> object:
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{PUBLIC[name]}", __name__), name)


__all__ = sorted(PUBLIC)
