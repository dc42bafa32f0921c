"""Data diversification (Nguyen et al., NeurIPS 2020) in one command: a forward and a backward model, each translating
one side of the training pairs, and the forward model trained on for a while on the pairs plus both translations.

vt-diversify --config training/configs/multi30k_en_de_diversified.yaml --data_dir ../shared/data/multi30k

Each stage is a command of this package run in its own process (vt-train, vt-export, vt-translate), its output in a
folder under --output_dir: forward/, backward/, the translations, diversified/ (the 3x pairs), model/ (the final
model, Hub-ready). A finished stage is not run again and a stopped training resumes from its checkpoints, so the same
command run again goes on where a kill or an error stopped it.
"""

import argparse
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from vanilla_transformer.input_checks import is_finite_number
from vanilla_transformer.training import (
    AveragingError,
    DataArguments,
    check_data_dir,
    config_file,
    data_arguments,
    language_file,
    last_checkpoints,
    one_line_errors,
    read_config,
    read_lines,
    run_report,
    unknown_names,
    write_folder,
)

MODULES = {  # the console scripts the stages run, by the names a user types
    "vt-train": "vanilla_transformer.training.train",
    "vt-export": "vanilla_transformer.tools.export",
    "vt-translate": "vanilla_transformer.tools.translate",
}
STAGES = ("forward", "backward", "fine_tune")  # the config's sections of vt-train settings
ENGINES = ("auto", "ctranslate2", "generate")  # what translates the training sentences (auto: the fastest installed)
PIPELINE_SETTINGS = {"data_dir", "output_dir", "seed", "engine", "deadline_minutes", *STAGES}


class PipelineError(ValueError):
    """The pipeline's config is malformed, a stage failed, or its folder holds a run of other settings."""


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vt-diversify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", required=True, help="The pipeline's YAML file (its sections: forward, ...).")
    parser.add_argument("--data_dir", help="The parallel corpus' folder (default: the config's).")
    parser.add_argument("--output_dir", help="Where the stages' folders go (default: the config's).")
    parser.add_argument("--seed", type=int, help="Every stage's seed (default: the config's).")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        help="What translates the training pairs (default: the config's, else auto: CTranslate2 where installed, the "
        "faster engine, else generate()).",
    )
    parser.add_argument(
        "--deadline_minutes",
        type=float,
        help="Minutes after the command starts by which the fine-tune's training stops, its cap shortened where the "
        "first stages ran long (default: the config's, else none).",
    )
    return parser.parse_args(argv)


def read_pipeline(args: argparse.Namespace) -> dict:
    """The config's settings, the command line's winning; a missing or unknown setting is named."""
    settings = read_config(args.config)
    unknown = set(settings) - PIPELINE_SETTINGS
    if unknown:
        raise PipelineError(
            f"{args.config}: unknown setting(s) {unknown_names(unknown, PIPELINE_SETTINGS)}; it holds "
            f"{', '.join(sorted(PIPELINE_SETTINGS))} (the stages' vt-train settings go inside forward, backward and "
            "fine_tune)."
        )
    settings |= {name: value for name, value in vars(args).items() if name != "config" and value is not None}
    for name in ("data_dir", "output_dir", "forward", "backward"):
        if name not in settings:
            raise PipelineError(f"{args.config}: no {name!r} setting.")
    for stage in STAGES:
        if not isinstance(settings.setdefault(stage, {}), dict):
            raise PipelineError(f"{args.config}: {stage!r} must be a mapping of vt-train settings.")
    for stage in ("forward", "backward"):
        if "config" not in settings[stage]:
            raise PipelineError(f"{args.config}: {stage!r} needs a 'config' (the vt-train YAML file it starts from).")
    deadline = settings.get("deadline_minutes")
    if deadline is not None and not (is_finite_number(deadline) and deadline > 0):
        raise PipelineError(f"{args.config}: deadline_minutes {deadline!r}: give a positive number of minutes.")
    if settings.get("engine", "auto") not in ENGINES:
        raise PipelineError(f"{args.config}: engine {settings['engine']!r}: use one of {', '.join(ENGINES)}.")
    return settings


def stage_settings(pipeline: dict, stage: str, config: str, **fixed: object) -> dict:
    """A stage's vt-train settings: its base config file's (a path relative to the pipeline's `config` file), its own
    section's over them, the pipeline's data, seed and folder over both."""
    section = dict(pipeline[stage])
    base = config_file(config).parent / section.pop("config", pipeline["forward"]["config"])  # fine-tune: forward's
    settings = read_config(str(base)) | section | {"data_dir": pipeline["data_dir"]}
    if "seed" in pipeline:
        settings["seed"] = pipeline["seed"]
    return settings | fixed


