r"""Our model against transformers' MarianMTModel at identical shapes, in one process, on identical batches.

    python benchmarks/compare_marian.py                                  # synthetic batches, tiny/small/base, fp32
    python benchmarks/compare_marian.py --sizes base big --dtypes bf16 --train-batch 192 64   # on a GPU
    python benchmarks/compare_marian.py --real-data ../shared/data/multi30k   # the whole training path
    python benchmarks/compare_marian.py --real-data ../shared/data/multi30k --steps 300 --rounds 2 --compiled \
        --bf16 --profile 5

Synthetic mode, per size and dtype: training tokens/s (forward + backward + Adam; real, non-pad source + target
tokens counted), greedy and beam-4 generate() tokens/s at batch 1 and 16 (64 new tokens, end-of-sentence
suppressed so that both models produce the same number), uncached greedy generation, and training memory. Each
round measures both models one after the other (the order alternates); figures are medians over the rounds and
each ratio is the median of the per-round ratios (ours / Marian), so a slow moment of the machine hits both.
Both models run on the GPU when there is one; there, "train MFU %" is the model FLOPs per second (training_flops)
over the H100's dense peak for the dtype.

Real-data mode: the training path a user runs. Ours: `training.recipe.TranslationTrainer` (token-budget batches,
fused label smoothing). Marian's: a plain `Seq2SeqTrainer` with fixed-size shuffled batches and the Trainer's
label smoother, the setup of transformers' translation example; both with the same sentencepiece vocabulary,
the same model shape, the same precision (fp32, or bf16 autocast with --bf16) and batches of the same mean number
of sentence pairs. Each setup trains a fresh model; with --rounds N each runs N times, which goes first alternating,
and the figures are medians. --compiled adds both again with the Trainer's torch_compile and lengths padded to
multiples of 8; --profile STEPS prints the operators that cost the most host and device time per step, and the
calls that make the host wait for the device.

Marian is configured as the paper's model: relu, scale_embedding, shared and tied embeddings, post-LN, the same
attention implementation. It keeps its own differences: a fixed sinusoidal table of fixed length (not trained), a
final_logits_bias, and its own generate() defaults, which are replaced here by one GenerationConfig for both.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from transformers import (
    GenerationConfig,
    MarianConfig,
    MarianMTModel,
    PreTrainedModel,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)

if TYPE_CHECKING:  # the Trainer is imported where training is timed, not by every process that builds a model
    from transformers import Seq2SeqTrainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration  # noqa: E402
from vanilla_transformer.training.tokenizer import SPECIAL_IDS  # noqa: E402

PAD, EOS = SPECIAL_IDS["<pad>"], SPECIAL_IDS["</s>"]  # the ids of the project's own vocabularies
START = PAD  # decoding starts from <pad>, as in Marian


@dataclass(frozen=True)
class Shape:
    d_model: int
    layers: int
    heads: int
    ffn_dim: int
    vocab_size: int


SIZES = {
    "tiny": Shape(128, 2, 4, 512, 8000),
    "small": Shape(256, 3, 4, 1024, 8000),
    "base": Shape(512, 6, 8, 2048, 37000),  # the paper's base model (Table 3)
    "big": Shape(1024, 6, 16, 4096, 37000),  # the paper's big model (Table 3)
}

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# Dense bf16 / fp32 (TF32 off) tensor throughput of the GPU that MFU is measured against: an H100 SXM.
PEAK_FLOPS = {"bf16": 989e12, "fp32": 67e12}


def shared_settings(shape: Shape, dropout: float, attn_implementation: str) -> dict:
    return dict(
        vocab_size=shape.vocab_size,
        d_model=shape.d_model,
        encoder_layers=shape.layers,
        decoder_layers=shape.layers,
        encoder_attention_heads=shape.heads,
        decoder_attention_heads=shape.heads,
        encoder_ffn_dim=shape.ffn_dim,
        decoder_ffn_dim=shape.ffn_dim,
        activation_function="relu",
        dropout=dropout,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=START,
        attn_implementation=attn_implementation,
    )


def build_models(shape: Shape, dropout: float = 0.1, attn_implementation: str = "sdpa") -> dict[str, PreTrainedModel]:
    """Our model and a MarianMTModel with the same shape and settings, both freshly initialised."""
    settings = shared_settings(shape, dropout, attn_implementation)
    torch.manual_seed(0)
    ours = VanillaTransformerForConditionalGeneration(VanillaTransformerConfig(**settings))
    torch.manual_seed(0)
    marian_config = MarianConfig(**settings, max_position_embeddings=1024, forced_eos_token_id=None)
    marian = MarianMTModel(marian_config)
    for model in (ours, marian):
        model.generation_config = GenerationConfig(pad_token_id=PAD, eos_token_id=EOS, decoder_start_token_id=START)
    return {"ours": ours.to(DEVICE), "Marian": marian.to(DEVICE)}


def random_batch(shape: Shape, batch_size: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """Source and target of random lengths in [length/2, length], right-padded; -100 labels on the padding."""
    generator = torch.Generator().manual_seed(seed)

    def side() -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.randint(length // 2, length + 1, (batch_size,), generator=generator)
        ids = torch.randint(3, shape.vocab_size, (batch_size, length), generator=generator)
        mask = torch.arange(length) < lengths.unsqueeze(1)
        return ids.masked_fill(~mask, PAD), mask

    input_ids, source_mask = side()
    labels, label_mask = side()
    attention_mask = source_mask.long()
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels.masked_fill(~label_mask, -100)}
    return {name: tensor.to(DEVICE) for name, tensor in batch.items()}


def real_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum())


def training_flops(shape: Shape, batch: dict[str, torch.Tensor]) -> float:
    """Model FLOPs of one training step (2 per multiply-add, backward = 2 x forward), real tokens only: the
    products with the weight matrices (incl. the pre-softmax projection) and the attention scores and sums."""
    d, f, n = shape.d_model, shape.ffn_dim, shape.layers
    source, target = int(batch["attention_mask"].sum()), int((batch["labels"] != -100).sum())
    s, t = batch["input_ids"].shape[1], batch["labels"].shape[1]
    encoder = source * n * (4 * d * d + 2 * d * f + 2 * s * d)  # multiply-adds per source token
    decoder = target * (n * (8 * d * d + 2 * d * f + 2 * t * d + 2 * s * d) + d * shape.vocab_size)
    return 6.0 * (encoder + decoder)


def autocast(dtype: str) -> torch.autocast:
    return torch.autocast(DEVICE.type, dtype=torch.bfloat16, enabled=dtype == "bf16")


def timed(step: Callable[[], object]) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    started = time.perf_counter()
    step()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - started


def train_step(model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: dict, dtype: str) -> None:
    with autocast(dtype):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def saved_activation_bytes(model: PreTrainedModel, batch: dict, dtype: str) -> int:
    """Bytes of the tensors autograd keeps for the backward pass (each storage counted once)."""
    storages: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor), autocast(dtype):
        loss = model(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=True)
    return sum(storages.values())


def training_memory_mb(model: PreTrainedModel, optimizer: torch.optim.Optimizer, batch: dict, dtype: str) -> float:
    """Peak training memory. On CUDA the allocator's peak; on a CPU, which has no such counter: parameters,
    the gradients and Adam's two moments of the trained ones, and the activations saved for the backward pass."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
        train_step(model, optimizer, batch, dtype)
        return torch.cuda.max_memory_allocated() / 2**20
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    trained = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return (weights + 3 * trained + saved_activation_bytes(model, batch, dtype)) / 2**20


