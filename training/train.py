"""Train (or fine-tune), evaluate and package a vanilla Transformer translation model.

python -m training.train --config training/configs/multi30k_en_de.yaml --data_dir ../shared/data/multi30k

Arguments: `python -m training.train --help` (model, data, vocabulary and all Seq2SeqTrainingArguments).
The same command runs under `torchrun` or `accelerate launch` on several GPUs or machines.
"""

import json
import logging
import math
import time
from dataclasses import asdict
from pathlib import Path

from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    GenerationConfig,
    PreTrainedModel,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

from .arguments import ModelArguments, TranslationTrainingArguments, VocabularyArguments, parse_arguments
from .average_checkpoints import last_checkpoints, write_averaged_model
from .data import CorpusError, load_parallel_corpus, testing_splits, tokenize_corpus
from .hub import make_tokenizer_config_portable, publish, ship_translation_pipeline
from .metrics import decode, make_compute_metrics, translation_scores
from .model_card import render_model_card
from .recipe import TranslationTrainer
from .schedule import peak_learning_rate
from .tokenizer import special_token_ids, train_tokenizer

logger = logging.getLogger("training.train")


def load_or_train_tokenizer(model_args: ModelArguments, vocab_args: VocabularyArguments, corpus, output_dir: Path):
    if model_args.model_name_or_path:  # fine-tuning keeps the model's vocabulary
        return AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    if (output_dir / "tokenizer.json").exists():  # a resumed run keeps the vocabulary it started with
        logger.info("Reusing the vocabulary in %s", output_dir)
        return AutoTokenizer.from_pretrained(output_dir)
    train = corpus["train"]
    tokenizer = train_tokenizer((s for column in ("source", "target") for s in train[column]), vocab_args)
    tokenizer.save_pretrained(output_dir)
    return tokenizer


def build_model(model_args: ModelArguments, tokenizer) -> PreTrainedModel:
    dropouts = {
        name: getattr(model_args, name)
        for name in ("dropout", "attention_dropout", "activation_dropout")
        if getattr(model_args, name) is not None
    }
    if model_args.model_name_or_path:
        return AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path, **dropouts)
    both_stacks = {
        "layers": ("encoder_layers", "decoder_layers"),
        "attention_heads": ("encoder_attention_heads", "decoder_attention_heads"),
        "ffn_dim": ("encoder_ffn_dim", "decoder_ffn_dim"),
        "d_model": ("d_model",),
        "activation_function": ("activation_function",),
        "layer_norm_position": ("layer_norm_position",),
    }
    overrides = dict(dropouts)
    for argument, config_fields in both_stacks.items():
        if getattr(model_args, argument) is not None:
            overrides.update(dict.fromkeys(config_fields, getattr(model_args, argument)))
    if model_args.preset not in ("base", "big"):
        raise SystemExit(f"--preset {model_args.preset!r}: use 'base' or 'big'.")
    make_config = VanillaTransformerConfig.big if model_args.preset == "big" else VanillaTransformerConfig
    config = make_config(
        vocab_size=len(tokenizer),
        share_encoder_decoder_embeddings=model_args.share_embeddings,
        tie_word_embeddings=model_args.share_embeddings,
        **special_token_ids(tokenizer),
        **overrides,
    )
    return VanillaTransformerForConditionalGeneration(config)


def paper_generation_config(args: TranslationTrainingArguments, tokenizer) -> GenerationConfig:
    """§6.1: beam search with beam size 4 and length penalty 0.6, output up to source length + 50."""
    return GenerationConfig(
        num_beams=args.num_beams,
        length_penalty=args.length_penalty,
        max_length_beyond_source=args.max_length_beyond_source,
        early_stopping=True,
        **special_token_ids(tokenizer),
    )


