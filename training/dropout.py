"""Dropout's masks from random bits, for training on a CPU (`--random_bits_dropout`).

torch's CPU dropout draws its mask with `bernoulli_`, which is slow on a CPU (pytorch/pytorch#138199, open; in a
small model, a large share of a training step: docs/training.md). This module
draws the same mask from 16-bit random integers, four to each 64-bit number of torch's generator: an element is kept
where its integer is at least p · 2^16, which keeps it with probability 1 - p (p rounded to a 65,536th), and the kept
elements are scaled by 1 / (1 - p) as in `nn.Dropout`. The model file keeps `nn.Dropout` (what it means is the
paper's §5.4); the recipe swaps in this module for training only, and a saved model is the same either way (dropout
holds no weights). Attention dropout (not the paper's, off in every config) stays torch's, inside its attention
kernel."""

import torch
from torch import nn

LEVELS = 2**16  # the values of one 16-bit random integer


def keep_mask(shape: torch.Size, p: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A mask of `shape` whose elements are 1 / (1 - p) with probability 1 - p and 0 otherwise (p rounded to a
    65,536th), drawn from torch's generator: the same seed draws the same mask."""
    dropped = round(p * LEVELS)  # the integers in [-2^15, -2^15 + dropped) drop their element
    if dropped == LEVELS:
        return torch.zeros(shape, dtype=dtype, device=device)
    count = shape.numel()
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=device).random_(-(2**63), None)  # 64 random bits
    integers = words.view(torch.int16)[:count].view(shape)  # uniform on [-2^15, 2^15)
    keep = integers >= dropped - LEVELS // 2
    return keep.to(dtype).mul_(LEVELS / (LEVELS - dropped))


class RandomBitsDropout(nn.Dropout):
    """`nn.Dropout` with its mask drawn by `keep_mask`: the same rate `p` (changed in place by late dropout too)."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return input
        return input * keep_mask(input.shape, self.p, input.dtype, input.device)


def dropout_slots(model: nn.Module) -> list[tuple[nn.Module, str, nn.Dropout]]:
    """(parent module, attribute name, dropout module) of each dropout module of `model`."""
    return [
        (parent, name, child)
        for parent in model.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Dropout)
    ]


def swap_dropout(model: nn.Module, kind: type[nn.Dropout] = RandomBitsDropout) -> None:
    """Replaces each dropout module of `model` with a `kind` module of the same rate."""
    for parent, name, module in dropout_slots(model):
        setattr(parent, name, kind(module.p))
