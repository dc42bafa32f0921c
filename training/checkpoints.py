"""Which of the Trainer's `checkpoint-STEP` folders (`numbered_checkpoints` lists them) are complete enough to resume
from.

`Trainer._save_checkpoint` writes the weights, then the optimizer, scheduler and RNG states, and `trainer_state.json`
last. A process killed in between (kill -9, a full disk, a lost machine) leaves a folder with weights and no state:
resuming from it crashes on every restart. transformers' `get_last_checkpoint` picks it all the same, being the
newest; `newest_complete_checkpoint` passes over it, says so, and takes the one before.
"""

import logging
from pathlib import Path

from transformers import TrainerState
from transformers.utils import SAFE_WEIGHTS_NAME

from vanilla_transformer.folder_checks import numbered_checkpoints

logger = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"
WEIGHTS = SAFE_WEIGHTS_NAME
EXPONENTIAL_AVERAGE = "exponential_average.safetensors"  # with --ema_decay (training.exponential_average)


def why_incomplete(checkpoint: Path) -> str | None:
    """What a checkpoint lacks for a resume (None: nothing)."""
    if not (checkpoint / WEIGHTS).is_file():
        return f"no {WEIGHTS}"
    try:
        TrainerState.load_from_json(str(checkpoint / TRAINER_STATE))
    except FileNotFoundError:
        return f"no {TRAINER_STATE}"
    except (OSError, ValueError, TypeError) as error:
        return f"{TRAINER_STATE} cannot be read: {error}"
    return None


def newest_complete_checkpoint(run_dir: Path) -> Path | None:
    for checkpoint in reversed(numbered_checkpoints(run_dir)):
        problem = why_incomplete(checkpoint)
        if problem is None:
            return checkpoint
        logger.warning(
            "%s is incomplete (%s): the run was stopped while writing it. Passed over; the resumed run writes it "
            "again.",
            checkpoint,
            problem,
        )
    return None
