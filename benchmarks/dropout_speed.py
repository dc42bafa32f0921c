"""Time of a training step (forward, loss, backward) with torch's dropout and with `--random_bits_dropout`'s, in one
process on the same batches, alternated block by block so that the machine's drift falls on both alike.

    python benchmarks/dropout_speed.py --config training/configs/multi30k_en_de.yaml \\
        --data_dir ../shared/data/multi30k --output_dir /tmp/speed --max_tokens 1024 --warmup_steps 4000

The arguments are vt-train's (the vocabulary is trained once into --output_dir and reused); --blocks and
--steps_per_block set the measurement. Prints figures, not verdicts; run nothing else heavy beside it.
"""

import functools
import sys

import torch
from alternated_steps import alternated_step_seconds, print_step_seconds, trainer_and_blocks
from torch import nn

from vanilla_transformer.training.dropout import RandomBitsDropout, dropout_slots, swap_dropout


def main() -> None:
    trainer, own = trainer_and_blocks(sys.argv[1:])
    model = trainer.model
    kinds = {"torch's bernoulli_": nn.Dropout, "random bits": RandomBitsDropout}
    settings = {kind: functools.partial(swap_dropout, model, module_class) for kind, module_class in kinds.items()}
    seconds = alternated_step_seconds(trainer, settings, own.blocks, own.steps_per_block)
    threads = torch.get_num_threads()
    print(
        f"{len(dropout_slots(model))} dropout modules, {threads} threads, {own.blocks} blocks of "
        f"{own.steps_per_block} steps"
    )
    print_step_seconds(seconds, "random bits against bernoulli_")


if __name__ == "__main__":
    main()
