"""The demo page (tools/demo.py): its functions, then the page itself in a real browser.

The browser test starts `vt-demo FOLDER` (what `vt-demo FOLDER` runs) on 127.0.0.1 with the smoke model
and drives Debian's headless Chromium through chromedriver (`apt-get install chromium chromium-driver`; .ci/run
installs them). Its screenshot is kept in $VT_TEST_ARTIFACTS (default: test-artifacts/).
"""

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer.tools.demo import AVERAGE, build_demo, heatmap, n_best
from vanilla_transformer.visualization import attention_maps

from .helpers import ROOT, SUBPROCESS_DEADLINE_S, free_port, translate, wait_for

SOURCE = "a dog runs on the grass"


@pytest.fixture(scope="module")
def trained(smoke_run):
    folder, _ = smoke_run
    return folder, AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


def test_the_best_of_the_n_best_is_what_generate_gives(trained):
    folder, model, tokenizer = trained
    beams = model.generation_config.num_beams
    candidates = n_best(model, tokenizer, SOURCE, beams, model.generation_config.length_penalty)
    assert len(candidates) == beams and candidates[0][0] == translate(folder, [SOURCE])[0].strip()
    assert [score for _, score in candidates] == sorted((score for _, score in candidates), reverse=True)
    (greedy, score), *rest = n_best(model, tokenizer, SOURCE, 1, 1.0)
    assert not rest and score < 0 and greedy


def test_heatmaps_follow_the_chosen_layer_and_head(trained):
    _, model, tokenizer = trained
    maps = attention_maps(model, tokenizer, SOURCE)
    pictures = [heatmap(maps, "decoder", layer, head).tobytes() for layer, head in (("1", AVERAGE), ("2", "1"))]
    assert pictures[0] != pictures[1]
    assert heatmap(None, "cross", "1", AVERAGE) is None  # nothing translated yet
    with pytest.raises(ValueError, match="numbered 0 to 1"):
        heatmap(maps, "cross", "3", AVERAGE)
    build_demo(model, tokenizer)  # the page builds for this model


@pytest.fixture
def page_url(trained, tmp_path):
    """`vt-demo FOLDER` serving on 127.0.0.1 until the test ends."""
    folder = trained[0]
    port = free_port()
    log = (tmp_path / "demo.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "vanilla_transformer.tools.demo", str(folder), "--port", str(port), "--device", "cpu"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"},
    )
    url = f"http://127.0.0.1:{port}/"

    def serving() -> bool:
        assert server.poll() is None, (tmp_path / "demo.log").read_text()[-3000:]
        try:
            return urllib.request.urlopen(url, timeout=5).status == 200
        except OSError:
            return False

    try:
        wait_for(serving, "the demo to serve", timeout_s=SUBPROCESS_DEADLINE_S / 6)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


@pytest.mark.slow
def test_the_page_translates_and_redraws_attention_in_a_real_browser(trained, page_url, browser):
    from selenium.webdriver.common.by import By

    folder = trained[0]
    browser.get(page_url)

    def shown(locator: str, by: str = By.CSS_SELECTOR):
        """The first element the locator finds, waited for: Gradio draws its components one after another."""
        return wait_for(lambda: browser.find_elements(by, locator), locator)[0]

    shown("#source textarea").send_keys(SOURCE)
    shown("#translate").click()

    def translation() -> str:
        return shown("#translation textarea").get_attribute("value")

    assert wait_for(translation, "the translation") == translate(folder, [SOURCE])[0].strip()  # generate()'s own

    def heatmap_source() -> str | None:
        images = browser.find_elements(By.CSS_SELECTOR, "#heatmap img")
        return images[0].get_attribute("src") if images else None

    first = wait_for(heatmap_source, "the attention heatmap")
    shown("//*[@id='layer']//label[normalize-space(.)='2']", By.XPATH).click()
    wait_for(lambda: heatmap_source() not in (None, first), "the heatmap of layer 2")

    artifacts = Path(os.environ.get("VT_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "demo.png"))


def test_the_space_app_builds_the_page_for_its_model_folder(trained, monkeypatch):
    import runpy

    import gradio as gr

    monkeypatch.setenv("VT_DEMO_MODEL", str(trained[0]))
    app = runpy.run_path(str(ROOT / "examples/space/app.py"))  # not as __main__: builds the page, serves nothing
    assert isinstance(app["demo"], gr.Blocks) and app["model"].config.d_model == trained[1].config.d_model
