"""LayerDrop (Fan et al., ICLR 2020, "Reducing Transformer Depth on Demand with Structured Dropout"): in training,
each encoder and decoder layer is skipped for a whole batch with probability p, its input passed on as its output; a
regulariser on whole layers, and a step that skips a layer skips its compute too. In evaluation every layer runs.

Under pre-LN a skipped layer adds nothing to the residual stream; under the paper's post-LN it also skips the layer's
normalisations. The skip wraps each layer's `forward` for the run (the model file stays the paper; the saved weights
and config are untouched) and is undone when training ends.
"""

from collections.abc import Callable
from types import MethodType

import torch
from torch import nn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


def skippable_forward(rate: float) -> Callable[..., torch.Tensor]:
    """A layer's forward that, in training, skips the layer with probability `rate` (the class's forward else); bound
    to the layer as a method, so that a copy of the model (the exponential average's) binds it to the copy."""

    def forward(self: nn.Module, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if self.training and torch.rand(()) < rate:
            return hidden_states
        return type(self).forward(self, hidden_states, *args, **kwargs)

    return forward


class LayerDrop(TrainerCallback):
    """Skips each of the model's encoder and decoder layers with probability `rate` at every training step."""

    def __init__(self, rate: float):
        if not 0 < rate < 1:
            raise ValueError(f"--layer_drop {rate}: must be in (0, 1) (0: off).")
        self.rate = rate
        self.layers: list[nn.Module] = []

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: nn.Module, **kwargs
    ) -> None:
        self.layers = [*model.get_encoder().layers, *model.get_decoder().layers]
        for layer in self.layers:
            layer.forward = MethodType(skippable_forward(self.rate), layer)

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        for layer in self.layers:
            del layer.forward  # the class's forward again
        self.layers = []
