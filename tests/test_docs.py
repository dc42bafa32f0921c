"""Every Python example of the READMEs (English and Chinese) and of docs/ runs as written, on the smoke run's folder
instead of the Multi30K or Tatoeba one, each page in a fresh Python (one page's examples in order, as a reader would
paste them)."""

import re

import pytest

from .helpers import ROOT, run_python

PAGES = ["README.md", "README.zh-CN.md", "docs/training.md", "docs/serving.md"]


def python_examples(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_python_examples_run(page, smoke_run, tmp_path):
    folder, _ = smoke_run
    examples = python_examples(page)
    assert examples, f"{page} has no Python example"
    code = "\n".join(examples)
    for name, replacement in (
        ("runs/multi30k_en_de", folder),
        ("runs/tatoeba_en_zh", folder),
        ("runs/finetuned", "finetuned"),
    ):
        code = code.replace(name, str(replacement))
    run_python(code, tmp_path, without=())  # raises, with the page's traceback, where an example fails
