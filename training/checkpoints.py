"""The Trainer's `checkpoint-STEP` folders: which exist, and which are complete enough to resume from.

`Trainer._save_checkpoint` writes the weights, then the optimizer, scheduler and RNG states, and `trainer_state.json`
last. A process killed in between (kill -9, a full disk, a lost machine) leaves a folder with weights and no state:
resuming from it crashes on every restart. transformers' `get_last_checkpoint` picks it all the same, being the
newest; `newest_complete_checkpoint` passes over it, says so, and takes the one before.
"""

import logging
import re
from pathlib import Path

from transformers import TrainerState

logger = logging.getLogger(__name__)

TRAINER_STATE = "trainer_state.json"
WEIGHTS = "model.safetensors"
EXPONENTIAL_AVERAGE = "exponential_average.safetensors"  # with --ema_decay (training.exponential_average)


def numbered_checkpoints(run_dir: Path) -> list[Path]:
    """The `checkpoint-STEP` folders of a Trainer run, oldest first."""
    checkpoints = [p for p in Path(run_dir).glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)]
    return sorted(checkpoints, key=lambda p: int(p.name.split("-")[1]))


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
