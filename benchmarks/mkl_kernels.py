"""The matrix products of a Multi30K training step under MKL's own kernels and under the kernels it keeps for Intel's
CPUs (training.mkl_kernels, `--mkl_intel_kernels`), on this machine.

    python benchmarks/mkl_kernels.py                 # the Transformer-Tiny's shapes, 2 threads, 3 rounds
    python benchmarks/mkl_kernels.py --threads 1 --rounds 5

MKL chooses its kernels at a process's first matrix product, so each setting runs in a new Python of its own, the
settings taking turns round by round (which goes first alternates), with numpy's OpenBLAS in processes of its own
for reference. Each figure is the median over the rounds of the mean of `--repeats` products after warm-up. On a
CPU other than an AMD one with AVX2 the remedy does nothing, and both MKL columns are its own kernels. Prints
figures, not verdicts; run nothing else heavy beside it.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

# (rows, inner, columns) of the step's products: the output layer's logits over 256 target positions, their
# gradients, and a layer's projections and FFN over ~1,020 positions (d_model 128, d_ff 256, 8,000 tokens).
SHAPES = [(256, 128, 8000), (256, 8000, 128), (8000, 256, 128), (1020, 128, 128), (128, 1020, 128), (1020, 128, 256)]

TIMING = """
import json, sys, time
import numpy, torch
from vanilla_transformer.training.mkl_kernels import use_mkl_intel_kernels
setting, threads, repeats, shapes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
remedy = setting == "intel" and use_mkl_intel_kernels()  # before the process's first product
torch.set_num_threads(threads)

def mean_ms(product):
    for _ in range(5):
        product()
    started = time.perf_counter()
    for _ in range(repeats):
        product()
    return (time.perf_counter() - started) / repeats * 1e3

figures = {}
for m, k, n in shapes:
    a, b = torch.randn(m, k), torch.randn(k, n)
    if setting == "openblas":
        a, b = a.numpy(), b.numpy()
    figures[f"{m}x{k}x{n}"] = mean_ms(lambda: a @ b)
print(json.dumps({"remedy": remedy, "figures": figures}))
"""
SETTINGS = ("own", "intel", "openblas")  # MKL's choice, MKL's Intel kernels, numpy's OpenBLAS


def timed(setting: str, threads: int, repeats: int) -> dict:
    """One new Python's figures under `setting`: torch's products (MKL) or numpy's (OpenBLAS, on as many threads),
    never both in one process, whose idle threads would spin beside the other's."""
    command = [sys.executable, "-c", TIMING, setting, str(threads), str(repeats), json.dumps(SHAPES)]
    environment = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    result = subprocess.run(command, capture_output=True, text=True, check=True, env=environment)
    return json.loads(result.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=100, help="Products timed together in each process.")
    args = parser.parse_args(argv)
    runs: dict[str, list[dict]] = {setting: [] for setting in SETTINGS}
    for round_index in range(args.rounds):
        for setting in SETTINGS if round_index % 2 == 0 else SETTINGS[::-1]:
            runs[setting].append(timed(setting, args.threads, args.repeats))
    applied = all(run["remedy"] for run in runs["intel"])
    print(f"{args.threads} threads, {args.rounds} rounds; the remedy applied on this CPU: {applied}")
    print("| product (rows x inner x columns) | MKL's own, ms | MKL's Intel kernels, ms | ratio | OpenBLAS, ms |")
    print("|---|---:|---:|---:|---:|")
    for shape in runs["own"][0]["figures"]:
        own, intel, openblas = (statistics.median(run["figures"][shape] for run in runs[s]) for s in SETTINGS)
        print(f"| {shape} | {own:.2f} | {intel:.2f} | {own / intel:.2f} | {openblas:.2f} |")


if __name__ == "__main__":
    main()
