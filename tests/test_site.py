"""The explorer (vt-site build): built from the smoke run, served on 127.0.0.1 by `python -m http.server`, and driven in
Debian's headless Chromium (as the demo's test does). The page must load nothing from beyond that address, translate
as generate() does with the folder's settings (greedy and beam search), redraw attention by layer and head, and answer
a forced prefix with another next-token list. The screenshot is kept in $VT_TEST_ARTIFACTS (default test-artifacts/).
"""

import gzip
import itertools
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from vanilla_transformer.pipeline_vanilla_transformer import text_preparation
from vanilla_transformer.tools.site import main as site_main
from vanilla_transformer.tools.site import model_settings

from .helpers import ROOT, free_port, shared_data, wait_for


@pytest.fixture(scope="module")
def site(smoke_run, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site") / "site"
    site_main(["build", str(folder), "--model", str(smoke_run[0])])
    return folder


@pytest.fixture(scope="module")
def site_url(site, tmp_path_factory):
    port = free_port()
    log = (tmp_path_factory.mktemp("server") / "server.log").open("w")
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"

    def serving() -> bool:
        try:
            return urllib.request.urlopen(url, timeout=5).status == 200
        except OSError:
            return False

    try:
        wait_for(serving, "the site to be served", timeout_s=60)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.close()


def generated_ids(folder: Path, sources: list[str], beams: int) -> list[list[int]]:
    """The token ids generate() gives each sentence on its own, with the folder's settings and `beams`."""
    model, tokenizer = AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)
    outputs = [model.generate(**tokenizer([source], return_tensors="pt"), num_beams=beams)[0] for source in sources]
    return [ids.tolist() for ids in outputs]


def generated(folder: Path, sources: list[str], beams: int) -> list[str]:
    """What generate() gives each sentence on its own, with the folder's settings and `beams`."""
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in generated_ids(folder, sources, beams)]


def ready(browser, url: str) -> None:
    from selenium.webdriver.common.by import By

    browser.get(url)
    status = browser.find_element(By.ID, "status")
    wait_for(lambda: status.get_attribute("data-state") != "loading", "the model to load", timeout_s=60)
    assert status.get_attribute("data-state") == "ready", status.text


def test_the_site_holds_the_page_its_libraries_and_the_exported_model(site):
    assert {"index.html", "explorer.js", "decoding.js", "site.json", "code.html"} <= {p.name for p in site.iterdir()}
    assert (site / "lib" / "ort-wasm-simd-threaded.wasm").is_file() and (site / "lib" / "tokenizers.min.mjs").is_file()
    model = site / "models" / "run"
    exported = {"encoder.onnx", "decoder.onnx", "weights.onnx_data", "tokenizer.json", "explorer.json"}
    assert exported <= {p.name for p in model.iterdir()}


@pytest.mark.slow
def test_the_page_translates_as_generate_does_in_a_real_browser(smoke_run, site_url, browser):
    """50 Multi30K sentences, greedy and beam 4, through the page's own search: the same text as generate()."""
    with gzip.open(shared_data() / "multi30k" / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as lines:
        sources = [line.strip() for line in itertools.islice(lines, 50)]
    ready(browser, site_url)
    browser.set_script_timeout(300)
    script = """
        const [sources, beams, done] = arguments;
        (async () => {
            const out = [];
            for (const s of sources) out.push(await window.explorer.translate(s, beams));
            return out;
        })().then(done, (error) => done(String(error)));
    """
    for beams in (1, 4):
        assert browser.execute_async_script(script, sources, beams) == generated(smoke_run[0], sources, beams), beams
    resources = browser.execute_script("return performance.getEntriesByType('resource').map((r) => r.name)")
    assert resources and all(name.startswith(site_url) for name in resources), resources  # nothing from beyond


def node(script: str):
    """What a module `script` run by Node.js prints, read as JSON."""
    result = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, check=True)
    return json.loads(result.stdout)