def generate_step(
    model: PreTrainedModel, batch: dict, num_beams: int, new_tokens: int, use_cache: bool = True
) -> Callable[[], torch.Tensor]:
    """A call of generate() that makes exactly `new_tokens` tokens per row, for timing."""

    def run() -> torch.Tensor:
        with torch.no_grad():
            return model.generate(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                num_beams=num_beams,
                do_sample=False,
                min_new_tokens=new_tokens,  # end-of-sentence suppressed: every row makes exactly `new_tokens`
                max_new_tokens=new_tokens,
                use_cache=use_cache,
            )

    return run


def measure_once(
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    batches: dict,
    dtype: str,
    new_tokens: int,
    train_steps: int,
    shape: Shape,
) -> dict[str, float]:
    """One round for one model: {metric: tokens per second} (and model FLOPs utilisation on a GPU)."""
    figures = {}
    model.train()
    train_batch = batches["train"]
    train_step(model, optimizer, train_batch, dtype)  # warm-up: kernels chosen, Adam state allocated

    def train_steps_in_a_row() -> None:
        for _ in range(train_steps):
            train_step(model, optimizer, train_batch, dtype)

    seconds = timed(train_steps_in_a_row)
    figures["train tokens/s"] = train_steps * real_tokens(train_batch) / seconds
    if DEVICE.type == "cuda":
        figures["train MFU %"] = 100 * train_steps * training_flops(shape, train_batch) / seconds / PEAK_FLOPS[dtype]
    model.eval()
    with autocast(dtype):
        for batch_size in (1, 16):
            batch = batches[f"generate {batch_size}"]
            for name, beams in (("greedy", 1), ("beam 4", 4)):
                run = generate_step(model, batch, beams, new_tokens)
                run()  # warm-up
                figures[f"{name} b{batch_size} tokens/s"] = batch_size * new_tokens / timed(run)
        uncached = generate_step(model, batches["generate 1"], 1, new_tokens, use_cache=False)
        figures["greedy b1 uncached tokens/s"] = new_tokens / timed(uncached)
    return figures


