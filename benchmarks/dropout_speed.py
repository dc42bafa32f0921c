"""Time of a training step (forward, loss, backward) with torch's dropout and with `--random_bits_dropout`'s, in one
process on the same batches, alternated block by block so that the machine's drift falls on both alike.

    python benchmarks/dropout_speed.py --config training/configs/multi30k_en_de.yaml \\
        --data_dir ../shared/data/multi30k --output_dir /tmp/speed --max_tokens 1024 --warmup_steps 4000

The arguments are vt-train's (the vocabulary is trained once into --output_dir and reused); --blocks and
--steps_per_block set the measurement. Prints figures, not verdicts; run nothing else heavy beside it.
"""

import argparse
import itertools
import statistics
import sys
import time

import torch
from torch import nn
from training_speed import trainer_without_evaluation

from vanilla_transformer.training.dropout import RandomBitsDropout, dropout_slots, swap_dropout


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--steps_per_block", type=int, default=20)
    own, rest = parser.parse_known_args(sys.argv[1:])
    _, trainer = trainer_without_evaluation(rest)
    model = trainer.model.train()
    batches = list(itertools.islice(trainer.get_train_dataloader(), own.steps_per_block))
    modules = len(dropout_slots(model))
    kinds = {"torch's bernoulli_": nn.Dropout, "random bits": RandomBitsDropout}
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for block in range(own.blocks + 1):  # block 0 warms both up and is not counted
        for kind, module_class in kinds.items():
            swap_dropout(model, module_class)
            start = time.perf_counter()
            for batch in batches:
                trainer.training_step(model, batch)
                model.zero_grad(set_to_none=True)
            if block:
                seconds[kind].append((time.perf_counter() - start) / len(batches))
    threads = torch.get_num_threads()
    print(f"{modules} dropout modules, {threads} threads, {own.blocks} blocks of {len(batches)} steps")
    for kind, times in seconds.items():
        median, low, high = (1000 * value for value in (statistics.median(times), min(times), max(times)))
        print(f"{kind}: {median:.1f} ms a step (median; blocks {low:.1f}-{high:.1f})")
    ratios = [old / new for old, new in zip(*seconds.values(), strict=True)]
    print(f"random bits against bernoulli_: {statistics.median(ratios):.3f} times as fast (the blocks' median)")


if __name__ == "__main__":
    main()
