"""The README's two set-up commands make their virtualenvs with a Python that pyproject.toml accepts
(scripts/find_python.sh): one new enough is found, and an older one is refused in one line saying what to do. Its test
command's two workers share the cores."""

import os
import re
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


VERSIONS = [("3.10.12", False), ("3.9.18", False), ("3.11.0", True), ("3.13.1", True)]


@pytest.mark.parametrize("version, accepted", VERSIONS)
def test_an_interpreter_is_taken_where_it_is_new_enough_and_refused_naming_its_version(tmp_path, version, accepted):
    interpreter = interpreter_of_version(tmp_path, version)
    found = find_python(interpreter)
    if accepted:
        assert found.returncode == 0 and found.stdout.strip() == interpreter
    else:
        message = found.stderr.strip()
        assert found.returncode == 1 and found.stdout == "" and len(message.splitlines()) == 1
        assert "Python 3.11 or later is needed" in message and f"{interpreter} is {version}" in message
        assert "PYTHON=/path/to/python" in message


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