# The speeds compared as ours / Marian.
SPEEDS = ("train tokens/s", "greedy b1 tokens/s", "greedy b16 tokens/s", "beam 4 b1 tokens/s", "beam 4 b16 tokens/s")


def compare(
    shape: Shape, dtype: str, rounds: int, train_batch: tuple[int, int], train_steps: int, new_tokens: int, attn: str
) -> dict:
    """Medians per model and median ratios over `rounds` alternating rounds."""
    models = build_models(shape, attn_implementation=attn)
    optimizers = {
        name: torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9) for name, m in models.items()
    }
    batches = {
        "train": random_batch(shape, *train_batch, seed=1),
        "generate 1": random_batch(shape, 1, 32, seed=2),
        "generate 16": random_batch(shape, 16, 32, seed=3),
    }
    per_round: dict[str, list[dict[str, float]]] = {name: [] for name in models}
    for round_index in range(rounds):
        order = list(models) if round_index % 2 == 0 else list(reversed(models))
        for name in order:
            figures = measure_once(models[name], optimizers[name], batches, dtype, new_tokens, train_steps, shape)
            per_round[name].append(figures)
    metrics = list(per_round["ours"][0])
    table = {}
    for metric in metrics:
        ours = [r[metric] for r in per_round["ours"]]
        marian = [r[metric] for r in per_round["Marian"]]
        ratio = statistics.median(o / m for o, m in zip(ours, marian, strict=True))
        table[metric] = (statistics.median(ours), statistics.median(marian), ratio)
    memory = {
        name: training_memory_mb(model.train(), optimizers[name], batches["train"], dtype)
        for name, model in models.items()
    }
    table["training memory MB"] = (memory["ours"], memory["Marian"], memory["ours"] / memory["Marian"])
    for name in models:  # ours cached / uncached at the same batch
        cached = statistics.median(r["greedy b1 tokens/s"] for r in per_round[name])
        uncached = statistics.median(r["greedy b1 uncached tokens/s"] for r in per_round[name])
        table[f"{name}: cached / uncached greedy b1"] = (cached / uncached, None, None)
    return table


