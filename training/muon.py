"""Muon for the layers' weight matrices, AdamW for the rest (`--muon`): Muon (Jordan et al., 2024, "Muon: An optimizer
for hidden layers in neural networks") steps each matrix along its momentum made orthogonal (the nearest semi-orthogonal
matrix, by a Newton-Schulz iteration), so that no direction of the matrix's update dominates; with Liu et al.'s rate
(2025, "Muon is Scalable for LLM Training") its updates have the root-mean-square size of AdamW's, so the recipe's rate
and schedule apply unchanged. The embeddings (tied to the output layer, §3.4), LayerNorms and biases keep AdamW, as in
both papers.

Why not `torch.optim.Muon`: it runs the iteration in bf16, which a CPU without bf16 units emulates several times slower
than fp32; here it runs in the parameters' own precision."""

import math
from collections.abc import Callable

import torch
from torch import nn

# Jordan et al.'s quintic Newton-Schulz coefficients and step count (also torch.optim.Muon's).
NEWTON_SCHULZ_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
NEWTON_SCHULZ_STEPS = 5
MOMENTUM = 0.95
# Liu et al.: a (rows x columns) matrix's step is the rate times 0.2 * sqrt(max(rows, columns)), AdamW's RMS.
ADAMW_RMS = 0.2


def orthogonalize(matrix: torch.Tensor, steps: int = NEWTON_SCHULZ_STEPS) -> torch.Tensor:
    """About U V^T for the matrix's SVD U S V^T (its singular values pushed to roughly 1), by Newton-Schulz."""
    a, b, c = NEWTON_SCHULZ_COEFFICIENTS
    wide = matrix.size(0) <= matrix.size(1)
    x = matrix if wide else matrix.T  # (rows, columns), rows <= columns: the Gram matrix is the smaller one
    x = x / x.norm().clamp(min=1e-7)  # singular values at most 1, where the iteration converges
    for _ in range(steps):
        gram = x @ x.T  # (rows, rows)
        x = a * x + (b * gram + c * gram @ gram) @ x
    return x if wide else x.T


def adamw_groups(groups: list[dict]) -> list[dict]:
    """The parameter groups that AdamW steps: those not marked for Muon."""
    return [group for group in groups if not group.get("muon")]


class MuonWithAdamW(torch.optim.AdamW):
    """AdamW whose parameter groups marked `"muon": True` (2-D matrices only) take Muon's step instead: one optimizer,
    one learning-rate schedule, one checkpointed state for both."""

    def __init__(self, params: list[dict], momentum: float = MOMENTUM, **adamw_kwargs) -> None:
        super().__init__(params, **adamw_kwargs)
        for group in self.param_groups:
            group.setdefault("muon", False)
            group.setdefault("momentum", momentum)
            if group["muon"] and any(p.ndim != 2 for p in group["params"]):
                raise ValueError("Muon steps 2-D weight matrices only; give other parameters to AdamW.")

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        every_group = self.param_groups
        self.param_groups = adamw_groups(every_group)  # AdamW steps these alone
        try:
            super().step()
        finally:
            self.param_groups = every_group
        for group in every_group:
            if group["muon"]:
                self.muon_step(group)
        return loss

    def __setstate__(self, state: dict) -> None:
        # Adam's (on loading a checkpoint) gives every parameter's state a "step", which Muon's do not hold.
        super().__setstate__({**state, "param_groups": adamw_groups(state["param_groups"])})
        self.param_groups = state["param_groups"]

    def muon_step(self, group: dict) -> None:
        """Nesterov momentum, made orthogonal, at the rate scaled to AdamW's RMS; decoupled weight decay as AdamW's."""
        momentum = group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(p)
            buffer = state["momentum_buffer"]
            buffer.lerp_(p.grad, 1 - momentum)
            update = orthogonalize(p.grad.lerp(buffer, momentum))
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(update, alpha=-group["lr"] * ADAMW_RMS * math.sqrt(max(p.shape)))


class MuonForMatrices:
    """The Trainer's optimizer factory for `--muon` (transformers' `optimizer_cls_and_kwargs` calls it with the model):
    the layers' 2-D weights to Muon with AdamW's weight decay, everything else to AdamW without it. The embedding and
    output matrices are lookups and a classifier, not hidden layers: AdamW steps them, as in both papers."""

    def __call__(self, model: nn.Module, **adamw_kwargs) -> MuonWithAdamW:
        lookups = [module for module in model.modules() if isinstance(module, nn.Embedding)]
        output = model.get_output_embeddings()  # None in a model without an output layer of its own
        skipped = {id(module.weight) for module in [*lookups, output] if module is not None}
        trained = [p for p in model.parameters() if p.requires_grad]
        hidden = {id(p) for p in trained if p.ndim == 2 and id(p) not in skipped}
        matrices = [p for p in trained if id(p) in hidden]
        others = [p for p in trained if id(p) not in hidden]
        groups = [{"params": matrices, "muon": True}, {"params": others, "weight_decay": 0.0}]
        return MuonWithAdamW(groups, **adamw_kwargs)
