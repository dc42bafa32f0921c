"""§5.3: lrate = d_model^-0.5 · min(step^-0.5, step · warmup_steps^-1.5).

transformers' "inverse_sqrt" schedule draws the same curve but counts steps from 0, so that its first update has a
learning rate of 0; this one counts from 1 as the paper does.
"""

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR


def paper_learning_rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The rate at optimizer step `step` (1-based), times an optional `scale`."""
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def peak_learning_rate(d_model: int, warmup_steps: int, scale: float = 1.0) -> float:
    """The highest rate, reached at the last warmup step: scale · d_model^-0.5 · warmup^-0.5."""
    return paper_learning_rate(warmup_steps, d_model, warmup_steps, scale)


def inverse_sqrt_schedule(optimizer: Optimizer, warmup_steps: int) -> LambdaLR:
    """Linear warmup to the optimizer's learning rate (the peak), then decay with 1/sqrt(step).

    With the optimizer's rate set to `peak_learning_rate(d_model, warmup_steps, scale)`, the rate at every step is
    exactly `paper_learning_rate`; any other peak keeps the paper's shape (as fairseq's --lr does).
    """
    if warmup_steps < 1:
        raise ValueError(f"warmup_steps must be at least 1, got {warmup_steps}.")

    def factor(completed_steps: int) -> float:
        step = completed_steps + 1  # LambdaLR counts the steps already taken; the paper numbers them from 1
        return min(step**-0.5, step * warmup_steps**-1.5) * warmup_steps**0.5

    return LambdaLR(optimizer, factor)
