"""The recipe's losses, given to the Trainer as its `compute_loss_func`; the model's own loss is the plain
cross-entropy (as every transformers model's), the recipe's live here, as fairseq keeps them in criteria.

§5.4 label smoothing: "During training, we employed label smoothing of value eps_ls = 0.1. This hurts perplexity, as
the model learns to be more unsure, but improves accuracy and BLEU score."

On one CPU process the output layer and the loss run fused by default (`--fused_output_loss`): the logits and
their gradient are computed 256 target positions at a time, so that the (positions x vocabulary) arrays that the
plain path reads and writes many times stay in the cache. The ecosystem's fused linear cross-entropy kernels
(Liger-Kernel, Apple's Cut Cross-Entropy) are Triton, for GPUs, and do not smooth labels; hence this one.

R-Drop (Liang et al., "R-Drop: Regularized Dropout for Neural Networks", NeurIPS 2021, Eq. 3), an option of the
recipe and not of the paper: each training pair goes through the model twice, under two dropout masks, and the loss
adds alpha times the symmetric KL divergence between the two predicted distributions to both copies' cross-entropy.

With `--target_vocabulary_softmax` the softmax runs over the tokens that occur in the training targets only (a joint
vocabulary holds many that only the source language uses): the output layer's products shrink by their share, and
the model's generation config suppresses them (and renormalises the rest), so that it never writes a token it was not
trained to write, and scores the others as the loss did.
"""

from collections.abc import Iterable

import torch
from torch import nn
from transformers import GenerationConfig
from transformers.modeling_outputs import Seq2SeqLMOutput


def per_label(total: torch.Tensor, labels: torch.Tensor, num_items_in_batch: int | torch.Tensor | None) -> torch.Tensor:
    """A loss summed over labelled positions, divided by `num_items_in_batch` (the labels of the whole accumulated,
    all-device batch) when given, so that gradient accumulation and data parallelism give the gradient of one big
    batch; else by this batch's labels."""
    count = num_items_in_batch if num_items_in_batch is not None else (labels != -100).sum()
    # A batch without a label adds nothing (the mean over no position is nan); clamped on the device, no sync.
    count = count.to(total.device).clamp(min=1) if isinstance(count, torch.Tensor) else max(count, 1)
    return total / count


def narrows_softmax(config: GenerationConfig) -> bool:
    """Whether a generation config suppresses tokens and renormalises the rest, as `TargetVocabulary.narrow` writes it
    for a model trained with `--target_vocabulary_softmax`."""
    return bool(config.renormalize_logits and config.suppress_tokens)


class TargetVocabulary:
    """The token ids that occur in the training targets (`--target_vocabulary_softmax`), and each one's place among
    them: the loss's softmax runs over these columns of the logits (rows of the output layer) alone."""

    def __init__(self, token_ids: Iterable[int], vocab_size: int):
        self.ids = torch.tensor(sorted(set(token_ids)))  # (V',)
        self.vocab_size = vocab_size
        # A label's place among the ids, -100 (no loss) for a token outside them; the extra last entry is for -100.
        self.places = torch.full((vocab_size + 1,), -100)
        self.places[self.ids] = torch.arange(len(self.ids))
        self.on_device: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def of_labels(cls, labels: Iterable[int], vocab_size: int) -> "TargetVocabulary":
        """The tokens of the training targets' label ids (-100, a label without loss, is none)."""
        return cls((token for token in labels if token != -100), vocab_size)

    @classmethod
    def of_generation_config(cls, config: GenerationConfig, vocab_size: int) -> "TargetVocabulary | None":
        """The tokens that a model trained with this softmax writes, read back from the generation config that
        `narrow` wrote; None where the config narrows nothing (the model's softmax covers every token)."""
        if not narrows_softmax(config):
            return None
        suppressed = set(config.suppress_tokens)
        return cls((token for token in range(vocab_size) if token not in suppressed), vocab_size)

    def suppressed(self) -> list[int]:
        """The other tokens of the vocabulary, for the generation config's `suppress_tokens`."""
        kept = set(self.ids.tolist())
        return [token for token in range(self.vocab_size) if token not in kept]

    def narrow(self, generation_config: GenerationConfig) -> None:
        """Decoding as the loss trained: the other tokens suppressed, so that generate() never writes one, and the
        rest renormalised, since beam search suppresses after its log-softmax over every token (the others' share,
        which no loss made small, would skew every score)."""
        generation_config.suppress_tokens = self.suppressed()
        generation_config.renormalize_logits = True

    def select(self, tensor: torch.Tensor, labels: torch.Tensor, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
        """`tensor`'s entries of the target tokens along `dim` (logits: the last; the output layer's weight: 0), and
        the labels as places among them."""
        if labels.device not in self.on_device:  # once per device: a CUDA graph records no copy from the host
            self.on_device[labels.device] = (self.ids.to(labels.device), self.places.to(labels.device))
        ids, places = self.on_device[labels.device]
        return tensor.index_select(dim, ids), places[labels.masked_fill(labels == -100, self.vocab_size)]


class LabelSmoothedCrossEntropy:
    """§5.4: cross-entropy against (1 - eps) on the label and eps spread uniformly over the vocabulary (the training
    targets' tokens with a `TargetVocabulary`), per labelled position (positions labelled -100 are ignored). Called by
    the Trainer as `compute_loss_func(outputs, labels, num_items_in_batch)`."""

    def __init__(self, epsilon: float, target_vocabulary: TargetVocabulary | None = None):
        self.epsilon = epsilon
        self.target_vocabulary = target_vocabulary

    def __call__(
        self,
        outputs: Seq2SeqLMOutput,
        labels: torch.Tensor,
        num_items_in_batch: int | torch.Tensor | None = None,
    ) -> torch.Tensor:
        return per_label(self.summed(outputs["logits"], labels), labels, num_items_in_batch)

    def summed(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss summed over the labelled positions."""
        if self.target_vocabulary is not None:
            logits, labels = self.target_vocabulary.select(logits, labels, dim=-1)
        return self.summed_over_logits(logits, labels)

    def summed_over_logits(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss summed over the labelled positions, with a softmax over every logit given."""
        return nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]).float(),  # (B*T, V): decoder position t predicts labels[t]
            labels.reshape(-1),
            ignore_index=-100,
            label_smoothing=self.epsilon,
            reduction="sum",
        )