def print_table(title: str, table: dict) -> None:
    print(f"\n### {title}\n")
    print("| metric | ours | Marian | ours / Marian |")
    print("|---|---:|---:|---:|")
    for metric, (ours, marian, ratio) in table.items():
        if marian is None:
            print(f"| {metric} | {ours:.2f}× | | |")
            continue
        digits = 1 if metric.endswith("%") else 0
        print(f"| {metric} | {ours:,.{digits}f} | {marian:,.{digits}f} | {ratio:.2f} |")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------------------------
# Real data: the whole training path
# ---------------------------------------------------------------------------------------------------------------


def count_tokens(trainer: "Seq2SeqTrainer") -> list[tuple[torch.Tensor, int]]:
    """Records (real tokens, padded tokens) of every batch the trainer trains on, where the batch arrives: the
    collator may run in worker processes. The real counts stay tensors (on the device), read after training, so
    that counting makes the host wait for nothing."""
    counts: list[tuple[torch.Tensor, int]] = []
    training_step = trainer.training_step

    def counting_training_step(model: PreTrainedModel, inputs: dict, *args, **kwargs) -> torch.Tensor:
        real = inputs["attention_mask"].sum() + (inputs["labels"] != -100).sum()
        counts.append((real, inputs["input_ids"].numel() + inputs["labels"].numel()))
        return training_step(model, inputs, *args, **kwargs)

    trainer.training_step = counting_training_step
    return counts


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # work ends when its kernels have run, not when they were queued


class StepClock(TrainerCallback):
    """The wall-clock time at the end of every optimizer step (the GPU waited for only after the warm-up steps and
    at the end, so that the host can run ahead as in training); optionally a torch.profiler trace of
    `profile_steps` steps after `skip`."""

    def __init__(self, skip: int, profile_steps: int = 0):
        self.ends: list[float] = []
        self.skip, self.profile_steps = skip, profile_steps
        self.profiler: torch.profiler.profile | None = None

    def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        synchronize()
        self.ends[-1] = time.perf_counter()

    def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        if state.global_step == self.skip:
            synchronize()
        self.ends.append(time.perf_counter())
        if self.profile_steps and state.global_step == self.skip:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=activities)
            self.profiler.__enter__()
        if self.profiler is not None and state.global_step == self.skip + self.profile_steps:
            self.profiler.__exit__(None, None, None)


def time_training_path(trainer: "Seq2SeqTrainer", skip: int, profile_steps: int = 0) -> dict:
    """Train; real tokens per second over the steps after the first `skip` (warm-up, compilation), and the padding
    share of all the batches trained on."""
    clock = StepClock(skip, profile_steps)
    trainer.add_callback(clock)
    counts = count_tokens(trainer)
    trainer.train()
    real = [int(r) for r, _ in counts]
    padded = sum(p for _, p in counts)
    seconds = clock.ends[-1] - clock.ends[skip - 1]
    return {
        "padding %": 100 * (1 - sum(real) / padded),
        "tokens/s": sum(real[skip:]) / seconds,
        "ms/step": 1000 * seconds / (len(clock.ends) - skip),
        "first steps s": clock.ends[skip - 1] - clock.ends[0],
        "profile": clock.profiler,
    }


def print_profile(name: str, profiler: torch.profiler.profile, steps: int) -> None:
    """The operators that cost the most host and device time per step, and the host-device synchronisations."""
    events = profiler.key_averages()
    print(f"\n#### Profile: {name}, {steps} steps\n")
    for key, label in (("self_cpu_time_total", "host"), ("self_device_time_total", "device")):
        if key == "self_device_time_total" and not torch.cuda.is_available():
            continue
        rows = sorted(events, key=lambda e: getattr(e, key), reverse=True)[:12]
        print(f"| op (by {label} time) | calls/step | {label} ms/step |\n|---|---:|---:|")
        for event in rows:
            print(f"| {event.key} | {event.count / steps:.0f} | {getattr(event, key) / 1000 / steps:.2f} |")
        print()
    syncs = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "aten::_local_scalar_dense", "aten::nonzero")
    counts = {event.key: event.count / steps for event in events if event.key in syncs}
    launches = sum(event.count for event in events if event.key in ("cudaLaunchKernel", "cuLaunchKernel")) / steps
    print(f"per step: {counts or 'no synchronising calls'}; kernel launches {launches:.0f}")