def test_the_page_scores_the_tokens_that_the_generation_config_suppresses_as_generate_does(smoke_run, tmp_path):
    """A model trained with --target_vocabulary_softmax suppresses the tokens outside its training targets and
    renormalises the rest: the page reads both from explorer.json and scores as transformers does, -inf after the
    log-softmax, then a log-softmax over the rest where renormalize_logits is set."""
    shutil.copytree(smoke_run[0], tmp_path / "model")
    generation = json.loads((tmp_path / "model" / "generation_config.json").read_text())
    logits = [3.0, 1.0, 2.0, 0.0]
    everything, kept = math.log(sum(map(math.exp, logits))), math.log(math.exp(1) + math.exp(0))
    for renormalize, expected in ((False, everything), (True, kept)):
        generation.update(suppress_tokens=[0, 2], renormalize_logits=renormalize)
        (tmp_path / "model" / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
        settings = model_settings(tmp_path / "model")
        assert settings["suppress_tokens"] == [0, 2] and settings["renormalize_logits"] == renormalize
        script = f"""
            import {{ Translator }} from {json.dumps((ROOT / "tools/explorer/decoding.js").as_uri())};
            const page = new Translator(null, null, null, null, {json.dumps(settings)});
            const logits = {{ dims: [1, 1, 4], data: Float32Array.from({logits}) }};
            console.log(JSON.stringify(Array.from(page.logProbabilities(logits, 0, 0))));  // -Infinity: null
        """
        scores = node(script)
        assert scores[0] is None and scores[2] is None
        assert scores[1] == pytest.approx(1 - expected) and scores[3] == pytest.approx(-expected)


@pytest.mark.parametrize(
    "setting, limit",
    [({}, 7 + 50), ({"max_new_tokens": 5}, 5), ({"max_length": 6}, 5), ({"max_length": 20}, 7 + 50)],
)
def test_the_pages_output_limit_is_the_one_generate_takes_from_the_generation_config(
    smoke_run, tmp_path, setting, limit
):
    """The paper's rule (source length + 50) unless the config sets a length; transformers' default max_length of
    20, which Seq2SeqTrainer writes into a fine-tune's config, is not one."""
    shutil.copytree(smoke_run[0], tmp_path / "model")
    path = tmp_path / "model" / "generation_config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **setting}), encoding="utf-8")
    settings = model_settings(tmp_path / "model")
    script = f"""
        import {{ Translator }} from {json.dumps((ROOT / "tools/explorer/decoding.js").as_uri())};
        console.log(new Translator(null, null, null, null, {json.dumps(settings)}).maxNewTokens(7));
    """
    assert node(script) == limit


def click_and_wait(browser, button: str, counter: str) -> None:
    """Click a button and wait until the page counts one more answer in the body's `counter` attribute."""
    from selenium.webdriver.common.by import By

    body = browser.find_element(By.TAG_NAME, "body")
    before = body.get_attribute(counter) or "0"
    browser.find_element(By.ID, button).click()
    wait_for(lambda: (body.get_attribute(counter) or "0") != before, f"the page's answer to {button}")


@pytest.mark.slow
def test_the_page_writes_out_tokens_as_the_tokenizer_decodes_them(smoke_run, site_url, browser):
    """A space before a full stop stays, as transformers' decode() keeps it (the text of a model trained on tokenized
    text, or a reference that had one); tokenizers.js, left to its default, would take it out."""
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    ids = tokenizer("Der Mann läuft auf dem Gras .")["input_ids"]
    ready(browser, site_url)
    written = browser.execute_script("return window.explorer.state.translator.text(arguments[0])", ids)
    assert written == tokenizer.decode(ids, skip_special_tokens=True).strip() == "Der Mann läuft auf dem Gras ."


@pytest.mark.slow
def test_the_page_shows_steps_attention_and_forced_prefixes(smoke_run, site_url, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ready(browser, site_url)
    sentence = "A dog runs on the grass."
    source = browser.find_element(By.ID, "source")
    source.clear()
    source.send_keys(sentence)
    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    for choice, beams in (("1", 1), ("folder", 4)):
        Select(browser.find_element(By.ID, "search")).select_by_value(choice)
        click_and_wait(browser, "translate", "data-translated")
        ids = generated_ids(smoke_run[0], [sentence], beams)[0]
        expected = tokenizer.decode(ids, skip_special_tokens=True).strip()
        assert browser.find_element(By.ID, "translation").text == expected
    assert browser.find_elements(By.CSS_SELECTOR, "#beam-tree ol li.finished")  # the finished hypotheses, scored
    # The tree: every candidate joined to the beam it extends, and the translation's path marked from <s> to its end.
    edges = browser.find_elements(By.CSS_SELECTOR, "#beam-tree svg line")
    assert {"kept", "pruned", "finished"} <= {edge.get_attribute("class").split()[0] for edge in edges}
    best_path = browser.find_elements(By.CSS_SELECTOR, "#beam-tree svg line.best")
    assert len(best_path) == len(ids) - 1  # the beam-4 output's tokens after <s>
    heatmap = browser.find_element(By.ID, "heatmap")
    pictures = []
    for layer, head in (("0", "average"), ("1", "average"), ("1", "2")):
        Select(browser.find_element(By.ID, "layer")).select_by_value(layer)
        Select(browser.find_element(By.ID, "head")).select_by_value(head)
        assert heatmap.get_attribute("data-drawn") == f"encoder/{layer}/{head}"
        pictures.append(browser.execute_script("return arguments[0].toDataURL()", heatmap))
    assert len(set(pictures)) == 3  # the view follows layer and head

    def next_tokens(prefix: str) -> str:
        field = browser.find_element(By.ID, "prefix")
        field.clear()
        field.send_keys(prefix)
        click_and_wait(browser, "force", "data-forced")
        return browser.find_element(By.ID, "next-tokens").text

    assert next_tokens("") != next_tokens("Ein Hund")
    Select(browser.find_element(By.ID, "ui-language")).select_by_value("zh")
    assert browser.find_element(By.CSS_SELECTOR, "h1").text == "Transformer，现场运行"
    artifacts = Path(os.environ.get("VT_TEST_ARTIFACTS", ROOT / "test-artifacts"))
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "explorer.png"))


