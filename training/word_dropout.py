"""Word dropout, as blank noising (Xie et al., ICLR 2017; for small corpora, Sennrich and Zhang, ACL 2019): in
training, each token of the encoder's and the decoder's inputs is replaced by <unk> with probability p, so that no
prediction can lean on any one input word. The labels stay whole: every target token is still predicted. Evaluation
and inference see their inputs unchanged.

The blanks are drawn from torch's generator in the process that collates (the training process, or a loader worker,
which torch seeds from it), so a seeded run draws the same blanks again."""

import torch
from transformers import PreTrainedTokenizerBase

BLANKED = ("input_ids", "decoder_input_ids")


class WordDropout:
    """A collator's batches with each input token, special tokens apart, replaced by <unk> with probability `p`."""

    def __init__(self, collate, p: float, tokenizer: PreTrainedTokenizerBase):
        if not 0 < p < 1:
            raise ValueError(f"--word_dropout {p}: must be in (0, 1) (0: off).")
        if getattr(tokenizer, "unk_token_id", None) is None:
            raise ValueError("--word_dropout blanks tokens with <unk>: the trainer needs a tokenizer that has one.")
        self.collate, self.p, self.unk_id = collate, p, tokenizer.unk_token_id
        self.special_ids = torch.tensor(tokenizer.all_special_ids)  # padding, </s>, the decoder's start: kept

    def __call__(self, features: list) -> dict:
        batch = self.collate(features)
        for name in BLANKED:
            if name in batch:
                ids = batch[name]  # (B, T)
                blank = (torch.rand(ids.shape) < self.p) & ~torch.isin(ids, self.special_ids)
                batch[name] = ids.masked_fill(blank, self.unk_id)
        return batch