def evaluate_translations(trainer: TranslationTrainer, corpus, tokenized, splits: list[str], target_lang: str) -> dict:
    """Beam-search translations of each split, scored against the untouched reference text."""
    results = {}
    for split in splits:
        prediction = trainer.predict(tokenized[split], metric_key_prefix=split)
        hypotheses = decode(trainer.processing_class, prediction.predictions)
        results[split] = translation_scores(hypotheses, corpus[split]["target"], target_lang)
        results[split]["translations"] = len(hypotheses)
        logger.info("%s: BLEU %.2f, chrF %.2f", split, results[split]["bleu"], results[split]["chrf"])
    return results


def resume_checkpoint(args: TranslationTrainingArguments) -> str | None:
    """--resume_from_checkpoint, else the newest checkpoint already in the output folder (a killed run goes on)."""
    if args.resume_from_checkpoint:
        return args.resume_from_checkpoint
    if Path(args.output_dir).is_dir():
        checkpoint = get_last_checkpoint(args.output_dir)
        if checkpoint:
            logger.info("Resuming from %s", checkpoint)
        return checkpoint
    return None


def epochs_done(checkpoint: str | None) -> float:
    """Epochs already trained when resuming from `checkpoint` (0 for a fresh run)."""
    if checkpoint is None:
        return 0.0
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text())["epoch"] or 0.0


def evaluate_last_and_averaged(trainer: TranslationTrainer, args, corpus, tokenized, target_lang: str) -> dict:
    """{"last": scores per split} and, with --average_checkpoints N, the averaged model's scores (§6.1), which
    then stays loaded in the trainer: the last entry is the model that ships."""
    splits = ["validation", *testing_splits(corpus)]
    trainer.compute_metrics = None  # the final scores are against the raw references (evaluate_translations)
    results = {"last": evaluate_translations(trainer, corpus, tokenized, splits, target_lang)}
    if args.average_checkpoints > 1:
        output_dir = Path(args.output_dir)
        checkpoints = last_checkpoints(output_dir, args.average_checkpoints)
        # Rank 0 writes the averaged folder first; then every rank loads it (evaluation runs on all of them).
        with args.main_process_first(desc="checkpoint averaging"):
            if args.should_save:
                write_averaged_model(checkpoints, output_dir / "averaged")
            averaged = AutoModelForSeq2SeqLM.from_pretrained(output_dir / "averaged")
        trainer.model.load_state_dict(averaged.state_dict())
        label = f"averaged (last {len(checkpoints)})"
        results[label] = evaluate_translations(trainer, corpus, tokenized, splits, target_lang)
    return results


def run_summary(trainer: TranslationTrainer, runtime_s: float, epochs_trained: float, tokenized, results, started):
    """Steps, time, training throughput (real source + target tokens, no padding) and the loss curve."""
    tokens_per_epoch = sum(len(ids) for ids in tokenized["train"]["input_ids"]) + sum(
        len(ids) for ids in tokenized["train"]["labels"]
    )
    return {
        "steps": trainer.state.global_step,
        "epochs": round(trainer.state.epoch or 0, 2),
        "wall_time_s": round(time.time() - started, 1),
        "train_tokens_per_s": round(tokens_per_epoch * epochs_trained / runtime_s),
        "best_validation_bleu": max((r["validation"]["bleu"] for r in results.values()), default=math.nan),
        "shipped_model": list(results)[-1],
        "output_dir": trainer.args.output_dir,
        "loss_history": [
            {"step": log["step"], "loss": log["loss"], "learning_rate": log.get("learning_rate")}
            for log in trainer.state.log_history
            if "loss" in log
        ],
    }


