"""Whether bf16 autocast makes this run's training faster on this machine: measured, never assumed.

CPUs differ: those with AMX or AVX512-BF16 compute bf16 matrix products natively, the others emulate them, many times
slower than fp32. Native products still do not make a faster step: autocast casts weights and activations around
every product, and in a small model the casts can cost more than the products save. A probe of forward and backward
on random batches can say the opposite of the run, so the probe times whole training steps (Adam's included) on one
of the run's own batches. benchmarks/README.md has the measurements.
"""

import copy
import time
from collections.abc import Callable

import torch
from torch import nn

from .loss import LabelSmoothedCrossEntropy


def cpu_bf16_instructions() -> set[str]:
    """The CPU's bf16 instruction sets among AMX and AVX512-BF16, as torch detects them (empty where there is none)."""
    capabilities = torch.cpu.get_capabilities() if hasattr(torch.cpu, "get_capabilities") else {}
    return {name for name in ("amx_bf16", "avx512_bf16") if capabilities.get(name)}


def training_step_seconds(
    model: nn.Module, optimizer: torch.optim.Optimizer, batch: dict[str, torch.Tensor], bf16: bool, repeats: int = 2
) -> float:
    """The best of `repeats` training steps (forward, label-smoothed loss, backward, optimizer step), after one
    untimed step (which meets the shapes first)."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            inputs = {name: value for name, value in batch.items() if name != "labels"}
            loss = LabelSmoothedCrossEntropy(0.1)(model(**inputs), batch["labels"])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - started)
    return min(times[1:])


def bf16_step_speedup(model: nn.Module, batch: dict[str, torch.Tensor]) -> float:
    """fp32 seconds / bf16 seconds of a CPU training step on `batch` (one of the run's own), timed on a copy of
    `model` with an Adam of its own: the model, its gradients and the random generators stay as they were."""
    trial = copy.deepcopy(model).train()  # dropout on, as in training
    optimizer = torch.optim.Adam(trial.parameters())
    with torch.random.fork_rng():
        fp32 = training_step_seconds(trial, optimizer, batch, bf16=False)
        bf16 = training_step_seconds(trial, optimizer, batch, bf16=True)
    return fp32 / bf16


def bf16_trains_faster(model: nn.Module, make_batch: Callable[[], dict[str, torch.Tensor]]) -> bool:
    """Whether to train `model` with bf16 autocast by default. On a CUDA GPU: where it computes bf16 natively
    (Ampere on). On a CPU: where it has AMX or AVX512-BF16 and a timed step on one of the run's batches is at least
    10% faster. `make_batch` is called only for that probe: building the batch reads the whole training set."""
    if torch.cuda.is_available():
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return bool(cpu_bf16_instructions()) and bf16_step_speedup(model, make_batch()) > 1.1
