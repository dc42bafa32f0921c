"""An exponential moving average of the weights (Polyak and Juditsky, 1992; Marian's `--exponential-smoothing`,
fairseq's `--ema-decay`): after every optimizer step the average moves a fraction 1 - decay of the way to the
weights, so it weighs the last 1 / (1 - decay) steps most, as checkpoint averaging (§6.1) weighs the last few
checkpoints equally. It is torch's own `AveragedModel` with its EMA update; the model trains on its weights as
before, and the average is evaluated after training as one more model.

Each checkpoint holds the average (`exponential_average.safetensors`), written before the Trainer writes the rest
of the checkpoint and its state last, so that a checkpoint complete enough to resume from has it; a resumed run goes
on with its checkpoint's average.
"""

from pathlib import Path

import torch
from safetensors.torch import load_model, save_model
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from .checkpoints import EXPONENTIAL_AVERAGE


def checkpoint_folder(args: TrainingArguments, state: TrainerState) -> Path:
    """The folder the Trainer writes (or wrote) the checkpoint of this step to."""
    return Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"


class ExponentialAverage(TrainerCallback):
    """Updates an exponential moving average of the model's weights after every optimizer step and writes it into
    every checkpoint; a resumed run starts from its checkpoint's average."""

    def __init__(self, decay: float):
        self.decay = decay
        self.average: AveragedModel | None = None
        self.weight_lists: tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]] = ([], [])

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: nn.Module, **kwargs
    ) -> None:
        # use_buffers=False: the model has no buffers that train (the sinusoids are fixed).
        self.average = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(self.decay), use_buffers=False)
        if state.global_step > 0:  # resumed: go on from the checkpoint's average, not from the resumed weights
            checkpoint = Path(args.resume_from_checkpoint or checkpoint_folder(args, state))
            if not (checkpoint / EXPONENTIAL_AVERAGE).is_file():
                raise FileNotFoundError(
                    f"{checkpoint} has no {EXPONENTIAL_AVERAGE}: it was written by a run without --ema_decay."
                )
            load_model(self.average.module, checkpoint / EXPONENTIAL_AVERAGE)
            self.average.n_averaged.fill_(state.global_step)  # not 0: the next update averages instead of copying
        # Gathered once: update_parameters gathers both models' weights anew at every step, host work that a small
        # model's step on a GPU waits for.
        self.weight_lists = (list(self.average.module.parameters()), list(model.parameters()))

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: nn.Module, **kwargs
    ) -> None:
        if self.average.n_averaged == 0:
            self.average.update_parameters(model)  # the first update copies the weights
        else:  # torch's EMA update (a foreach lerp) on the lists gathered once
            self.average.multi_avg_fn(*self.weight_lists, self.average.n_averaged)
            self.average.n_averaged += 1
        if control.should_save and args.should_save:  # set by now: the Trainer saves after its callbacks' on_step_end
            checkpoint = checkpoint_folder(args, state)
            checkpoint.mkdir(parents=True, exist_ok=True)
            save_model(self.average.module, str(checkpoint / EXPONENTIAL_AVERAGE))

    def weights(self) -> dict[str, torch.Tensor]:
        """The average's weights, named as the model's (`load_state_dict`)."""
        return self.average.module.state_dict()
