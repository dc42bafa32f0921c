"""Schedule-free AdamW (Defazio et al., NeurIPS 2024, "The Road Less Scheduled"), the Trainer's own
`--optim schedule_free_adamw` (the `schedulefree` package): Adam's steps are taken at a point y between the iterate z
and a running average x of the iterates, and x is the model to evaluate and keep, so no decaying rate is needed. The
optimizer swaps x and y into the parameters in place (`optimizer.eval()`, `optimizer.train()`); the Trainer puts it in
train mode at every step and in eval mode to evaluate, and this callback does it for each checkpoint and for the model
that training leaves, so that both hold x."""

from torch.optim import Optimizer
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.training_args import OptimizerNames

# transformers' names, a str enum: equal to the plain strings of a YAML config or the command line.
SCHEDULE_FREE_OPTIMIZERS = (
    OptimizerNames.SCHEDULE_FREE_ADAMW,
    OptimizerNames.SCHEDULE_FREE_RADAM,
    OptimizerNames.SCHEDULE_FREE_SGD,
)


def is_schedule_free(optim: object) -> bool:
    """Whether a Trainer `optim` name (a string or transformers' `OptimizerNames`) is a schedule-free optimizer."""
    return optim in SCHEDULE_FREE_OPTIMIZERS


class ScheduleFreeAverage(TrainerCallback):
    """Puts the parameters at the optimizer's average x before a checkpoint is written and when training ends; the
    Trainer's next training step puts them back at y."""

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, optimizer: Optimizer, **kwargs
    ) -> None:
        if control.should_save:  # set by now: the Trainer saves after its callbacks' on_step_end
            optimizer.eval()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, optimizer: Optimizer, **kwargs
    ) -> None:
        optimizer.eval()