def write_settings(path: Path, settings: dict) -> None:
    """The stage's settings as the YAML file it runs with; a different one already there (a run of other settings
    in the stage's folder) is refused, naming what differs."""
    if path.is_file():
        before = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        changed = sorted(name for name in set(before) | set(settings) if before.get(name) != settings.get(name))
        if changed:
            differences = ", ".join(f"{name} {before.get(name)!r} -> {settings.get(name)!r}" for name in changed)
            raise PipelineError(
                f"{path} holds the settings that {path.stem} ran with, and this command asks for others "
                f"({differences}): choose a new --output_dir, or delete {path} and {settings['output_dir']} to run "
                "that stage again."
            )
        return
    path.write_text(yaml.safe_dump(settings, allow_unicode=True, sort_keys=False), encoding="utf-8")


def run(command: str, *arguments: str) -> None:
    """One of the package's console scripts in a process of its own; a failure names the command."""
    print(f"\n== {command} {shlex.join(arguments)}", flush=True)
    status = subprocess.run([sys.executable, "-m", MODULES[command], *arguments]).returncode
    if status:
        raise PipelineError(
            f"{command} {shlex.join(arguments)} failed (exit status {status}, its error above); the finished stages "
            "are kept: mend the cause and run the same vt-diversify command again."
        )


def refuse_stale(making: Path, made_from_it: list[Path]) -> None:
    """`making` is about to be made (again): what an earlier one made must not pass for the new one's work."""
    stale = [str(path) for path in made_from_it if path.exists()]
    if stale:
        raise PipelineError(
            f"{making} is to be made anew, but {', '.join(stale)} came from an earlier one: delete them too, so that "
            "they are made again from the new one."
        )


def train(settings_file: Path, settings: dict, made_from_it: list[Path]) -> Path:
    """A vt-train run of `settings`, unless its folder holds it finished; its model folder."""
    write_settings(settings_file, settings)
    folder = Path(settings["output_dir"])
    if run_report(folder) is None:
        refuse_stale(folder, made_from_it)
        run("vt-train", "--config", str(settings_file))
    return folder


def check_same_text(forward: DataArguments, fine_tune: DataArguments, config: str) -> None:
    """The fine-tune goes on from the forward model's vocabulary, so it must prepare its text as the forward stage
    did; vt-train would refuse it only once the first two stages had trained."""
    if forward.preprocess != fine_tune.preprocess:
        raise PipelineError(
            f"{config}: the forward stage prepares its text with preprocess {forward.preprocess!r} and the fine-tune "
            f"with {fine_tune.preprocess!r}; the fine-tune goes on from the forward model's vocabulary: give both "
            "sections the same preprocess."
        )


def translator_engine(choice: str) -> str:
    if choice != "auto":
        return choice
    return "ctranslate2" if importlib.util.find_spec("ctranslate2") else "generate"


def translate(model: Path, engine: str, source: Path, output: Path, made_from_it: list[Path]) -> Path:
    """`output`: `model`'s translations of the lines of `source` (kept from an earlier run where written whole)."""
    if output.is_file():
        return output
    refuse_stale(output, made_from_it)
    if engine == "ctranslate2":
        exported = model.with_name(f"{model.name}-ct2")
        if not exported.is_dir():
            run("vt-export", "ctranslate2", str(model), str(exported))
        model = exported
    partial = output.with_name(f".{output.name}.partial")
    run("vt-translate", "--model", str(model), "--engine", engine, "--input", str(source), "--output", str(partial))
    os.replace(partial, output)  # only whole translations carry the final name
    return output


def write_diversified(
    target: Path, sides: dict[str, tuple[Path, ...]], kept: list[Path], made_from_it: list[Path]
) -> Path:
    """The folder of the diversified pairs: `train.LANG`, the lines of each language's files in `sides` one after the
    other, and the `kept` files (validation, tests) copied beside them; kept from an earlier run where written."""
    if target.is_dir():
        return target
    refuse_stale(target, made_from_it)

    def write(folder: Path) -> None:
        folder.mkdir()
        for lang, files in sides.items():
            with open(folder / f"train.{lang}", "w", encoding="utf-8") as sink:
                for file in files:
                    sink.writelines(f"{line}\n" for line in read_lines(file))
        for file in kept:
            shutil.copy(file, folder / file.name)

    return write_folder(target, write)


