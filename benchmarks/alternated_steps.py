"""Training steps (forward, loss, backward) under two settings of one lever, in one process on the same batches,
alternated block by block so that the machine's drift falls on both alike: what dropout_speed.py and
softmax_speed.py measure with."""

import argparse
import itertools
import statistics
import time
from collections.abc import Callable

from training_speed import trainer_without_evaluation

from vanilla_transformer.training.recipe import TranslationTrainer


def trainer_and_blocks(argv: list[str]) -> tuple[TranslationTrainer, argparse.Namespace]:
    """vt-train's Trainer for `argv` without evaluation, and this measurement's --blocks and --steps_per_block."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--steps_per_block", type=int, default=20)
    own, rest = parser.parse_known_args(argv)
    _, trainer = trainer_without_evaluation(rest)
    return trainer, own


def alternated_step_seconds(
    trainer: TranslationTrainer, settings: dict[str, Callable[[], object]], blocks: int, steps_per_block: int
) -> dict[str, list[float]]:
    """Seconds a step under each setting (name → what switches the trainer to it), one figure per block; a first
    block warms every setting up and is not counted."""
    model = trainer.model.train()
    batches = list(itertools.islice(trainer.get_train_dataloader(), steps_per_block))
    seconds: dict[str, list[float]] = {name: [] for name in settings}
    for block in range(blocks + 1):
        for name, switch in settings.items():
            switch()
            start = time.perf_counter()
            for batch in batches:
                trainer.training_step(model, batch)
                model.zero_grad(set_to_none=True)
            if block:
                seconds[name].append((time.perf_counter() - start) / len(batches))
    return seconds


def print_step_seconds(seconds: dict[str, list[float]], new_against_old: str) -> None:
    """Each setting's median milliseconds a step and its blocks' range, then the median of the blocks' ratios of
    the first setting's time to the second's, as `new_against_old`."""
    for name, times in seconds.items():
        median, low, high = (1000 * value for value in (statistics.median(times), min(times), max(times)))
        print(f"{name}: {median:.1f} ms a step (median; blocks {low:.1f}-{high:.1f})")
    ratios = [old / new for old, new in zip(*seconds.values(), strict=True)]
    print(f"{new_against_old}: {statistics.median(ratios):.3f} times as fast (the blocks' median)")
