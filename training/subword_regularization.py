"""BPE-dropout (Provilkov et al., ACL 2020): each epoch the training pairs are cut into subwords anew, every BPE merge
skipped with probability p, so that the model sees a word both whole and in pieces. It regularises a small corpus
the way the paper's dropout regularises the network, and costs nothing at inference: validation, test and the
shipped tokenizer segment as always (p = 0).

The segmentation is the `tokenizers` library's own: its BPE model takes a `dropout` (skipped merges come back after
the next merge, as in the paper). Its random draws come from the library's generator, which cannot be seeded, so a
run with BPE-dropout is not repeatable to the digit (a resumed run draws other segmentations of the same
distribution), and under several processes each one draws its own: its batches are cut from its own lengths, so
a pair is trained on once per epoch on average over the processes rather than exactly once.
"""

import copy
from collections.abc import Sequence

from tokenizers import models
from torch.utils.data import Dataset
from transformers import PreTrainedTokenizerFast

from .batching import TokenBudgetBatchSampler
from .data import token_ids


def tokenizer_with_bpe_dropout(tokenizer: PreTrainedTokenizerFast, dropout: float) -> PreTrainedTokenizerFast:
    """A copy of `tokenizer` whose BPE merges are each skipped with probability `dropout` (the original is kept)."""
    if not 0 < dropout < 1:
        raise ValueError(f"--bpe_dropout {dropout}: must be in (0, 1) (0: off).")
    dropping = copy.deepcopy(tokenizer)  # a copy of the Rust tokenizer too: the model below is the copy's own
    model = dropping.backend_tokenizer.model
    if not isinstance(model, models.BPE):
        raise ValueError(
            f"--bpe_dropout needs a BPE vocabulary; this tokenizer's model is {type(model).__name__} "
            "(train the vocabulary with --model_type bpe, or leave --bpe_dropout out)."
        )
    model.dropout = dropout
    return dropping


class BpeDropoutPairs(Dataset):
    """Training pairs, segmented with BPE-dropout once per epoch (`set_epoch`, which accelerate's data loader calls
    at the start of every epoch, a resumed one included), and `batches` cut again for each epoch's lengths (as many
    batches as the plain segmentation gives). Items have the keys of a tokenized pair: input_ids and labels."""

    def __init__(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        tokenizer: PreTrainedTokenizerFast,
        dropout: float,
        batches: TokenBudgetBatchSampler,
    ):
        if not len(sources) == len(targets) == len(batches.tie_break):
            raise ValueError(f"{len(sources)} sources, {len(targets)} targets, {len(batches.tie_break)} batched pairs.")
        self.sources, self.targets = list(sources), list(targets)  # the tokenizer takes lists
        self.tokenizer = tokenizer_with_bpe_dropout(tokenizer, dropout)
        self.batches = batches
        self.epoch: int | None = None
        self.set_epoch(0)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:  # accelerate calls it more than once per epoch
            self.pairs = {
                "input_ids": token_ids(self.tokenizer, self.sources),
                "labels": token_ids(self.tokenizer, self.targets),
            }
            self.batches.recut(list(map(len, self.pairs["input_ids"])), list(map(len, self.pairs["labels"])))
            self.epoch = epoch

    def __len__(self) -> int:
        return len(self.sources)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return {key: self.pairs[key][index] for key in ("input_ids", "labels")}
