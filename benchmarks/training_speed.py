"""Training speed of a `vt-train` command on this machine, for measuring one lever at a time (bf16, torch.compile,
the batch size, R-Drop): steps/s and padded tokens/s over the second half of `--max_steps` steps (the first half
meets the batch shapes: torch.compile compiles, the allocator makes its first requests), with no evaluation and no
checkpoint.

    python benchmarks/training_speed.py --config training/configs/multi30k_en_de.yaml \\
        --data_dir ../shared/data/multi30k --output_dir /tmp/speed --max_steps 400 --bf16 false
    ... --bf16 true | --torch_compile true | --max_tokens 4096 | --r_drop_alpha 5 | --fused_output_loss false | --muon
    ... --random_bits_dropout false | --target_vocabulary_softmax | --mkl_intel_kernels false | --layer_drop 0.1
    torchrun --nproc_per_node 2 benchmarks/training_speed.py ... --max_tokens 1024   # two processes, one thread each

The arguments are vt-train's; the vocabulary is trained once into --output_dir and reused. Prints figures, not
verdicts; run nothing else heavy beside it.
"""

import logging
import sys
import time

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments, set_seed

from vanilla_transformer.training.arguments import TranslationTrainingArguments, parse_arguments
from vanilla_transformer.training.recipe import TranslationTrainer
from vanilla_transformer.training.train import configure_process, prepare_run


class StepClock(TrainerCallback):
    """The wall-clock time at the end of each step."""

    def __init__(self):
        self.times: dict[int, float] = {}

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        self.times[state.global_step] = time.perf_counter()


def trainer_without_evaluation(argv: list[str]) -> tuple[TranslationTrainingArguments, TranslationTrainer]:
    """vt-train's arguments and Trainer for `argv` (vt-train's command line), with no evaluation, no checkpoint, no
    report and no progress bar."""
    no_evaluation = ["--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
    arguments = parse_arguments([*argv, *no_evaluation])
    args = arguments[-1]
    logging.basicConfig(level=logging.WARNING)
    configure_process(args)
    set_seed(args.seed)
    _, _, trainer = prepare_run(arguments, checkpoint=None)
    return args, trainer


def main() -> None:
    args, trainer = trainer_without_evaluation(sys.argv[1:])
    clock = StepClock()
    trainer.add_callback(clock)
    result = trainer.train()
    last, half = trainer.state.global_step, trainer.state.global_step // 2
    steps_per_s = (last - half) / (clock.times[last] - clock.times[half])
    if not trainer.is_world_process_zero():
        return
    print(
        f"processes {args.world_size}, bf16 {args.bf16}, torch_compile {args.torch_compile}, "
        f"max_tokens {args.max_tokens} a process, "
        f"r_drop_alpha {args.r_drop_alpha}, fused output loss {trainer.fuse_output_loss}, muon {args.muon}, "
        f"random-bits dropout {trainer.random_bits_dropout}, MKL's Intel kernels {args.mkl_intel_kernels}, "
        f"target-vocabulary softmax {args.target_vocabulary_softmax}: "
        f"{steps_per_s:.2f} steps/s, {steps_per_s * args.max_tokens * args.world_size:,.0f} padded tokens/s a side "
        f"(steps {half}-{last}; training loss {result.training_loss:.3f})"
    )


if __name__ == "__main__":
    main()