def real_data_paths(
    data_dir: str,
    steps: int,
    max_tokens: int,
    vocab_size: int = 10000,
    skip: int = 5,
    rounds: int = 1,
    compiled: bool = False,
    bf16: bool = False,
    profile_steps: int = 0,
) -> dict[str, dict]:
    """Our training path and the plain Marian one on the same corpus, vocabulary, model shape and precision, each
    run `rounds` times (which goes first alternates); with `compiled`, both again with the Trainer's torch_compile
    and lengths padded to multiples of 8. Figures are medians over the rounds."""
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.batching import TokenBudgetBatchSampler
    from vanilla_transformer.training.data import DataArguments, load_parallel_corpus, tokenize_corpus
    from vanilla_transformer.training.recipe import TranslationTrainer
    from vanilla_transformer.training.tokenizer import VocabularySettings, train_tokenizer

    # Only the training split is used; naming a test split keeps the loader from cutting one out of train.
    data_args = DataArguments(source_lang="en", target_lang="de", data_dir=data_dir, test_prefixes=["val"])
    corpus = load_parallel_corpus(data_args, seed=1)
    tokenizer = train_tokenizer(
        (s for c in ("source", "target") for s in corpus["train"][c]), VocabularySettings(vocab_size)
    )
    tokenized = tokenize_corpus(corpus, tokenizer, data_args)["train"]
    shape = Shape(128, 4, 4, 256, len(tokenizer))  # the Multi30K Transformer-Tiny
    common = dict(
        max_steps=steps,
        learning_rate=5e-4,
        warmup_steps=steps,
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        disable_tqdm=True,
        seed=1,
        label_smoothing_factor=0.1,
        bf16=bf16,
        use_cpu=not torch.cuda.is_available(),
    )
    with tempfile.TemporaryDirectory() as output_dir:
        lengths = [[len(ids) for ids in tokenized[side]] for side in ("input_ids", "labels")]
        our_batches = TokenBudgetBatchSampler(*lengths, max_tokens)
        pairs = round(len(tokenized) / len(our_batches))  # Marian's batches: the same mean size

        def make_trainer(name: str, compile_: bool) -> Seq2SeqTrainer:
            model = build_models(shape, dropout=0.3)[name]
            collator = DataCollatorForSeq2Seq(tokenizer, model=model, pad_to_multiple_of=8 if compile_ else None)
            if name == "ours":
                args = TranslationTrainingArguments(output_dir, max_tokens=max_tokens, torch_compile=compile_, **common)
                return TranslationTrainer(model, args, train_dataset=tokenized, data_collator=collator)
            args = Seq2SeqTrainingArguments(
                output_dir, per_device_train_batch_size=pairs, torch_compile=compile_, **common
            )
            return Seq2SeqTrainer(model, args, train_dataset=tokenized, data_collator=collator)

        setups = {
            "ours: TranslationTrainer, token-budget batches": ("ours", False),
            "Marian: Seq2SeqTrainer, shuffled fixed-size batches": ("Marian", False),
        }
        if compiled:
            setups["ours, torch_compile, lengths to multiples of 8"] = ("ours", True)
            setups["Marian, torch_compile, lengths to multiples of 8"] = ("Marian", True)
        runs: dict[str, list[dict]] = {name: [] for name in setups}
        for round_index in range(rounds):
            names = list(setups) if round_index % 2 == 0 else list(reversed(setups))
            for name in names:
                model_name, compile_ = setups[name]
                profiling = profile_steps if round_index == 0 and not compile_ else 0
                runs[name].append(time_training_path(make_trainer(model_name, compile_), skip, profiling))
    results = {}
    for name, measured in runs.items():
        medians = ("padding %", "tokens/s", "ms/step", "first steps s")
        figures = {key: statistics.median(run[key] for run in measured) for key in medians}
        results[name] = {
            "pairs per batch": pairs,
            **figures,
            "profile": measured[0]["profile"],
            "profile steps": profile_steps,
        }
    return results


