"""The explorer in a browser: how fast the page of `vt-site build` is ready, translates its first sentence and then
each sentence, greedy and beam 4, in onnxruntime-web's WASM (one thread, as on any static server), and its model's
bytes, in float32 and int8; with sacreBLEU of the page's own translations.

    data=../shared/data/multi30k
    python benchmarks/explorer.py --model runs/multi30k_en_de \\
        --source $data/test_2016_flickr.en.gz --reference $data/test_2016_flickr.de.gz --sentences 100

Driven through Debian's headless Chromium and chromedriver (as the tests drive it), the site served on 127.0.0.1 by
`python -m http.server`. Prints figures, not verdicts.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path

import sacrebleu
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from vanilla_transformer.export_onnx import export_bytes
from vanilla_transformer.tools.site import build
from vanilla_transformer.training.text_files import read_lines

TRANSLATE_ALL = """
    const [sources, beams, done] = arguments;
    (async () => {
        const out = [];
        const started = performance.now();
        for (const s of sources) out.push(await window.explorer.translate(s, beams));
        return { out, ms: performance.now() - started };
    })().then(done, (error) => done({ error: String(error) }));
"""


def chromium() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def measure(site: Path, sources: list[str], references: list[str], port: int) -> dict[str, float]:
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)
    browser = chromium()
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        status = browser.find_element(By.ID, "status")
        while status.get_attribute("data-state") == "loading":
            time.sleep(0.02)
        ready_ms = float(browser.find_element(By.TAG_NAME, "body").get_attribute("data-ready-ms"))
        browser.set_script_timeout(3600)
        first = browser.execute_async_script(TRANSLATE_ALL, sources[:1], 1)
        figures = {"page ready (ms)": ready_ms, "first translation (ms)": first["ms"]}
        for beams in (1, 4):
            result = browser.execute_async_script(TRANSLATE_ALL, sources, beams)
            figures[f"ms/sentence, {'greedy' if beams == 1 else 'beam 4'}"] = result["ms"] / len(sources)
            figures[f"sacreBLEU, {'greedy' if beams == 1 else 'beam 4'}"] = sacrebleu.corpus_bleu(
                result["out"], [references]
            ).score
        return figures
    finally:
        browser.quit()
        server.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--port", type=int, default=8731)
    args = parser.parse_args()
    sources, references = [list(islice(read_lines(path), args.sentences)) for path in (args.source, args.reference)]
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        for quantization in (None, "int8"):
            name = quantization or "float32"
            site = build([args.model], str(Path(scratch) / name), quantization)
            model = site / "models" / Path(args.model).name
            rows[name] = {"model bytes (MB)": export_bytes(model) / 1e6}
            rows[name].update(measure(site, sources, references, args.port))
    metrics = list(rows["float32"])
    print(f"{len(sources)} sentences of {args.source}\n")
    print("| | " + " | ".join(rows) + " |\n|---|" + "---|" * len(rows))
    for metric in metrics:
        print(f"| {metric} | " + " | ".join(f"{rows[name][metric]:,.2f}" for name in rows) + " |")


if __name__ == "__main__":
    main()