def corpus_files(corpus: Path, data: DataArguments, languages: tuple[str, str]) -> tuple[dict[str, Path], list[Path]]:
    """The corpus's training file of each language, and its validation and test files (those the fine-tune, whose
    data settings `data` are, evaluates on)."""
    check_data_dir(corpus)
    training = {lang: language_file(corpus / data.train_prefix, lang) for lang in languages}
    prefixes = [data.validation_prefix, *data.test_prefixes]
    return training, [language_file(corpus / prefix, lang) for prefix in prefixes if prefix for lang in languages]


def fine_tune_cap(cap: float, deadline: float, elapsed: float) -> float:
    """The fine-tune's training cap in minutes: its own (0: none), shortened so that its training stops by the
    deadline (minutes since the command started), so that the whole command ends in time on a slower machine; never
    under a minute, so that a fine-tune there still runs."""
    left = round(max(deadline - elapsed, 1.0), 1)
    return min(cap, left) if cap else left


def starting_point(forward: Path) -> Path:
    """What the fine-tune starts from: the forward run's last checkpoint (the weights its rate schedule left, which it
    goes on from), or its model folder where it kept no checkpoint."""
    try:
        return last_checkpoints(forward, 1)[0]
    except AveragingError:
        return forward


def scores(folder: Path) -> str:
    """A finished run's shipped model and its BLEU on each split, for the summary."""
    report = run_report(folder)
    shipped = report["summary"]["shipped_model"]
    splits = ", ".join(f"{split} {result['bleu']:.2f}" for split, result in report["results"][shipped].items())
    return f"{folder} ({shipped}): BLEU {splits}"


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    started = time.time()
    args = parse_arguments(argv)
    pipeline = read_pipeline(args)
    output, corpus = Path(pipeline["output_dir"]), Path(pipeline["data_dir"])
    forward_settings = stage_settings(pipeline, "forward", args.config, output_dir=str(output / "forward"))
    source, target = (forward_settings.get(side) for side in ("source_lang", "target_lang"))
    if not (source and target):
        raise PipelineError(f"{args.config}: the forward stage's settings need a source_lang and a target_lang.")
    backward_settings = stage_settings(
        pipeline, "backward", args.config, source_lang=target, target_lang=source, output_dir=str(output / "backward")
    )
    fine_tune_settings = stage_settings(pipeline, "fine_tune", args.config)
    fine_tune_data = data_arguments(fine_tune_settings, args.config)
    check_same_text(data_arguments(forward_settings, args.config), fine_tune_data, args.config)
    training, kept = corpus_files(corpus, fine_tune_data, (source, target))
    output.mkdir(parents=True, exist_ok=True)

    # What each step makes from what the one before made; a step made anew must not find their earlier versions.
    fine_tune = [output / "fine_tune.yaml", output / "model"]
    diversified = [output / "diversified", *fine_tune]
    translated = {"forward": output / f"train.forward.{target}", "backward": output / f"train.backward.{source}"}
    models = {
        stage: train(output / f"{stage}.yaml", settings, [output / f"{stage}-ct2", translated[stage], *diversified])
        for stage, settings in (("forward", forward_settings), ("backward", backward_settings))
    }
    engine = translator_engine(pipeline.get("engine", "auto"))
    for stage, lang in (("forward", source), ("backward", target)):
        translate(models[stage], engine, training[lang], translated[stage], diversified)
    sides = {
        source: (training[source], training[source], translated["backward"]),
        target: (training[target], translated["forward"], training[target]),
    }
    pairs = write_diversified(diversified[0], sides, kept, fine_tune)
    fine_tune_settings |= {
        "data_dir": str(pairs),
        "train_prefix": "train",
        "model_name_or_path": str(starting_point(models["forward"])),
        "output_dir": str(output / "model"),
    }
    if "deadline_minutes" in pipeline:
        cap = fine_tune_settings.get("max_train_minutes", 0)
        if fine_tune[0].is_file():  # begun: its settings file holds the cap, and write_settings refuses any other
            cap = read_config(str(fine_tune[0])).get("max_train_minutes", cap)
        else:
            cap = fine_tune_cap(cap, pipeline["deadline_minutes"], (time.time() - started) / 60)
        fine_tune_settings["max_train_minutes"] = cap
    model = train(fine_tune[0], fine_tune_settings, [])
    lines = [f"{stage}: {scores(folder)}" for stage, folder in models.items()]
    lines += [f"model: {scores(model)}", f"this command: {(time.time() - started) / 60:.1f} min"]
    print("\n".join(["", "== data diversification ==", *lines]))


if __name__ == "__main__":
    main()
