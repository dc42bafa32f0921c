"""Where a training step's time goes, for a `vt-train` command on this machine: the step's parts as the Trainer's
callbacks see them (the batch and the loop, the forward pass with the loss and the backward pass, the optimizer, the
rate's schedule with zeroing the gradients), then torch.profiler's operators by their own CPU time over the last steps.

    python benchmarks/step_profile.py --config training/configs/multi30k_en_de.yaml \\
        --data_dir ../shared/data/multi30k --output_dir /tmp/speed --max_tokens 1024 --warmup_steps 4000 \\
        --max_steps 300

The arguments are vt-train's, and --profile_steps (30: the profiled steps, the run's last), --rows (25: operators
listed) and --by_shape (the operators split by their inputs' shapes as well). The parts are timed over the second
half of the steps before the profiled ones (the profiler slows the steps it records). Prints figures, not verdicts;
run nothing else heavy beside it.
"""

import argparse
import statistics
import sys
import time

import torch
from training_speed import trainer_without_evaluation
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

# Each part of a step ends at one of the Trainer's callbacks; the first begins where the step before ended. The
# second also holds the gradient's norm, which the Trainer computes after the backward pass for its log.
PARTS = {
    "on_step_begin": "the batch and the loop",
    "on_pre_optimizer_step": "forward, loss and backward",
    "on_optimizer_step": "the optimizer",
    "on_step_end": "rate schedule and zero_grad",
}


class StepParts(TrainerCallback):
    """The wall-clock time of each step's parts, and torch.profiler over the steps from `profile_from` on."""

    def __init__(self, profile_from: int):
        self.profile_from = profile_from
        self.seconds: dict[str, list[float]] = {part: [] for part in PARTS.values()}
        self.last = time.perf_counter()
        self.profiler: torch.profiler.profile | None = None

    def mark(self, callback: str) -> None:
        now = time.perf_counter()
        self.seconds[PARTS[callback]].append(now - self.last)
        self.last = now

    def on_step_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        if state.global_step == self.profile_from:
            self.profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True)
            self.profiler.start()
        self.mark("on_step_begin")

    def on_pre_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs
    ) -> None:
        self.mark("on_pre_optimizer_step")

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs
    ) -> None:
        self.mark("on_optimizer_step")

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        self.mark("on_step_end")
        if self.profiler is not None and state.global_step == state.max_steps:
            self.profiler.stop()


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--profile_steps", type=int, default=30)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--by_shape", action="store_true")
    own, rest = parser.parse_known_args(sys.argv[1:])
    args, trainer = trainer_without_evaluation(rest)
    if not 0 < own.profile_steps < args.max_steps // 2:
        raise SystemExit(f"--profile_steps {own.profile_steps}: give from 1 to under half of --max_steps.")
    first_profiled = args.max_steps - own.profile_steps
    parts = StepParts(profile_from=first_profiled)
    trainer.add_callback(parts)
    trainer.train()
    timed = slice(args.max_steps // 2, first_profiled)  # list index k is step k + 1: the second half, unprofiled
    total = sum(statistics.mean(seconds[timed]) for seconds in parts.seconds.values())
    threads = torch.get_num_threads()
    print(f"{threads} threads; steps {timed.start + 1}-{timed.stop}: {1000 * total:.1f} ms a step (mean)")
    for part, seconds in parts.seconds.items():
        mean, median = statistics.mean(seconds[timed]), statistics.median(seconds[timed])
        print(f"{part}: {1000 * mean:.1f} ms ({mean / total:.0%}; median {1000 * median:.1f})")
    print(f"torch.profiler, steps {first_profiled + 1}-{args.max_steps}:")
    averages = parts.profiler.key_averages(group_by_input_shape=own.by_shape)
    print(averages.table(sort_by="self_cpu_time_total", row_limit=own.rows))


if __name__ == "__main__":
    main()
