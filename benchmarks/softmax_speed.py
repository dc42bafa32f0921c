"""Time of a training step (forward, loss, backward) with the loss's softmax over every token of the vocabulary and
over the training targets' tokens only (`--target_vocabulary_softmax`), in one process on the same batches,
alternated block by block so that the machine's drift falls on both alike.

    python benchmarks/softmax_speed.py --config training/configs/multi30k_en_de.yaml \\
        --data_dir ../shared/data/multi30k --output_dir /tmp/speed --max_tokens 1024 --warmup_steps 4000

The arguments are vt-train's (the vocabulary is trained once into --output_dir and reused); --blocks and
--steps_per_block set the measurement. Prints figures, not verdicts; run nothing else heavy beside it.
"""

import sys

import torch
from alternated_steps import alternated_step_seconds, print_step_seconds, trainer_and_blocks

from vanilla_transformer.training.loss import TargetVocabulary
from vanilla_transformer.training.recipe import TranslationTrainer


def use(trainer: TranslationTrainer, vocabulary: TargetVocabulary | None) -> None:
    """The trainer's loss, fused or not, with the softmax over `vocabulary` (None: every token)."""
    trainer.target_vocabulary = trainer.compute_loss_func.target_vocabulary = vocabulary


def main() -> None:
    trainer, own = trainer_and_blocks([*sys.argv[1:], "--target_vocabulary_softmax", "true"])
    vocabulary = trainer.target_vocabulary
    settings = {"every token": lambda: use(trainer, None), "the targets' tokens": lambda: use(trainer, vocabulary)}
    seconds = alternated_step_seconds(trainer, settings, own.blocks, own.steps_per_block)
    print(
        f"{len(vocabulary.ids):,} of {vocabulary.vocab_size:,} tokens in the training targets, "
        f"{torch.get_num_threads()} threads, {own.blocks} blocks of {own.steps_per_block} steps"
    )
    print_step_seconds(seconds, "the targets' tokens against every token")


if __name__ == "__main__":
    main()
