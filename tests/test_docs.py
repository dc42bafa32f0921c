"""Every Python example of the READMEs (English and Chinese) and of docs/ runs as written, on the smoke run's folder
instead of the Multi30K or Tatoeba one, each page in a fresh Python (one page's examples in order, as a reader would
paste them); the commands' help texts read as their source writes them."""

import ast
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


def test_module_docstrings_which_the_commands_print_as_help_hold_no_escape_sequence():
    """A module's docstring is its command's --help text: in a plain string a "\\n" becomes a line break and a
    backslash that continues a shell line joins the two lines, so a docstring with a backslash is raw or doubles it."""
    unescaped = []
    for path in sorted(ROOT.glob("[!.]*/**/*.py")):
        if path.relative_to(ROOT).parts[0] in {"build", "runs"}:
            continue
        source = path.read_text(encoding="utf-8")
        body = ast.parse(source).body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            literal = ast.get_source_segment(source, body[0].value)
            if not literal.lower().startswith("r") and "\\" in literal.replace("\\\\", ""):
                unescaped.append(str(path.relative_to(ROOT)))
    assert not unescaped, f"docstrings with a backslash that Python reads as an escape: {unescaped}"
