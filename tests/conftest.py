"""Fixtures; the helpers they use, and that test files import, are in helpers.py."""

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
import torch

from vanilla_transformer import VanillaTransformerForConditionalGeneration

from .helpers import SMOKE, tiny_model

# As vt-train and vt-translate do at their start: before this process's first matrix product, where MKL makes its
# choice, so that every test here runs one set of MKL kernels, whichever test trains in this process first. The
# transformers-4.57 run of .ci/run has the model package alone, from the source tree: no training there.
if importlib.util.find_spec("vanilla_transformer.training") is not None:
    from vanilla_transformer.training.mkl_kernels import use_mkl_intel_kernels

    use_mkl_intel_kernels()


def share_the_cores_among_workers() -> None:
    """Under pytest-xdist (`-n 2`), each worker and the processes it starts multiply on its share of the cores:
    two processes each spreading over every core slow each other down many times over."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2:
        return
    from vanilla_transformer.tools.translate import available_cores

    threads = max(1, available_cores() // workers)
    os.environ.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    torch.set_num_threads(threads)


share_the_cores_among_workers()


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


def with_cjk_font(folder: Path) -> dict[str, str]:
    """The environment, with fontconfig told of the Noto Sans CJK SC that mplfonts (the viz extra) installs: the
    Chinese texts of the pages under test then show in their screenshots on machines without a CJK font."""
    spec = importlib.util.find_spec("mplfonts")
    font = Path(spec.origin).parent / "fonts" / "NotoSansCJKsc-Regular.otf" if spec and spec.origin else None
    if font is None or not font.is_file():
        return dict(os.environ)
    (folder / "fonts").mkdir(exist_ok=True)
    (folder / "fonts" / font.name).symlink_to(font)
    config = folder / "fonts.conf"
    config.write_text(
        '<?xml version="1.0"?><fontconfig><include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<dir>{folder / 'fonts'}</dir><cachedir>{folder / 'font-cache'}</cachedir></fontconfig>\n",
        encoding="utf-8",
    )
    return {**os.environ, "FONTCONFIG_FILE": str(config)}


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.fail("The browser test needs chromium and chromedriver: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # Headless, and none of Chromium's background connections: this machine's network is closed.
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,2200",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(chromedriver, env=with_cjk_font(tmp_path)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
