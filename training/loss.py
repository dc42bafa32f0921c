"""§5.4 label smoothing: the recipe's loss, given to the Trainer as its `compute_loss_func`.

"During training, we employed label smoothing of value eps_ls = 0.1. This hurts perplexity, as the model learns to
be more unsure, but improves accuracy and BLEU score." The model's own loss is the plain cross-entropy (as every
transformers model's); the recipe's lives here, as fairseq keeps it in a criterion.
"""

import torch
from torch import nn
from transformers.modeling_outputs import Seq2SeqLMOutput


class LabelSmoothedCrossEntropy:
    """Cross-entropy against a target distribution of (1 - eps) on the label and eps spread uniformly over the
    vocabulary; positions labelled -100 are ignored.

    Called by the Trainer as `compute_loss_func(outputs, labels, num_items_in_batch)`: the sum over labelled positions
    is divided by `num_items_in_batch` (the labels of the whole accumulated, all-device batch) when given, so that
    gradient accumulation and data parallelism give the gradient of one big batch; else by this batch's labels.
    """

    def __init__(self, epsilon: float):
        self.epsilon = epsilon

    def __call__(
        self,
        outputs: Seq2SeqLMOutput,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | None = None,
    ) -> torch.Tensor:
        logits = outputs["logits"]  # (B, T, V): decoder position t predicts labels[t]
        total = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),
            labels.reshape(-1),
            ignore_index=-100,
            label_smoothing=self.epsilon,
            reduction="sum",
        )
        count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
        # A batch without a label adds nothing (the mean over no position is nan); clamped on the device, no sync.
        count = count.to(total.device).clamp(min=1) if isinstance(count, torch.Tensor) else max(count, 1)
        return total / count