def print_real_data(results: dict[str, dict], steps: int, skip: int = 5) -> None:
    print(f"\n### Real data: Multi30K En→De training path, {steps} steps, Transformer-Tiny (d 128, 4+4 layers)\n")
    print(f"| setup | pairs per batch (mean) | padding % | ms/step | real tokens/s | first {skip} steps s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        print(
            f"| {name} | {r['pairs per batch']} | {r['padding %']:.1f} | {r['ms/step']:.1f} | {r['tokens/s']:,.0f} "
            f"| {r['first steps s']:.1f} |"
        )
    names = list(results)
    ours, marian = results[names[0]], results[names[1]]
    ratio = ours["tokens/s"] / marian["tokens/s"]
    print(f"\nours / Marian end to end: {ratio:.2f}; our padding {ours['padding %']:.1f}%")
    if len(names) == 4:
        best_ours = max(results[n]["tokens/s"] for n in names[0::2])
        best_marian = max(results[n]["tokens/s"] for n in names[1::2])
        print(f"best of each (compiled or not): {best_ours / best_marian:.2f}")
    for name, r in results.items():
        if r["profile"] is not None:
            print_profile(name, r["profile"], r["profile steps"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "base"], choices=list(SIZES))
    parser.add_argument("--dtypes", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, help="Rounds per figure (default: 3 synthetic, 1 real-data).")
    parser.add_argument("--train-batch", type=int, nargs=2, default=[64, 32], metavar=("PAIRS", "LENGTH"))
    parser.add_argument("--train-steps", type=int, default=3, help="Training steps timed together per round.")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--attn", default="sdpa", choices=["eager", "sdpa", "flash_attention_2", "flex_attention"])
    parser.add_argument("--real-data", metavar="MULTI30K_DIR", help="Measure the training path on this corpus.")
    parser.add_argument("--steps", type=int, default=40, help="Real-data mode: training steps per setup.")
    parser.add_argument("--max-tokens", type=int, default=4096, help="Real-data mode: our token budget.")
    parser.add_argument("--vocab-size", type=int, default=10000, help="Real-data mode: joint BPE vocabulary.")
    parser.add_argument("--compiled", action="store_true", help="Real-data mode: also both with torch_compile.")
    parser.add_argument("--bf16", action="store_true", help="Real-data mode: bf16 autocast for both setups.")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS", help="Real-data mode: profile STEPS steps.")
    args = parser.parse_args(argv)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {device}, attention: {args.attn}")
    if args.real_data:
        rounds = args.rounds or 1
        results = real_data_paths(
            args.real_data, args.steps, args.max_tokens, args.vocab_size, rounds=rounds, compiled=args.compiled,
            bf16=args.bf16, profile_steps=args.profile,
        )  # fmt: skip
        print(f"precision: {'bf16 autocast' if args.bf16 else 'fp32'} for both; {rounds} round(s), medians")
        print_real_data(results, args.steps)
        return
    for size in args.sizes:
        for dtype in args.dtypes:
            shape = SIZES[size]
            train_batch = tuple(args.train_batch)
            table = compare(shape, dtype, args.rounds or 3, train_batch, args.train_steps, args.new_tokens, args.attn)
            print_table(f"{size} {shape}, {dtype}, training batch {args.train_batch[0]} x {args.train_batch[1]}", table)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
