"""The README's two set-up commands make their virtualenvs with a Python that they can install into
(scripts/find_python.sh): one within its bounds is found, and one older or newer is refused in one line saying what to
do. Its test command's two workers share the cores."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

from vanilla_transformer.tools.translate import available_cores

from .conftest import share_the_cores_among_workers
from .helpers import ROOT


def find_python(*interpreters: str, **environment: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "find_python.sh"), *interpreters],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **environment},
    )


def interpreter_of_version(tmp_path, version: str) -> str:
    """A stand-in for an interpreter: it answers every command with `version`, as the script's question asks."""
    path = tmp_path / f"python{version}"
    path.write_text(f"#!/bin/sh\necho {version}\n")
    path.chmod(0o755)
    return str(path)


def test_the_bound_is_pyprojects_and_the_running_python_meets_it():
    bound = re.search(r'requires-python = ">=([0-9.]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))[1]
    assert sys.version_info >= tuple(map(int, bound.split(".")))
    found = find_python(sys.executable)
    assert found.returncode == 0 and found.stdout.strip() == sys.executable, found.stderr


# Older than requires-python, or newer than torch 2.13.0's builds (the set-up's pin: none for 3.15).
VERSIONS = [
    ("3.10.12", False),
    ("3.9.18", False),
    ("3.11.0", True),
    ("3.13.1", True),
    ("3.14.10", True),
    ("3.15.2", False),
    ("3.15.0rc1", False),
    ("4.0.0", False),
]


@pytest.mark.parametrize("version, accepted", VERSIONS)
def test_an_interpreter_is_taken_within_the_bounds_and_refused_naming_its_version(tmp_path, version, accepted):
    interpreter = interpreter_of_version(tmp_path, version)
    found = find_python(interpreter)
    if accepted:
        assert found.returncode == 0 and found.stdout.strip() == interpreter
    else:
        message = found.stderr.strip()
        assert found.returncode == 1 and found.stdout == "" and len(message.splitlines()) == 1
        assert "Python 3.11 to 3.14 is needed" in message and f"{interpreter} is {version}" in message
        assert "PYTHON=/path/to/python" in message


def test_a_python3_too_new_for_torchs_builds_is_passed_over_for_an_older_one(tmp_path):
    """Where python3 is 3.15 (no torch 2.13.0 for it), the newest python3.X within the bounds is taken instead."""
    bin = tmp_path / "bin"  # the PATH: these Pythons and the tools the script runs, not this machine's Pythons
    bin.mkdir()
    for tool in ("bash", "dirname", "sed", "seq", "sort", "head", "cut"):
        os.symlink(shutil.which(tool), bin / tool)
    for name, version in (("python3", "3.15.2"), ("python3.14", "3.14.10"), ("python3.12", "3.12.3")):
        os.symlink(interpreter_of_version(tmp_path, version), bin / name)
    found = find_python(PATH=str(bin))
    assert found.returncode == 0 and found.stdout.strip() == str(bin / "python3.14"), found.stderr
    os.remove(bin / "python3.14")
    os.remove(bin / "python3.12")
    alone = find_python(PATH=str(bin))
    assert alone.returncode == 1 and "python3 is 3.15.2" in alone.stderr, alone.stderr


def test_the_python_named_in_the_environment_is_the_only_one_taken(tmp_path):
    """A python3 on the PATH, new enough or not, is never taken in place of the one the user named."""
    named = interpreter_of_version(tmp_path, "3.12.3")
    assert find_python(PYTHON=named).stdout.strip() == named
    older = find_python(PYTHON=interpreter_of_version(tmp_path, "3.10.12"))
    assert older.returncode == 1 and older.stdout == "" and "3.10.12" in older.stderr
    missing = find_python(PYTHON=str(tmp_path / "python3.99"))
    assert missing.returncode == 1 and f"{tmp_path / 'python3.99'} is not a Python interpreter" in missing.stderr


def test_each_worker_of_the_test_command_multiplies_on_its_share_of_the_cores(monkeypatch):
    """`pytest -n 2`: each worker, and the processes it starts, on half the cores (tests/conftest.py)."""
    before = torch.get_num_threads()
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(name, "")  # monkeypatch puts back what was there
    try:
        share_the_cores_among_workers()
        share = max(1, available_cores() // 2)
        assert torch.get_num_threads() == share
        assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == str(share)
    finally:
        torch.set_num_threads(before)
