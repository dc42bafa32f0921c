"""Late dropout (Liu et al., ICML 2023, "Dropout Reduces Underfitting"): a model that overfits its data trains
without dropout for its first steps, then with its own rates; the early steps learn faster, the later ones are
regularised. The rates are the model's `nn.Dropout` modules' (embeddings, residual connections, the FFN's
activations), switched in place: the config and the saved model keep their rates. Attention dropout (not the paper's,
off in every config) is left as it is."""

from torch import nn
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments


class LateDropout(TrainerCallback):
    """Sets the model's dropout modules to 0 for the first `steps` optimizer steps and back to their rates at step
    `steps`; a run resumed past that step trains with its rates from the start."""

    def __init__(self, steps: int):
        if steps < 1:
            raise ValueError(f"--late_dropout_steps {steps}: must be at least 1 (0: off).")
        self.steps = steps
        self.rates: dict[nn.Dropout, float] = {}

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: nn.Module, **kwargs
    ) -> None:
        self.rates = {module: module.p for module in model.modules() if isinstance(module, nn.Dropout)}
        if state.global_step < self.steps:
            for module in self.rates:
                module.p = 0.0

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        if state.global_step == self.steps:
            self.restore_rates()

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        self.restore_rates()  # a run that stopped before `steps` leaves its model with the rates of its config

    def restore_rates(self) -> None:
        for module, rate in self.rates.items():
            module.p = rate
