"""CUDA graphs of the training step (`--cuda_graphs`): the forward pass, the recipe's loss and the backward pass of a
batch are recorded once per batch shape with `torch.cuda.make_graphed_callables` and replayed for every later batch
of that shape, so that a step costs the GPU's work instead of some 740 kernel launches from Python. The optimizer's
step stays eager.

Written here because the ecosystem's ways need a compiler: torch.compile's "cudagraphs" backend replays one graph
whatever the shape (token-budget batches change shape every step), and its "reduce-overhead" mode compiles every new
shape with Inductor first.
"""

import functools
from collections.abc import Callable

import torch
from torch import nn

from .loss import LabelSmoothedCrossEntropy

# A new batch shape is recorded while a quarter of the GPU's memory is still free; later shapes run eagerly, since
# every recorded shape keeps its own gradient buffers (the model's size) for the rest of the run.
LEAST_FREE_MEMORY = 0.25


class SummedLoss(nn.Module):
    """The model's forward pass and the recipe's loss summed over the labelled positions, from the batch's tensors in
    the order of `names`: what a graph records takes tensors and gives tensors only."""

    def __init__(self, model: nn.Module, loss: LabelSmoothedCrossEntropy, names: tuple[str, ...]):
        super().__init__()
        self.model, self.loss, self.names = model, loss, names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        inputs = dict(zip(self.names, tensors, strict=True))
        labels = inputs.pop("labels")
        return self.loss.summed(self.model(**inputs).logits, labels)


def gpu_has_room() -> bool:
    """Whether the GPU has at least `LEAST_FREE_MEMORY` of its memory free."""
    free, total = torch.cuda.mem_get_info()
    return free >= LEAST_FREE_MEMORY * total


class GraphedSteps:
    """The graphs of each batch shape (and model) seen in training, recorded at its first batch.

    All shapes record into one memory pool: the graphs of a step (its forward, then its backward) run one after the
    other and leave nothing in the pool that another shape's step reads, so the pool is as large as the largest
    step's, not the sum of all. That holds while every step's gradients are consumed before the next batch: one
    batch a step (pytorch#181723: a graph's parameter gradients are its own buffers, overwritten when it replays)."""

    def __init__(
        self,
        loss: LabelSmoothedCrossEntropy,
        record: Callable | None = None,
        has_room: Callable[[], bool] = gpu_has_room,
    ):
        if record is None:  # one memory pool for every shape (see above)
            record = functools.partial(torch.cuda.make_graphed_callables, pool=torch.cuda.graph_pool_handle())
        self.loss, self.record, self.has_room = loss, record, has_room
        # (the model's id, the batch's shape) → its graphed SummedLoss, or None: eager. A graph holds its model, so
        # the id stays that model's.
        self.graphs: dict[tuple, Callable | None] = {}

    def summed_loss(self, model: nn.Module, inputs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The batch's loss summed over its labelled positions, from its shape's graphs; None where its shape found
        the GPU too full to record (the caller runs that batch eagerly)."""
        names = tuple(sorted(inputs))
        tensors = tuple(inputs[name] for name in names)
        key = (id(model), *((name, tuple(tensor.shape)) for name, tensor in zip(names, tensors, strict=True)))
        if key not in self.graphs:
            step = SummedLoss(model, self.loss, names)
            self.graphs[key] = self.record(step, tensors) if self.has_room() else None
        graphed = self.graphs[key]
        return None if graphed is None else graphed(*tensors)
