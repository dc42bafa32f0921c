"""What every console script (vt-train, vt-translate, ...) does with an error: one `error: ...` line and exit status 1,
never a traceback, for the errors that are the user's or the machine's to fix.

Those are the project's own errors (every check raises a ValueError that names the file, the line or the value, or a
MissingExtra that names the optional dependency to install) and the operating system's: a full disk, a read-only or
immutable folder, a missing file. A full disk also reaches Python as torch's or safetensors' write errors, which do
not say so ("basic_ios::clear: iostream error"). Anything else is a bug and keeps its traceback.

Their output is their own, too: transformers' bars for the weights a command reads or writes are kept out of it.
"""

import errno
import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from safetensors import SafetensorError
from transformers.utils import logging as hf_logging

from vanilla_transformer.extras import MissingExtra

# What torch's and safetensors' writers say when a write fails part-way, as a full disk makes them.
WRITE_FAILURES = (
    "basic_ios::clear",
    "iostream error",
    "PytorchStreamWriter failed",
    "file write failed",
    "unexpected pos",
    "No space left on device",
    "os error 28",
)
FULL_DISK = "free some space and run the same command again"
NOT_WRITABLE = "the folder is read-only, immutable or not yours: choose another folder, or change its permissions"


def first_line(error: BaseException) -> str:
    """The first line of an error's message ("" for none): libraries' messages run to several lines, a hint or a
    traceback of their own below the reason."""
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def os_error_message(error: OSError) -> str:
    """An OSError as a sentence that names its file."""
    place = f"{error.filename}: " if error.filename else ""
    if error.errno == errno.ENOSPC:
        return f"{place}the disk is full: {FULL_DISK}."
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"{place}{error.strerror}: {NOT_WRITABLE}."
    if error.strerror:
        return f"{place}{error.strerror}."
    return str(error)


def one_line_errors(main: Callable[[list[str] | None], object]) -> Callable[[list[str] | None], None]:
    """`main` as a console script: the user's and the machine's errors end in `error: ...` (exit status 1), Ctrl-C in
    `interrupted` (exit status 130); what `main` returns is not the exit status."""

    @functools.wraps(main)
    def command(argv: list[str] | None = None) -> None:
        try:
            main(argv)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            raise SystemExit(130) from None
        except OSError as error:
            raise SystemExit(f"error: {os_error_message(error)}") from None
        except (ValueError, MissingExtra) as error:  # the project's checks, and the extra to install, each named
            raise SystemExit(f"error: {error}") from None
        except (RuntimeError, SafetensorError) as error:
            reason = first_line(error) or type(error).__name__
            if any(failure in str(error) for failure in WRITE_FAILURES):
                raise SystemExit(f"error: writing a file failed ({reason}), as on a full disk: {FULL_DISK}.") from None
            raise

    return command


@contextmanager
def transformers_bars_off() -> Iterator[None]:
    """transformers' own progress bars ("Loading weights", "Writing model shards") off for a moment: in a command's
    output they cut its own lines and the Trainer's bar; they come back as they were."""
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def loading_bars_for(model: str | Path) -> AbstractContextManager:
    """Around loading `model`: no bar for a local folder; a Hub id's download keeps its bar."""
    return transformers_bars_off() if Path(model).is_dir() else nullcontext()
