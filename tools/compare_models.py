"""Is one model better than another on a run's validation set, or is the difference noise?

vt-compare-models --run runs/multi30k_en_de runs/multi30k_en_de/averaged runs/other_run/averaged

Each model folder translates the validation set of `--run` with its own decoding settings (its
generation_config.json), and sacreBLEU's paired bootstrap resampling (Koehn, 2004: 1,000 resamples of the
sentences, seed 12345) gives every model's BLEU a 95% confidence interval and every later model's difference
from the first a p-value: the chance of a difference this large between two models that are equally good.
A seed or a setting moves Multi30K's validation BLEU by several tenths on 1,014 sentences; a p-value under 0.05
says the difference is larger than what the choice of sentences explains.
"""

import argparse
from pathlib import Path

from sacrebleu.significance import PairedTest

from vanilla_transformer.training import bleu_metric, check_scoring, one_line_errors

from .translate import positive_int
from .tune_decoding import run_data_arguments, run_translator, translations, validation_pairs


def paired_bootstrap(systems: dict[str, list[str]], references: list[str], target_lang: str) -> list[dict]:
    """One row per system: sacreBLEU, the half-width of its 95% confidence interval, and (after the first) the
    difference from the first system and its p-value under sacreBLEU's paired bootstrap resampling."""
    metric = bleu_metric(target_lang)
    _, results = PairedTest(list(systems.items()), {"BLEU": metric}, [references], test_type="bs")()
    baseline = results["BLEU"][0].score
    first = next(iter(systems.values()))
    rows = []
    for name, result in zip(results["System"], results["BLEU"], strict=True):
        row = {"model": name, "bleu": result.score, "ci": result.ci}
        if result.p_value is not None:
            # sacreBLEU gives identical systems p = 1/1001 (a zero difference is "not attributed to chance"); two
            # models that translate every sentence alike are equally good, whatever the resampling.
            same = systems[name] == first
            row.update(difference=result.score - baseline, p_value=1.0 if same else result.p_value)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict]) -> str:
    lines = [
        "| model | validation sacreBLEU | 95% interval | difference from the first | p-value |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        difference = f"{row['difference']:+.2f}" if "difference" in row else ""
        p_value = f"{row['p_value']:.3f}" if "p_value" in row else ""
        lines.append(f"| {row['model']} | {row['bleu']:.2f} | ± {row['ci']:.2f} | {difference} | {p_value} |")
    return "\n".join(lines)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="vt-compare-models",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("models", nargs="+", help="Model folders; the first is the one the others are compared with.")
    parser.add_argument("--run", type=Path, required=True, help="The training run whose validation set is used.")
    parser.add_argument("--batch_size", type=positive_int, default=64)
    args = parser.parse_args(argv)
    if len(set(args.models)) < 2:
        parser.error("give at least two different model folders to compare.")

    data_args, seed = run_data_arguments(args.run)
    check_scoring(data_args.target_lang, "nothing was translated")
    sources, references, target_lang = validation_pairs(data_args, seed)
    systems = {}
    for folder in args.models:
        systems[folder] = translations(run_translator(folder, data_args), sources, args.batch_size)
        print(f"{folder}: {len(sources)} validation sentences translated")
    print("\n" + markdown_table(paired_bootstrap(systems, references, target_lang)))


if __name__ == "__main__":
    main()
