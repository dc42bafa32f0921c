"""Fixtures; the helpers they use, and that test files import, are in helpers.py."""

from pathlib import Path

import pytest

from vanilla_transformer import VanillaTransformerForConditionalGeneration

from .helpers import SMOKE, tiny_model


@pytest.fixture
def model() -> VanillaTransformerForConditionalGeneration:
    return tiny_model()


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> tuple[Path, dict]:
    """The smoke config trained once (~5 s) on examples/tiny: (output folder, report)."""
    from vanilla_transformer.training.train import main as train_main

    output = tmp_path_factory.mktemp("smoke") / "run"
    report = train_main([*SMOKE, "--output_dir", str(output)])
    return output, report
