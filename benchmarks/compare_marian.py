"""Our model against transformers' MarianMTModel at identical shapes, in one process, on identical batches.

    python benchmarks/compare_marian.py                                  # synthetic batches, tiny/small/base, fp32
    python benchmarks/compare_marian.py --sizes tiny small --dtypes fp32 bf16 --rounds 5
    python benchmarks/compare_marian.py --real-data ../shared/data/multi30k   # the whole training path

Synthetic mode, per size and dtype: training tokens/s (forward + backward + Adam; real, non-pad source + target
tokens counted), greedy and beam-4 generate() tokens/s at batch 1 and 16 (64 new tokens, end-of-sentence
suppressed so that both models produce the same number), uncached greedy generation, and training memory. Each
round measures both models one after the other (the order alternates); figures are medians over the rounds and
each ratio is the median of the per-round ratios (ours / Marian), so a slow moment of the machine hits both.

Real-data mode: the training path a user runs. Ours: `training.recipe.TranslationTrainer` (token-budget batches,
fused label smoothing). Marian's: a plain `Seq2SeqTrainer` with fixed-size shuffled batches and the Trainer's
label smoother, the setup of transformers' translation example; both with the same sentencepiece vocabulary,
the same model shape and batches of the same mean number of sentence pairs.

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

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel, PreTrainedModel, TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration  # noqa: E402

PAD, EOS, START = 0, 2, 0  # the ids training.tokenizer gives: <pad> 0, </s> 2; decoding starts from <pad>


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
}


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
    return {"ours": ours, "Marian": marian}


def random_batch(shape: Shape, batch_size: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """Source and target of random lengths in [length/2, length], right-padded; -100 labels on the padding."""
    generator = torch.Generator().manual_seed(seed)

    def side() -> tuple[torch.Tensor, torch.Tensor]:
        lengths = torch.randint(length // 2, length + 1, (batch_size,), generator=generator)
        ids = torch.randint(3, shape.vocab_size, (batch_size, length), generator=generator)
        mask = torch.arange(length) < lengths.unsqueeze(1)
        return ids.masked_fill(~mask, PAD), mask.long()

    input_ids, attention_mask = side()
    labels, label_mask = side()
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "labels": labels.masked_fill(label_mask == 0, -100),
    }


def real_tokens(batch: dict[str, torch.Tensor]) -> int:
    return int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum())


def autocast(dtype: str):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.autocast(device, dtype=torch.bfloat16, enabled=dtype == "bf16")


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


def training_memory_mb(model: PreTrainedModel, optimizer, batch: dict, dtype: str) -> float:
    """Peak training memory. On CUDA the allocator's peak; on a CPU, which has no such counter: parameters,
    the gradients and Adam's two moments of the trained ones, and the activations saved for the backward pass."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
        train_step(model, optimizer, batch, dtype)
        return torch.cuda.max_memory_allocated() / 2**20
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    trained = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return (weights + 3 * trained + saved_activation_bytes(model, batch, dtype)) / 2**20


def generate_step(model: PreTrainedModel, batch: dict, num_beams: int, new_tokens: int, use_cache: bool = True):
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


def measure_once(model, optimizer, batches: dict, dtype: str, new_tokens: int, train_steps: int) -> dict[str, float]:
    """One round for one model: {metric: tokens per second}."""
    figures = {}
    model.train()
    train_batch = batches["train"]
    train_step(model, optimizer, train_batch, dtype)  # warm-up: kernels chosen, Adam state allocated

    def train_steps_in_a_row() -> None:
        for _ in range(train_steps):
            train_step(model, optimizer, train_batch, dtype)

    figures["train tokens/s"] = train_steps * real_tokens(train_batch) / timed(train_steps_in_a_row)
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


GOALS = {  # issue 4: ours / Marian
    "train tokens/s": 1.2,
    "greedy b1 tokens/s": 1.2,
    "greedy b16 tokens/s": 1.2,
    "beam 4 b1 tokens/s": 1.2,
    "beam 4 b16 tokens/s": 1.2,
}


def compare(
    shape: Shape, dtype: str, rounds: int, train_batch: tuple[int, int], train_steps: int, new_tokens: int, attn: str
):
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
            figures = measure_once(models[name], optimizers[name], batches, dtype, new_tokens, train_steps)
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
    print("| metric | ours | Marian | ours / Marian | goal |")
    print("|---|---:|---:|---:|---|")
    for metric, (ours, marian, ratio) in table.items():
        if marian is None:
            goal = "≥ 3" if metric.startswith("ours") else ""
            print(f"| {metric} | {ours:.2f}× | | | {goal} |")
            continue
        goal = GOALS.get(metric)
        verdict = f"≥ {goal}: {'met' if ratio >= goal else 'not met'}" if goal else ""
        print(f"| {metric} | {ours:,.0f} | {marian:,.0f} | {ratio:.2f} | {verdict} |")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------------------------
# Real data: the whole training path
# ---------------------------------------------------------------------------------------------------------------


class CountingCollator:
    """Wraps a collator and records, for every batch it builds, the real and the padded token counts."""

    def __init__(self, collator):
        self.collator = collator
        self.batches: list[tuple[int, int]] = []

    def __call__(self, features):
        batch = self.collator(features)
        padded = batch["input_ids"].numel() + batch["labels"].numel()
        self.batches.append((real_tokens(batch), padded))
        return batch