def write_model_folder(trainer: TranslationTrainer, arguments: tuple, corpus, results: dict, summary: dict) -> None:
    """The Hub-ready folder: model, tokenizer, code, generation config, the filled-in card and results.json."""
    model_args, data_args, vocab_args, args = arguments
    output_dir = Path(args.output_dir)
    ship_translation_pipeline(trainer.model, output_dir)
    trainer.save_model(str(output_dir))
    make_tokenizer_config_portable(output_dir)
    config = trainer.model.config.to_diff_dict()
    training = ("max_tokens", "learning_rate", "warmup_steps", "adam_beta1", "adam_beta2", "adam_epsilon")
    vocabulary = "reused" if model_args.model_name_or_path else f"{vocab_args.model_type}, {config['vocab_size']}"
    card = render_model_card(
        repo_id=args.hub_model_id or output_dir.name,
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        dataset=data_args.dataset_name or data_args.data_dir or data_args.train_file,
        results=results[summary["shipped_model"]],
        hyperparameters={
            **{k: v for k, v in config.items() if k not in ("auto_map", "architectures", "custom_pipelines")},
            **{k: getattr(args, k) for k in (*training, "label_smoothing_factor", "seed")},
            "steps": summary["steps"],
            "vocabulary": vocabulary,
        },
        generation={k: getattr(args, k) for k in ("num_beams", "length_penalty", "max_length_beyond_source")},
        example_source=corpus[list(results["last"])[-1]]["source"][0],
    )
    (output_dir / "README.md").write_text(card, encoding="utf-8")
    report = {"summary": summary, "results": results, "arguments": {"data": asdict(data_args)}}
    (output_dir / "results.json").write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")


def main(argv: list[str] | None = None) -> dict:
    arguments = parse_arguments(argv)
    model_args, data_args, vocab_args, args = arguments
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO if args.should_log else logging.WARN
    )
    set_seed(args.seed)
    output_dir = Path(args.output_dir)
    # The finished folder is published once at the end (training.hub); the Trainer would create the repo at start.
    push_to_hub, args.push_to_hub = args.push_to_hub, False
    started = time.time()

    with args.main_process_first(desc="data and vocabulary"):
        corpus = load_parallel_corpus(data_args, args.seed)
        output_dir.mkdir(parents=True, exist_ok=True)
        tokenizer = load_or_train_tokenizer(model_args, vocab_args, corpus, output_dir)
        tokenized = tokenize_corpus(corpus, tokenizer, data_args)

    model = build_model(model_args, tokenizer)
    model.generation_config = paper_generation_config(args, tokenizer)
    if args.learning_rate == 0:
        args.learning_rate = peak_learning_rate(model.config.d_model, int(args.warmup_steps), args.lr_scale)
    logger.info("Model: %s parameters; peak learning rate %.3g", f"{model.num_parameters():,}", args.learning_rate)

    trainer = TranslationTrainer(
        model=model,
        args=args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["validation"],
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        compute_metrics=make_compute_metrics(tokenizer, data_args.target_lang),
    )
    checkpoint = resume_checkpoint(args)
    # Read before training: the Trainer's save_total_limit may delete the checkpoint we resumed from.
    epochs_before = epochs_done(checkpoint)
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    trainer.log_metrics("train", train_result.metrics)

    results = evaluate_last_and_averaged(trainer, args, corpus, tokenized, data_args.target_lang)
    epochs_trained = (trainer.state.epoch or 0) - epochs_before
    summary = run_summary(trainer, train_result.metrics["train_runtime"], epochs_trained, tokenized, results, started)
    if args.should_save:
        write_model_folder(trainer, arguments, corpus, results, summary)
        if push_to_hub:
            logger.info("Published: %s", publish(output_dir, args.hub_model_id or output_dir.name, args.hub_token))
        print_summary(summary, results[summary["shipped_model"]])
    return {"summary": summary, "results": results}


def print_summary(summary: dict, results: dict) -> None:
    lines = [
        f"steps: {summary['steps']} ({summary['epochs']} epochs) in {summary['wall_time_s']:.0f} s",
        f"training tokens/s (source + target, no padding): {summary['train_tokens_per_s']:,}",
        f"best validation BLEU: {summary['best_validation_bleu']:.2f}",
        *(f"{split}: BLEU {s['bleu']:.2f}, chrF {s['chrf']:.2f}" for split, s in results.items()),
        f"model ({summary['shipped_model']}): {summary['output_dir']}",
    ]
    print("\n".join(["", "== training summary ==", *lines]))


def cli() -> None:
    """The console script: data errors end the run with their message (file and line), not a traceback."""
    try:
        main()
    except CorpusError as error:
        raise SystemExit(f"error: {error}") from None


if __name__ == "__main__":
    cli()