def test_a_site_is_not_written_over_a_folder_of_other_files(smoke_run, tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "README.md").write_text("# mine\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="is not an explorer site"):
        site_main(["build", str(tmp_path / "project"), "--model", str(smoke_run[0]), "--force"])
    assert (tmp_path / "project" / "README.md").read_text(encoding="utf-8") == "# mine\n"


def test_a_site_built_again_with_force_replaces_the_earlier_one(smoke_run, site, tmp_path, capsys):
    """What scripts/train_and_translate.sh does when it is run again: the same site folder, --force."""
    earlier = tmp_path / "my site"
    shutil.copytree(site, earlier)
    (earlier / "stale.txt").write_text("from the earlier build\n", encoding="utf-8")
    site_main(["build", str(earlier), "--model", str(smoke_run[0]), "--force"])
    assert not (earlier / "stale.txt").exists()
    serve = capsys.readouterr().out.split(": ", 1)[1].split(", then open")[0]  # the command it prints, to paste
    assert shlex.split(serve) == ["python", "-m", "http.server", "-d", str(earlier), "8000"]
    assert {p.name for p in site.iterdir()} == {p.name for p in earlier.iterdir()}
    (earlier / "mine").mkdir()  # a subfolder the explorer never writes: not a site to replace
    with pytest.raises(SystemExit, match="is not an explorer site"):
        site_main(["build", str(earlier), "--model", str(smoke_run[0]), "--force"])
    assert (earlier / "mine").is_dir()


@pytest.mark.parametrize("code", ["zh", "zh-CN", "cmn"])
def test_a_chinese_source_gets_the_chinese_example_whatever_its_code(smoke_run, tmp_path, code):
    shutil.copytree(smoke_run[0], tmp_path / "model")
    config = tmp_path / "model" / "tokenizer_config.json"
    config.write_text(json.dumps(json.loads(config.read_text()) | {"source_lang": code}), encoding="utf-8")
    assert model_settings(tmp_path / "model")["example"] == "我有一只猫。"


@pytest.mark.parametrize("code", ["fr", "fr-FR", "fra"])
def test_the_page_tokenizes_by_the_rules_of_the_language_whatever_its_code(smoke_run, tmp_path, code):
    shutil.copytree(smoke_run[0], tmp_path / "model")
    config = tmp_path / "model" / "tokenizer_config.json"
    recorded = {"text_preprocessing": "lowercase_tokenized", "source_lang": code}
    config.write_text(json.dumps(json.loads(config.read_text()) | recorded), encoding="utf-8")
    moses = model_settings(tmp_path / "model")["moses"]["source"]
    assert moses["lang"] == "fr" and "C.Q.F.D" in moses["nonbreaking_prefixes"]  # French's, not English's (the default)


# Each holds what the explorer's English-only rules prepared otherwise than sacremoses: an elided article (French,
# 40% of Multi30K's French sentences), a possessive and German quotation marks, an escaped "&amp;", an abbreviation.
SENTENCES = {
    "en": ["A man's dog isn't here, they're sure.", "Stone &amp; tile at Prince St. Cafe... No. 5!", '"Hi," she said.'],
    "de": ["Ein Junge spielt bei McDonald's GameCube.", "Auf dem Schild steht „Welcome Bikers“.", "Am 3. Mai, z.B."],
    "fr-FR": ["L'homme qu'il a vu.", "Un garçon d'environ 5 ans joue aujourd'hui.", "« Bonjour ! » dit-il..."],
    "zh": ["我有一只猫。", "他说：“你好！”", "Tom's 3,000 元。"],
}


@pytest.mark.parametrize("side", ["source", "target"])
@pytest.mark.parametrize("code", SENTENCES)
def test_the_page_prepares_a_sentence_for_a_tokenized_model_as_the_pipeline_does(smoke_run, tmp_path, code, side):
    """A model trained on lowercased, Moses-tokenized text reads a sentence so prepared; the page must prepare a source
    (and a forced target prefix) as the pipeline does, with sacremoses' rules for that side's language, or it
    translates another input."""
    shutil.copytree(smoke_run[0], tmp_path / "model")
    config = tmp_path / "model" / "tokenizer_config.json"
    other = {"source": "target", "target": "source"}[side]
    other_lang = "it" if code == "en" else "en"  # rules that differ, so that a page that mixes up the sides fails
    recorded = {"text_preprocessing": "lowercase_tokenized", f"{side}_lang": code, f"{other}_lang": other_lang}
    config.write_text(json.dumps(json.loads(config.read_text()) | recorded), encoding="utf-8")
    (tmp_path / "explorer.json").write_text(json.dumps(model_settings(tmp_path / "model")), encoding="utf-8")
    page = node(f"""
        import {{ readFileSync }} from "node:fs";
        import {{ Translator }} from {json.dumps((ROOT / "tools/explorer/decoding.js").as_uri())};
        const settings = JSON.parse(readFileSync({json.dumps(str(tmp_path / "explorer.json"))}, "utf-8"));
        const page = new Translator(null, null, null, null, settings);
        console.log(JSON.stringify({json.dumps(SENTENCES[code])}.map((sentence) => page.prepare(sentence, "{side}"))));
    """)
    prepare = text_preparation(AutoTokenizer.from_pretrained(tmp_path / "model"), side)
    assert page == [prepare(sentence) for sentence in SENTENCES[code]]
