"""vt-train on a corpus of millions of pairs: the minutes of each phase before training (reading the files, the
vocabulary, tokenizing) and the process's peak memory, on a synthetic corpus made of Multi30K's sentences, each pair
one to three of its pairs joined (WMT's lengths, about 25 words a side).

    python benchmarks/corpus_scale.py --data_dir ../shared/data/multi30k --pairs 4500000 --work_dir /tmp/scale

The run is the shipped Multi30K config with WMT 2014's vocabulary size (37,000) for 20 steps: its small model leaves
the data's share of the memory in plain view. A corpus already in --work_dir with as many pairs is reused; so are
datasets' cached reads of it (the second run's reading time is the cache's). Prints figures, not verdicts; run nothing
heavy beside it.
"""

import argparse
import gzip
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

# The log lines that end each phase, in order.
PHASES = {"reading": ": Corpus:", "vocabulary": ": Trained a", "tokenizing": ": Model:"}
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def read_gzip_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as file:
        return file.read().splitlines()


def write_corpus(data_dir: Path, pairs: int, folder: Path, evaluation_pairs: int, seed: int = 0) -> None:
    """train.en/.de of `pairs` pairs, each 1-3 random Multi30K pairs joined; Multi30K's validation and tests, cut to
    `evaluation_pairs` pairs, beside them."""
    if (folder / "train.en").exists() and sum(1 for _ in (folder / "train.en").open()) == pairs:
        return
    folder.mkdir(parents=True, exist_ok=True)
    english, german = read_gzip_lines(data_dir / "train.en.gz"), read_gzip_lines(data_dir / "train.de.gz")
    rng = random.Random(seed)
    with (folder / "train.en").open("w") as en, (folder / "train.de").open("w") as de:
        for _ in range(pairs):
            rows = [rng.randrange(len(english)) for _ in range(rng.choice((1, 1, 2, 2, 3)))]
            en.write(" ".join(english[row] for row in rows) + "\n")
            de.write(" ".join(german[row] for row in rows) + "\n")
    for prefix in ("val", "test_2016_flickr", "test_2017_flickr"):
        for lang in ("en", "de"):
            lines = read_gzip_lines(data_dir / f"{prefix}.{lang}.gz")[:evaluation_pairs]
            (folder / f"{prefix}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")


def phase_seconds(log: str, started: float) -> dict[str, float]:
    """Seconds of each phase, from the log's time stamps (the first phase from the process's start)."""
    ends = {}
    for line in log.splitlines():
        stamp = STAMP.match(line)
        for phase, marker in PHASES.items():
            if stamp and marker in line and phase not in ends:
                ends[phase] = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
    seconds, before = {}, started
    for phase in PHASES:
        if phase in ends:
            seconds[phase], before = ends[phase] - before, ends[phase]
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", type=Path, default=Path("../shared/data/multi30k"))
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--work_dir", type=Path, default=Path("/tmp/corpus_scale"))
    parser.add_argument("--max_steps", type=int, default=20)
    parser.add_argument("--vocab_size", type=int, default=37000)
    parser.add_argument("--evaluation_pairs", type=int, default=200, help="Of the validation and each test split.")
    args = parser.parse_args(argv)
    corpus, run = args.work_dir / f"corpus_{args.pairs}", args.work_dir / f"run_{args.pairs}"
    write_corpus(args.data_dir, args.pairs, corpus, args.evaluation_pairs)
    command = [
        sys.executable, "-m", "vanilla_transformer.training.train", "--config", "multi30k_en_de",
        "--data_dir", str(corpus), "--output_dir", str(run),
        "--vocab_size", str(args.vocab_size), "--max_steps", str(args.max_steps), "--eval_strategy", "no",
        "--save_strategy", "no", "--average_checkpoints", "0", "--max_train_minutes", "0",
    ]  # fmt: skip
    shutil.rmtree(run, ignore_errors=True)  # a new run each time, with its own vocabulary
    started = time.time()
    finished = subprocess.run(command, capture_output=True, text=True)
    wall = time.time() - started
    if finished.returncode:
        sys.exit(f"vt-train failed:\n{finished.stderr[-3000:]}")
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # kilobytes on Linux
    print(f"{args.pairs:,} pairs: {wall:.0f} s in all, peak memory {peak_gib:.2f} GiB")
    for phase, seconds in phase_seconds(finished.stderr, started).items():
        print(f"  {phase}: {seconds:.0f} s")


if __name__ == "__main__":
    main()
