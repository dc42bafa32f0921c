"""The paper's training recipe (§5) on Hugging Face parts; installed as `vanilla_transformer.training`.

Run it with `vt-train` (`training.train`). What the commands of `vanilla_transformer.tools` use of it is imported
from here, the recipe's public face: they reach into none of its modules. Imports flow one way:
vanilla_transformer (the model) <- training <- tools.
"""

from .allocator import reuse_freed_memory
from .average_checkpoints import AveragingError, last_checkpoints, write_averaged_model
from .data import DataArguments, load_parallel_corpus, preprocessed
from .folders import replacement_problem, write_folder
from .metrics import bleu_tokenizer, translation_scores
from .model_card import score_cells
from .text_files import CorpusError, decode_lines, read_lines
from .tokenizer import record_text_preprocessing

__all__ = [
    "AveragingError",
    "CorpusError",
    "DataArguments",
    "bleu_tokenizer",
    "decode_lines",
    "last_checkpoints",
    "load_parallel_corpus",
    "preprocessed",
    "read_lines",
    "record_text_preprocessing",
    "replacement_problem",
    "reuse_freed_memory",
    "write_folder",
    "score_cells",
    "translation_scores",
    "write_averaged_model",
]
