"""The layout holds: the modeling file is the paper and the transformers contract, imports run one way (model <-
recipe <- tools), public functions carry type hints, and a wheel installs one import package."""

import ast
import inspect
import shutil
import subprocess
import sys
import zipfile

import vanilla_transformer.modeling_vanilla_transformer as modeling

from .helpers import ROOT


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." * node.level + (node.module or ""))
    return names


def test_the_model_takes_no_training_argument_transformers_seq2seq_models_lack():
    for model_class in (modeling.VanillaTransformerModel, modeling.VanillaTransformerForConditionalGeneration):
        parameters = set(inspect.signature(model_class.forward).parameters)
        assert not parameters & {"label_smoothing", "skip_logits", "decoder_read_positions", "num_items_in_batch"}
    source = inspect.getsource(modeling)
    assert "label_smoothing" not in source and "skip_logits" not in source


def test_the_model_imports_only_torch_transformers_and_its_siblings():
    for path in (ROOT / "vanilla_transformer").glob("*_vanilla_transformer.py"):
        for name in imported_modules(path):
            top = name.split(".")[0]
            allowed = {"", "torch", "transformers", "typing_extensions", "collections", "contextlib", "dataclasses"}
            allowed |= {"functools", "json", "math", "os", "shutil", "sacremoses"}  # sacremoses: tokenized text
            assert top in allowed, f"{path.name} imports {name}"


def test_the_code_a_model_folder_carries_asks_transformers_for_no_package_beyond_torch(smoke_run):
    """transformers refuses to load a folder's code (trust_remote_code) that imports, outside a try block, a package
    that is not installed: sacremoses, which only models of Moses-tokenized text need, must stay inside one."""
    from transformers.dynamic_module_utils import get_imports

    carried = list(smoke_run[0].glob("*.py"))
    assert len(carried) == 5, carried
    for path in carried:
        asked = set(get_imports(path)) - sys.stdlib_module_names
        assert asked <= {"torch", "transformers", "typing_extensions"}, f"{path.name} asks for {asked}"


def test_imports_run_one_way_and_the_tools_use_only_the_recipes_public_names():
    def reaches(path, package: str) -> bool:
        return any(package in (name.split(".")[0], *name.split(".")[1:2]) for name in imported_modules(path))

    for path in (ROOT / "vanilla_transformer").glob("*.py"):
        assert not reaches(path, "training") and not reaches(path, "tools"), path.name
    for path in (ROOT / "training").glob("*.py"):
        assert not reaches(path, "tools"), path.name
    for path in (ROOT / "tools").glob("*.py"):
        reached = {name for name in imported_modules(path) if "training" in name}
        assert reached <= {"vanilla_transformer.training"}, f"{path.name} imports {reached}"


def test_every_public_function_annotates_its_parameters_and_its_return():
    """The style guide's rule for readers and type checkers, over the package, its recipe, its tools and the
    benchmarks: nested functions too, `self` and `cls` aside, names with a leading underscore left out."""
    unannotated = []
    for folder in ("vanilla_transformer", "training", "tools", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                    continue
                parameters = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                bare = [p.arg for p in parameters if p.annotation is None and p.arg not in ("self", "cls")]
                if bare or node.returns is None:
                    unannotated.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {bare or 'return'}")
    assert not unannotated, "\n".join(unannotated)


def test_a_wheel_installs_one_import_package(tmp_path):
    source = tmp_path / "source"  # built from a copy: setuptools writes build/ and egg-info/ beside the sources
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("vanilla_transformer", "training", "tools"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), "."],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    # setuptools warns of a folder of data files that `packages` does not list, and says a later release drops it.
    assert "Package would be ignored" not in built.stderr, built.stderr
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = next(name for name in names if name.endswith(".dist-info/top_level.txt"))
        assert archive.read(top_level).decode().split() == ["vanilla_transformer"]
    packages = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert packages == {"vanilla_transformer"}
    assert "vanilla_transformer/training/train.py" in names and "vanilla_transformer/tools/translate.py" in names
    assert "vanilla_transformer/training/configs/multi30k_en_de.yaml" in names