def time_training_path(trainer, collator: CountingCollator, skip: int) -> dict[str, float]:
    """Train; real tokens per second over the steps after the first `skip` (warm-up), and the padding share of
    all the batches trained on."""
    step_ends: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            step_ends.append(time.perf_counter())

    trainer.add_callback(StepClock())
    trainer.train()
    trained = collator.batches[: len(step_ends)]  # the collator may have built a batch or two ahead
    real, padded = sum(r for r, _ in trained), sum(p for _, p in trained)
    timed_tokens = sum(r for r, _ in trained[skip:])
    return {
        "padding %": 100 * (1 - real / padded),
        "tokens/s": timed_tokens / (step_ends[-1] - step_ends[skip - 1]),
    }


def real_data_paths(
    data_dir: str, steps: int, max_tokens: int, vocab_size: int = 10000, skip: int = 5
) -> dict[str, dict[str, float]]:
    """Our training path and the plain Marian one on the same corpus, vocabulary and model shape."""
    from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

    from training.arguments import TranslationTrainingArguments
    from training.data import DataArguments, load_parallel_corpus, tokenize_corpus
    from training.recipe import TranslationTrainer
    from training.tokenizer import VocabularySettings, train_tokenizer

    # Only the training split is used; naming a test split keeps the loader from cutting one out of train.
    data_args = DataArguments(source_lang="en", target_lang="de", data_dir=data_dir, test_prefixes=["val"])
    corpus = load_parallel_corpus(data_args, seed=1)
    tokenizer = train_tokenizer(
        (s for c in ("source", "target") for s in corpus["train"][c]), VocabularySettings(vocab_size)
    )
    tokenized = tokenize_corpus(corpus, tokenizer, data_args)["train"]
    models = build_models(Shape(128, 4, 4, 256, len(tokenizer)), dropout=0.3)  # the Multi30K Transformer-Tiny
    common = dict(
        max_steps=steps,
        learning_rate=5e-4,
        save_strategy="no",
        report_to=[],
        logging_strategy="no",
        disable_tqdm=True,
        seed=1,
        label_smoothing_factor=0.1,
    )
    results = {}
    with tempfile.TemporaryDirectory() as output_dir:
        collator = CountingCollator(DataCollatorForSeq2Seq(tokenizer, model=models["ours"]))
        args = TranslationTrainingArguments(output_dir=output_dir, max_tokens=max_tokens, warmup_steps=steps, **common)
        ours = TranslationTrainer(models["ours"], args, train_dataset=tokenized, data_collator=collator)
        # The same mean number of pairs per batch for Marian's fixed-size batches.
        pairs = round(len(tokenized) / len(ours.get_train_dataloader()))
        results["ours: TranslationTrainer, token-budget batches"] = {
            "pairs per batch": pairs,
            **time_training_path(ours, collator, skip),
        }

        collator = CountingCollator(DataCollatorForSeq2Seq(tokenizer, model=models["Marian"]))
        args = Seq2SeqTrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=pairs,
            warmup_steps=steps,
            use_cpu=not torch.cuda.is_available(),
            **common,
        )
        marian = Seq2SeqTrainer(models["Marian"], args, train_dataset=tokenized, data_collator=collator)
        results["Marian: Seq2SeqTrainer, shuffled fixed-size batches"] = {
            "pairs per batch": pairs,
            **time_training_path(marian, collator, skip),
        }
    return results


def print_real_data(results: dict[str, dict[str, float]], steps: int) -> None:
    print(f"\n### Real data: Multi30K En→De training path, {steps} steps, Transformer-Tiny (d 128, 4+4 layers)\n")
    print("| setup | pairs per batch (mean) | padding % | real tokens/s |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['pairs per batch']} | {r['padding %']:.1f} | {r['tokens/s']:,.0f} |")
    ours, marian = results.values()
    ratio = ours["tokens/s"] / marian["tokens/s"]
    print(
        f"\nours / Marian end to end: {ratio:.2f} (goal ≥ 1.5: {'met' if ratio >= 1.5 else 'not met'}); "
        f"our padding {ours['padding %']:.1f}% (goal < 5%: {'met' if ours['padding %'] < 5 else 'not met'})"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "small", "base"], choices=list(SIZES))
    parser.add_argument("--dtypes", nargs="+", default=["fp32"], choices=["fp32", "bf16"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train-batch", type=int, nargs=2, default=[64, 32], metavar=("PAIRS", "LENGTH"))
    parser.add_argument("--train-steps", type=int, default=3, help="Training steps timed together per round.")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--attn", default="sdpa", choices=["eager", "sdpa", "flash_attention_2", "flex_attention"])
    parser.add_argument("--real-data", metavar="MULTI30K_DIR", help="Measure the training path on this corpus.")
    parser.add_argument("--steps", type=int, default=40, help="Real-data mode: training steps per setup.")
    parser.add_argument("--max-tokens", type=int, default=4096, help="Real-data mode: our token budget.")
    parser.add_argument("--vocab-size", type=int, default=10000, help="Real-data mode: joint BPE vocabulary.")
    args = parser.parse_args(argv)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {device}, attention: {args.attn}")
    if args.real_data:
        print_real_data(real_data_paths(args.real_data, args.steps, args.max_tokens, args.vocab_size), args.steps)
        return
    for size in args.sizes:
        for dtype in args.dtypes:
            shape = SIZES[size]
            train_batch = tuple(args.train_batch)
            table = compare(shape, dtype, args.rounds, train_batch, args.train_steps, args.new_tokens, args.attn)
            print_table(f"{size} {shape}, {dtype}, training batch {args.train_batch[0]} x {args.train_batch[1]}", table)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