ROWS_AT_A_TIME = 256  # of the fused output loss, chosen by speed: docs/experiments.md, issue 41, eighth part


class FusedOutputCrossEntropy(torch.autograd.Function):
    """The output layer (§3.4: logits = hidden · Wᵀ, W the tied embedding) and §5.4's label-smoothed cross-entropy,
    summed over the labelled positions, with both gradients computed chunk by chunk in the forward pass:
    d loss / d logits = softmax - ((1 - eps) on the label + eps / V everywhere), zero at unlabelled positions."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)  # bf16 logits cost validation BLEU
    def forward(
        ctx: torch.autograd.function.FunctionCtx,
        hidden: torch.Tensor,
        weight: torch.Tensor,
        labels: torch.Tensor,
        epsilon: float,
    ) -> torch.Tensor:
        vocabulary = weight.shape[0]  # hidden (N, D), weight (V, D)
        grad_hidden = torch.empty_like(hidden)
        grad_weight = torch.zeros_like(weight)
        total = hidden.new_zeros(())
        for start in range(0, len(labels), ROWS_AT_A_TIME):
            rows = slice(start, start + ROWS_AT_A_TIME)
            log_probs = torch.log_softmax(hidden[rows] @ weight.t(), -1)  # (n, V)
            label = labels[rows].clamp(min=0).unsqueeze(1)  # (n, 1); -100 → 0, zeroed below
            labelled = labels[rows] != -100
            loss = -(1 - epsilon) * log_probs.gather(1, label).squeeze(1) - epsilon / vocabulary * log_probs.sum(-1)
            total += loss @ labelled.float()
            grad_logits = log_probs.exp_().sub_(epsilon / vocabulary)  # in place: the (n, V) array is written once
            grad_logits.scatter_add_(1, label, grad_logits.new_full(label.shape, -(1 - epsilon)))
            grad_logits.index_fill_(0, (~labelled).nonzero().squeeze(1), 0)
            torch.mm(grad_logits, weight, out=grad_hidden[rows])
            grad_weight.addmm_(grad_logits.t(), hidden[rows])
        ctx.save_for_backward(grad_hidden, grad_weight)
        return total

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(
        ctx: torch.autograd.function.FunctionCtx, grad_total: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        grad_hidden, grad_weight = ctx.saved_tensors
        return grad_hidden * grad_total, grad_weight * grad_total, None, None


def fused_output_cross_entropy_sum(
    hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, epsilon: float
) -> torch.Tensor:
    """§5.4's loss summed over the labelled positions, from the decoder's last hidden states (B, T, D) and the output
    layer's weight (V, D), in fp32: the same as `LabelSmoothedCrossEntropy.summed` of the logits."""
    if hidden.device.type != "cpu":
        raise ValueError(f"The fused output loss runs on a CPU; the hidden states are on {hidden.device}.")
    hidden = hidden.reshape(-1, hidden.shape[-1])  # (B*T, D)
    return FusedOutputCrossEntropy.apply(hidden, weight, labels.reshape(-1), epsilon)


def symmetric_kl_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """R-Drop's ½ (KL(P1 ‖ P2) + KL(P2 ‖ P1)) between the first and the second half of a batch (the same pairs under
    two dropout masks), summed over the labelled positions of a pair once."""
    log_p1, log_p2 = logits.float().log_softmax(-1).chunk(2)  # (B, T, V) each
    labelled = (labels.chunk(2)[0] != -100).unsqueeze(-1)  # (B, T, 1)
    # KL(P1 ‖ P2) + KL(P2 ‖ P1) = Σ_v (p1 - p2)(log p1 - log p2)
    divergence = (log_p1.exp() - log_p2.exp()) * (log_p1 - log_p2)
    return divergence.masked_fill(~labelled, 0.0).sum() / 2


class RDropLoss(LabelSmoothedCrossEntropy):
    """Liang et al. (2021), Eq. 3, as fairseq's R-Drop criterion computes it: both copies' label-smoothed
    cross-entropy plus alpha times their symmetric KL divergence, per labelled position of the doubled batch.

    A training batch holds each pair twice, the second copy after the first (`PairsTwice`); an evaluation batch, run
    without gradients, holds each pair once and gets the label-smoothed cross-entropy alone."""

    def __init__(self, epsilon: float, alpha: float, target_vocabulary: TargetVocabulary | None = None):
        super().__init__(epsilon, target_vocabulary)
        self.alpha = alpha

    def summed_over_logits(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        total = super().summed_over_logits(logits, labels)
        if not logits.requires_grad:
            return total
        if len(labels) % 2:
            raise ValueError(f"R-Drop: a training batch of {len(labels)} rows cannot hold each pair twice.")
        return total + self.alpha * symmetric_kl_sum(logits, labels)


class PairsTwice:
    """R-Drop's training batches: the collator's batch, then the same rows again, so that one forward pass draws two
    dropout masks for every pair."""

    def __init__(self, collate):
        self.collate = collate

    def __call__(self, features: list) -> dict:
        batch = self.collate(features)
        return {name: torch.cat([value, value]) for name, value in batch.items()}
