"""Writing a command's output folder where one may already be, without losing anything else.

vt-export (`vanilla_transformer.tools.export`), vt-average-checkpoints (`training.average_checkpoints`) and vt-site
(`vanilla_transformer.tools.site`) write a whole folder and replace an earlier one of theirs. What they must never
replace: the folder they read from, or a folder holding it (a training run with its checkpoints), and any folder that
is not an earlier output of theirs (`.`, a project folder, a run). The new folder is written under a temporary name
beside the target and put in place by renames, so a failure or a kill leaves the old folder as it was.
"""

import os
import shutil
from collections.abc import Callable, Collection, Sequence
from pathlib import Path


def replacement_problem(
    target: Path,
    read_from: Sequence[Path],
    kind: str,
    marks: Collection[str],
    foreign: Collection[str] = (),
    subfolders: Collection[str] = (),
) -> str | None:
    """Why putting a new `kind` folder at `target` would lose something; None where it would not.

    Lost would be: one of the `read_from` folders, when `target` is it or holds it, or what `target` holds when it
    exists and is not an earlier `kind` folder (a folder that holds all of `marks`, none of `foreign`, and no
    subfolder but those named in `subfolders`). An empty folder may be replaced.
    """
    resolved = target.resolve()
    for source in read_from:
        if resolved == source.resolve():
            return f"{target} is the folder this reads: choose another folder."
        if resolved in source.resolve().parents:
            return f"{target} holds {source}, which this reads: choose another folder."
    if not resolved.exists():
        return None
    entries = sorted(entry.name for entry in resolved.iterdir()) if resolved.is_dir() else [resolved.name]
    names = set(entries)
    unknown_subfolders = any((resolved / e).is_dir() and e not in subfolders for e in entries)
    earlier = set(marks) <= names and not names & set(foreign) and not unknown_subfolders
    if entries and not earlier:
        return (
            f"{target} exists and is not {kind} (it holds {first_names(entries)}): choose a new folder; only "
            f"{kind} made earlier is replaced."
        )
    return None


def first_names(entries: Sequence[str], most: int = 5) -> str:
    """A folder's entries for a message: the first `most`, then "..." for the others."""
    return ", ".join(entries[:most]) + (", ..." if len(entries) > most else "")


def partial_folder(target: Path) -> Path:
    """The temporary name beside `target` that its new content is written under. None is left from before: neither
    this process id's, nor those of killed processes (whose half-written folders would otherwise stay forever)."""
    target = target.resolve()  # "." has no name to put beside
    for left in target.parent.glob(f".{target.name}.partial-*"):
        pid = left.name.rpartition("-")[2]
        if pid.isdigit() and not process_running(int(pid)):
            shutil.rmtree(left, ignore_errors=True)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    return partial


def process_running(pid: int) -> bool:
    if os.name == "nt":  # Windows' os.kill ends the process: there, never take a folder for a dead process's
        return True
    try:
        os.kill(pid, 0)  # signal 0: nothing is sent, the process is only looked up
    except ProcessLookupError:
        return False
    except PermissionError:  # running, as another user
        return True
    return True


def replace_folder(new: Path, target: Path) -> None:
    """Put `new` at `target` by renames: at every moment `target` is the old folder or the complete new one."""
    target = target.resolve()
    if not target.exists():
        os.replace(new, target)
        return
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(target, old)
    os.replace(new, target)
    shutil.rmtree(old)


def write_folder(
    target: Path, write: Callable[[Path], None], put_in_place: Callable[[Path, Path], None] = replace_folder
) -> Path:
    """`write(folder)` fills a new folder beside `target`, which `put_in_place` then puts at `target` by renames
    (by default it replaces `target` whole): a failure or a kill leaves no half folder behind."""
    partial = partial_folder(target)
    check_writable(partial)
    try:
        write(partial)
        put_in_place(partial, target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def check_writable(partial: Path) -> None:
    """A folder can be made at `partial`; else the OSError names the folder it goes into (the user's), not the
    temporary name."""
    try:
        partial.mkdir()
        partial.rmdir()
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(partial.parent)) from None


def move_files_into(new: Path, target: Path, last: str) -> None:
    """Each file of `new` replaces its namesake in `target` by a rename, `last` at the end: a kill leaves every file
    of `target` whole, the old one or the new one."""
    for name in sorted((path.name for path in new.iterdir()), key=lambda name: name == last):
        os.replace(new / name, target / name)
