"""Train (or fine-tune), evaluate and package a vanilla Transformer translation model.

vt-train --config training/configs/multi30k_en_de.yaml --data_dir ../shared/data/multi30k

Arguments: `vt-train --help` (model, data, vocabulary and all Seq2SeqTrainingArguments).
The same command runs under `torchrun` or `accelerate launch` on several GPUs or machines.
"""

import functools
import hashlib
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path

import torch
from datasets import Dataset, DatasetDict
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    set_seed,
)

from vanilla_transformer import VanillaTransformerForConditionalGeneration
from vanilla_transformer.folder_checks import numbered_checkpoints
from vanilla_transformer.input_checks import check_tokenizer, vocabulary_record
from vanilla_transformer.pipeline_vanilla_transformer import LOWERCASE_TOKENIZED, shortest_first

from .allocator import reuse_freed_memory
from .arguments import DROPOUTS, ModelArguments, TranslationTrainingArguments, VocabularyArguments, parse_arguments
from .average_checkpoints import last_checkpoints, write_averaged_model
from .batching import TokenBudgetBatchSampler
from .checkpoints import WEIGHTS, newest_complete_checkpoint
from .console import first_line, loading_bars_for, one_line_errors, transformers_bars_off
from .data import (
    CorpusError,
    check_vocabulary_covers,
    column_texts,
    load_parallel_corpus,
    sequence_lengths,
    testing_splits,
    tokenize_corpus,
)
from .folders import first_names, move_files_into, write_folder
from .hub import publish, save_translation_folder
from .loss import TargetVocabulary
from .metrics import check_scoring, decode, make_compute_metrics, translation_scores
from .mkl_kernels import use_mkl_intel_kernels
from .model_card import render_model_card
from .precision import bf16_trains_faster
from .recipe import TranslationTrainer
from .schedule_free import is_schedule_free
from .tokenizer import (
    VOCABULARY_RECORD,
    check_text_preprocessing,
    record_text_preprocessing,
    special_token_ids,
    train_tokenizer,
)

logger = logging.getLogger(__name__)

RESULTS = "results.json"  # the finished run's scores and timings, beside the model (tools.report reads it)
RUN_SETTINGS = "run_settings.json"  # the settings that shape the run, beside its checkpoints
# The training settings that shape the model a run trains (not its length, evaluations or checkpoints: a run may be
# trained on with a larger --max_steps): a rerun that resumes the run's checkpoints must ask for the same.
SHAPING_SETTINGS = (
    "optim",
    "learning_rate",
    "lr_scale",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_steps",
    "max_tokens",
    "gradient_accumulation_steps",
    "label_smoothing_factor",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "weight_decay",
    "max_grad_norm",
    "bpe_dropout",
    "target_vocabulary_softmax",
    "r_drop_alpha",
    "word_dropout",
    "late_dropout_steps",
    "layer_drop",
    "muon",
    "ema_decay",
    "seed",
    "data_seed",
)


def base_model_tokenizer(name: str) -> PreTrainedTokenizerBase:
    """The tokenizer of the model that --model_name_or_path names: a folder (checked with the arguments) or a Hub id,
    the first of whose files is fetched here."""
    try:
        # The recipe's batches are padded on the right whatever side the folder's tokenizer was saved with: its fused
        # and compiled steps give the decoder no padding mask.
        return AutoTokenizer.from_pretrained(name, padding_side="right")
    except OSError as error:
        missing = "no such folder here, nor a model on the Hub"
        raise ValueError(f"--model_name_or_path {name}: {missing} ({first_line(error)})") from None


def load_or_train_tokenizer(
    model_args: ModelArguments, vocab_args: VocabularyArguments, corpus: DatasetDict, output_dir: Path, resuming: bool
) -> PreTrainedTokenizerBase:
    """The fine-tuned model's vocabulary; else the one already in `output_dir` when it was trained with the same
    settings on the same pairs (a resumed run, or another process of this one); else a new one."""
    if model_args.model_name_or_path:  # fine-tuning keeps the model's vocabulary
        return base_model_tokenizer(model_args.model_name_or_path)
    train = corpus["train"]
    record = {"settings": asdict(vocab_args), "training_pairs": train.num_rows, "sha256": pairs_digest(train)}
    saved = output_dir / VOCABULARY_RECORD
    earlier = json.loads(saved.read_text(encoding="utf-8")) if saved.exists() else None
    if earlier == record or (earlier is None and resuming and (output_dir / "tokenizer.json").exists()):
        logger.info("Reusing the vocabulary in %s", output_dir)
        return AutoTokenizer.from_pretrained(output_dir)
    # What of the old vocabulary's run a new vocabulary would orphan or write over.
    trained = "checkpoints" if resuming else "trained model" if (output_dir / WEIGHTS).exists() else None
    if earlier is not None and trained:
        raise CorpusError(
            f"{output_dir / 'tokenizer.json'} was trained with {earlier['settings']} on {earlier['training_pairs']} "
            f"pairs (sha256 {earlier['sha256'][:12]}); this command asks for {record['settings']} on "
            f"{record['training_pairs']} pairs (sha256 {record['sha256'][:12]}), and the {trained} in {output_dir} "
            "belong to the old vocabulary. Use a new --output_dir, or remove the old run to start over."
        )
    tokenizer = train_tokenizer((s for column in ("source", "target") for s in column_texts(train, column)), vocab_args)
    tokenizer.save_pretrained(output_dir)
    saved.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return tokenizer


def run_settings(arguments: tuple) -> dict:
    """The model's and the training's settings that shape a run, as JSON gives them back."""
    model_args, _, _, args = arguments
    settings = {**asdict(model_args), **{name: getattr(args, name) for name in SHAPING_SETTINGS}}
    return json.loads(json.dumps(settings, default=str))


def check_run_settings(output_dir: Path, settings: dict, resuming: bool) -> None:
    """A run resumed from its checkpoints goes on with the settings it was started with: another learning rate,
    batch size or model would train nothing new (a finished run) or mix two runs, and its card would claim the new
    ones. The first process of a new run records them."""
    saved = output_dir / RUN_SETTINGS
    if not resuming:
        saved.write_text(json.dumps(settings, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    if not saved.exists():  # runs from before the record are resumed as they are
        return
    earlier = json.loads(saved.read_text(encoding="utf-8"))
    # A run recorded before a setting existed is checked on the settings it recorded.
    changed = {name: (earlier[name], value) for name, value in settings.items() if earlier.get(name, value) != value}
    if changed:
        listed = ", ".join(f"{name} {old!r} -> {new!r}" for name, (old, new) in changed.items())
        raise OutputFolderError(
            f"{output_dir} holds a run started with other settings ({listed}): resuming it would mix two runs. "
            "Use a new --output_dir, or this run's settings to resume it."
        )


def pairs_digest(pairs: Dataset) -> str:
    """sha256 of a dataset's source and target texts, in order."""
    digest = hashlib.sha256()
    for batch in pairs.select_columns(["source", "target"]).iter(batch_size=10_000):
        for source, target in zip(batch["source"], batch["target"], strict=True):
            digest.update(f"{source}\t{target}\n".encode())
    return digest.hexdigest()


def build_model(model_args: ModelArguments, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    if model_args.model_name_or_path:  # a trained model keeps its architecture; only dropout can change
        dropouts = {k: v for k, v in model_args.config_overrides().items() if k in DROPOUTS}
        with loading_bars_for(model_args.model_name_or_path):
            model = AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path, **dropouts)
        check_tokenizer(model.config, tokenizer, model_args.model_name_or_path)
        return model
    config = model_args.model_config(
        vocab_size=len(tokenizer), trained_vocabulary=vocabulary_record(tokenizer), **special_token_ids(tokenizer)
    )
    return VanillaTransformerForConditionalGeneration(config)


def batch_collator(
    tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel, args: TranslationTrainingArguments
) -> DataCollatorForSeq2Seq:
    """Pads each batch to its longest sentence and adds the decoder inputs. Under torch.compile, lengths go up to a
    multiple of 8: the compiled step then meets a few shapes instead of one per length."""
    return DataCollatorForSeq2Seq(tokenizer, model=model, pad_to_multiple_of=8 if args.torch_compile else None)


def typical_batch(dataset: Dataset, collator: DataCollatorForSeq2Seq, max_tokens: int) -> dict:
    """The middle one of the run's token-budget batches (they are cut from pairs sorted by length), collated: what
    a probe of the step's speed should time."""
    sampler = TokenBudgetBatchSampler(
        sequence_lengths(dataset, "input_ids"), sequence_lengths(dataset, "labels"), max_tokens
    )
    pairs = dataset.select_columns(["input_ids", "labels"]).select(sampler.batches[len(sampler) // 2])
    return collator(list(pairs))


def paper_generation_config(args: TranslationTrainingArguments, tokenizer: PreTrainedTokenizerBase) -> GenerationConfig:
    """§6.1: beam search with beam size 4 and length penalty 0.6, output up to source length + 50."""
    return GenerationConfig(
        num_beams=args.num_beams,
        length_penalty=args.length_penalty,
        max_length_beyond_source=args.max_length_beyond_source,
        early_stopping=True,
        **special_token_ids(tokenizer),
    )


def source_order(split: Dataset) -> list[int]:
    """The rows of a tokenized split, shortest source first: evaluated so, a batch holds sentences of like length and
    finishes sooner (the scores do not depend on the order)."""
    return shortest_first(sequence_lengths(split, "input_ids"))


def evaluate_translations(
    trainer: TranslationTrainer, corpus: DatasetDict, tokenized: DatasetDict, splits: list[str], target_lang: str
) -> dict:
    """Beam-search translations of each split, scored against the untouched reference text."""
    results = {}
    for split in splits:
        order = source_order(tokenized[split])
        prediction = trainer.predict(tokenized[split].select(order), metric_key_prefix=split)
        hypotheses = decode(trainer.processing_class, prediction.predictions)
        references = corpus[split]["target"]
        results[split] = translation_scores(hypotheses, [references[row] for row in order], target_lang)
        results[split]["translations"] = len(hypotheses)
        logger.info("%s: BLEU %.2f, chrF %.2f", split, results[split]["bleu"], results[split]["chrf"])
    return results


class OutputFolderError(ValueError):
    """--output_dir holds files that this run would write over and that are not an earlier run's."""


def run_report(folder: Path) -> dict | None:
    """The results.json that a run of this script wrote in `folder` (a JSON object with its summary and results);
    None where there is none, or where the file is somebody else's."""
    try:
        report = json.loads((folder / RESULTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and {"summary", "results"} <= set(report) else None


def check_output_folder(output_dir: Path, base_model: str | None) -> None:
    """Refuse an --output_dir where the run would write over what is not its own: the model folder being fine-tuned,
    or a folder that holds something but no mark of a run of this script (the vocabulary record, a checkpoint,
    results.json). The run writes README.md, config.json, tokenizer.json and others there, over files of those
    names; an earlier run's folder is resumed or finished again, an empty one filled."""
    if base_model and Path(base_model).is_dir() and Path(base_model).resolve() == output_dir.resolve():
        raise OutputFolderError(
            f"--output_dir {output_dir} is the model that --model_name_or_path fine-tunes: the run would write over "
            "it. Choose another folder."
        )
    if not output_dir.is_dir():  # new (a file is refused with the arguments: training.arguments.check_folders)
        return
    entries = sorted(entry.name for entry in output_dir.iterdir())
    if not entries or VOCABULARY_RECORD in entries or numbered_checkpoints(output_dir) or run_report(output_dir):
        return
    raise OutputFolderError(
        f"--output_dir {output_dir} holds files that are not a training run's ({first_names(entries)}), and the run "
        "would write its own over those of the same names (README.md, config.json, tokenizer.json, ...). Choose a "
        "new or empty folder, or an earlier run's folder to resume it."
    )


def resume_checkpoint(args: TranslationTrainingArguments) -> str | None:
    """--resume_from_checkpoint, else the newest complete checkpoint already in the output folder (a killed run goes
    on; a checkpoint it was writing when killed is passed over)."""
    if args.resume_from_checkpoint:
        return args.resume_from_checkpoint
    checkpoint = newest_complete_checkpoint(Path(args.output_dir))
    if checkpoint is not None:
        logger.info("Resuming from %s", checkpoint)
        return str(checkpoint)
    return None


def trained_model_label(trainer: TranslationTrainer) -> str:
    """What the trainer holds when training ends: the last step's weights, or with --load_best_model_at_end the
    checkpoint that validated best, which the Trainer loaded back."""
    best = trainer.state.best_model_checkpoint
    return f"best ({Path(best).name})" if trainer.args.load_best_model_at_end and best else "last"


def evaluate_last_and_averaged(
    trainer: TranslationTrainer,
    args: TranslationTrainingArguments,
    corpus: DatasetDict,
    tokenized: DatasetDict,
    target_lang: str,
) -> dict:
    """{"last" (or "best (checkpoint-N)"): scores per split}, with --average_checkpoints N the averaged model's scores
    (§6.1), and with --ema_decay the exponential average's; the last of them then stays loaded in the trainer: the
    last entry is the model that ships. With --test_every_model false the others are scored on validation only."""
    splits = ["validation", *testing_splits(corpus)]
    averaging, exponential = args.average_checkpoints > 1, trainer.exponential_average is not None
    trainer.compute_metrics = None  # the final scores are against the raw references (evaluate_translations)

    def scores(ships: bool) -> dict:
        # The models that do not ship are compared on validation; their test scores only inform.
        scored = splits if ships or args.test_every_model else splits[:1]
        return evaluate_translations(trainer, corpus, tokenized, scored, target_lang)

    results = {trained_model_label(trainer): scores(ships=not (averaging or exponential))}
    if averaging:
        output_dir = Path(args.output_dir)
        checkpoints = last_checkpoints(output_dir, args.average_checkpoints)
        # Rank 0 writes the averaged folder first; then every rank loads it (evaluation runs on all of them).
        with args.main_process_first(desc="checkpoint averaging"):
            if args.should_save:
                write_averaged_model(checkpoints, output_dir / "averaged")
            averaged = AutoModelForSeq2SeqLM.from_pretrained(output_dir / "averaged")
        trainer.model.load_state_dict(averaged.state_dict())
        results[f"averaged (last {len(checkpoints)})"] = scores(ships=not exponential)
    if exponential:
        trainer.model.load_state_dict(trainer.exponential_average.weights())
        results["exponential average"] = scores(ships=True)
    return results


def run_summary(
    trainer: TranslationTrainer, runtime_s: float, tokenized: DatasetDict, results: dict, started: float
) -> dict:
    """Steps, time, training throughput (real source + target tokens, no padding) and the loss curve. A resumed run
    counts the training time of the processes before it (from the clock its checkpoint logged)."""
    train = tokenized["train"]
    tokens_per_epoch = sum(sum(sequence_lengths(train, column)) for column in ("input_ids", "labels"))
    trained_before_s = trainer.clock[1]
    return {
        "steps": trainer.state.global_step,
        "epochs": round(trainer.state.epoch or 0, 2),
        "wall_time_s": round(trained_before_s + time.time() - started, 1),
        "train_tokens_per_s": round(tokens_per_epoch * (trainer.state.epoch or 0) / (trained_before_s + runtime_s)),
        "validation_bleu": {model: r["validation"]["bleu"] for model, r in results.items()},
        "shipped_model": list(results)[-1],
        "output_dir": trainer.args.output_dir,
        "loss_history": [
            {"step": log["step"], "loss": log["loss"], "learning_rate": log.get("learning_rate")}
            for log in trainer.state.log_history
            if "loss" in log
        ],
    }


def optimizer_name(args: TranslationTrainingArguments) -> str:
    """The optimizer as the card names it: the paper's Adam, a schedule-free one (`--optim schedule_free_adamw`), or
    Muon with Adam (`--muon`)."""
    adam = f"({args.adam_beta1}, {args.adam_beta2}, {args.adam_epsilon})"
    if is_schedule_free(args.optim):
        return f"{args.optim.value}{adam}, schedule-free (Defazio et al., 2024)"
    if args.muon:
        return f"Muon (Jordan et al., 2024) for the layers' matrices, Adam{adam} for the rest"
    return f"Adam{adam}"


def schedule_description(args: TranslationTrainingArguments) -> str:
    """The rate's schedule as the card names it: transformers' name, and the arguments given to it."""
    given = ", ".join(f"{name} {value}" for name, value in (args.lr_scheduler_kwargs or {}).items())
    return f"{args.schedule_name} ({given})" if given else args.schedule_name


def card_settings(arguments: tuple, config: dict) -> dict[str, object]:
    """The settings of this run that shaped the model, as its card lists them."""
    model_args, _, vocab_args, args = arguments
    vocabulary = "the fine-tuned model's" if model_args.model_name_or_path else f"{vocab_args.model_type}, joint"
    settings = {
        "fine-tuned from": model_args.model_name_or_path,
        "vocabulary": f"{vocabulary}, {config['vocab_size']:,} tokens",
        "dropout": config["dropout"],
        "tokens per batch and side": args.max_tokens,
        "batches": "regrouped every epoch" if args.regroup_batches else None,
        "curriculum": f"shortest pairs first for {args.curriculum_steps:,} steps" if args.curriculum_steps else None,
        "optimizer": optimizer_name(args),
        "weight decay": args.weight_decay or None,
        "learning rate": f"{args.learning_rate:.3g} at its peak, after {int(args.warmup_steps):,} warmup steps",
        "schedule": schedule_description(args),
        "label smoothing": args.label_smoothing_factor,
        "softmax": "over the tokens of the training targets" if args.target_vocabulary_softmax else None,
        "BPE-dropout": args.bpe_dropout or None,
        "R-Drop alpha": args.r_drop_alpha or None,
        "word dropout": args.word_dropout or None,
        "late dropout": f"none for the first {args.late_dropout_steps:,} steps" if args.late_dropout_steps else None,
        "LayerDrop": args.layer_drop or None,
        "checkpoints averaged": args.average_checkpoints if args.average_checkpoints > 1 else None,
        "exponential average of the weights": f"decay {args.ema_decay}" if args.ema_decay else None,
        "seed": args.seed,
        "seed of the batches' order": args.data_seed,
    }
    return {name: value for name, value in settings.items() if value is not None}


def write_model_folder(
    trainer: TranslationTrainer, arguments: tuple, corpus: DatasetDict, results: dict, summary: dict
) -> None:
    """The Hub-ready folder: model, tokenizer, code, generation config, the filled-in card and results.json."""
    model_args, data_args, vocab_args, args = arguments
    output_dir = Path(args.output_dir)
    trainer.model.config.use_cache = True  # the Trainer turned the cache off for training; the model decodes with it
    config = trainer.model.config.to_dict()
    card = render_model_card(
        repo_id=args.hub_model_id or output_dir.name,
        source_lang=data_args.source_lang,
        target_lang=data_args.target_lang,
        dataset=data_args.data_source,
        hub_dataset=bool(data_args.dataset_name),
        config=config,
        parameters=trainer.model.num_parameters(),
        settings=card_settings(arguments, config),
        summary=summary,
        results=results[summary["shipped_model"]],
        generation={k: getattr(args, k) for k in ("num_beams", "length_penalty", "max_length_beyond_source")},
        example_source=corpus[list(results[summary["shipped_model"]])[-1]]["source"][0],
        # The model then reads and writes that text (e.g. lowercased and tokenized): the card must say so.
        text_preprocessing="lowercased, Moses-tokenized" if data_args.preprocess == LOWERCASE_TOKENIZED else None,
    )
    report = {"summary": summary, "results": results, "arguments": {"data": asdict(data_args), "seed": args.seed}}

    def write(folder: Path) -> None:
        save_translation_folder(trainer.model, trainer.processing_class, folder)
        (folder / "README.md").write_text(card, encoding="utf-8")
        (folder / RESULTS).write_text(json.dumps(report, indent=2, ensure_ascii=False), encoding="utf-8")

    # A kill while writing (a full disk, kill -9) leaves the run folder's files whole, so that a rerun of the same
    # command reads its vocabulary and finishes; results.json, what marks the run finished, comes last.
    write_folder(output_dir, write, functools.partial(move_files_into, last=RESULTS))


def prepare_run(arguments: tuple, checkpoint: str | None) -> tuple:
    """The run's pairs, vocabulary, model and trainer, ready to train: (corpus, tokenized corpus, trainer)."""
    model_args, data_args, vocab_args, args = arguments
    output_dir = Path(args.output_dir)
    with args.main_process_first(desc="data and vocabulary"):
        check_output_folder(output_dir, model_args.model_name_or_path)  # the first process checks before it writes
        corpus = load_parallel_corpus(data_args, args.seed)
        output_dir.mkdir(parents=True, exist_ok=True)
        tokenizer = load_or_train_tokenizer(model_args, vocab_args, corpus, output_dir, resuming=checkpoint is not None)
        if model_args.model_name_or_path:
            check_text_preprocessing(tokenizer, data_args.preprocess, model_args.model_name_or_path)
        if args.should_save:
            check_run_settings(output_dir, run_settings(arguments), resuming=checkpoint is not None)
        record_text_preprocessing(tokenizer, data_args.preprocess, data_args.source_lang, data_args.target_lang)
        tokenized = tokenize_corpus(corpus, tokenizer, data_args)
        if model_args.model_name_or_path:
            check_vocabulary_covers(tokenized["train"], tokenizer, data_args, model_args.model_name_or_path)

    model = build_model(model_args, tokenizer)
    # A fine-tuned model trained with --target_vocabulary_softmax keeps the tokens it writes (the recipe adds the new
    # targets' own); a new model narrows nothing.
    written = TargetVocabulary.of_generation_config(model.generation_config, model.config.vocab_size)
    model.generation_config = paper_generation_config(args, tokenizer)
    if written is not None:
        written.narrow(model.generation_config)
    if args.learning_rate == 0:
        args.learning_rate = args.paper_learning_rate(model.config.d_model)
    logger.info("Model: %s parameters; peak learning rate %.3g", f"{model.num_parameters():,}", args.learning_rate)
    collator = batch_collator(tokenizer, model, args)
    if args.bf16 is None:  # no flag: bf16 where a timed step of this model on this machine is faster
        probe_batch = functools.partial(typical_batch, tokenized["train"], collator, args.max_tokens)
        args.set_bf16(bf16_trains_faster(model, probe_batch))
    logger.info("Precision: %s", "bf16 autocast" if args.bf16 else "fp32")

    trainer = TranslationTrainer(
        model=model,
        args=args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["validation"].select(source_order(tokenized["validation"])),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=make_compute_metrics(tokenizer, data_args.target_lang),
    )
    logger.info(
        "Output layer and loss: %s",
        "fused (--fused_output_loss)" if trainer.fuse_output_loss else "one after the other",
    )
    masks = "random bits (--random_bits_dropout)" if trainer.random_bits_dropout else "torch's bernoulli_"
    logger.info("Dropout's masks: %s", masks)
    if trainer.target_vocabulary is not None:
        kept, vocab_size = len(trainer.target_vocabulary.ids), trainer.target_vocabulary.vocab_size
        logger.info("Softmax: over %s of the %s tokens (--target_vocabulary_softmax)", f"{kept:,}", f"{vocab_size:,}")
    step = "CUDA graphs, one per batch shape (--cuda_graphs)" if trainer.graphed_steps else "eager"
    logger.info("Training step: %s", step)
    return corpus, tokenized, trainer


def configure_process(args: TranslationTrainingArguments) -> None:
    """The process-wide settings a run trains under: MKL's Intel kernels on an AMD CPU (before the first matrix
    product, where MKL makes its choice), freed memory kept by malloc, subnormal floats read as zero."""
    if args.mkl_intel_kernels and use_mkl_intel_kernels():
        logger.info("Matrix products: MKL's Intel kernels on this AMD CPU (--mkl_intel_kernels)")
    if args.reuse_freed_memory and reuse_freed_memory():
        logger.info("Memory freed by a training step is kept for the next (glibc malloc: no mmap, no trimming)")
    torch.set_flush_denormal(args.flush_denormal)  # x86 CPUs only; elsewhere it changes nothing


def main(argv: list[str] | None = None) -> dict:
    arguments = parse_arguments(argv)
    _, data_args, _, args = arguments
    logging.basicConfig(
        format="%(asctime)s %(name)s: %(message)s", level=logging.INFO if args.should_log else logging.WARN
    )
    configure_process(args)
    set_seed(args.seed)
    check_scoring(data_args.target_lang)
    output_dir = Path(args.output_dir)
    # The finished folder is published once at the end (training.hub); the Trainer would create the repo at start.
    push_to_hub, args.push_to_hub = args.push_to_hub, False
    started = time.time()
    checkpoint = resume_checkpoint(args)

    corpus, tokenized, trainer = prepare_run(arguments, checkpoint)
    # Each checkpoint written and model folder read would show transformers' bar among the Trainer's own lines.
    with transformers_bars_off():
        train_result = trainer.train(resume_from_checkpoint=checkpoint)
        trainer.log_metrics("train", train_result.metrics)
        results = evaluate_last_and_averaged(trainer, args, corpus, tokenized, data_args.target_lang)
        summary = run_summary(trainer, train_result.metrics["train_runtime"], tokenized, results, started)
        if args.should_save:
            write_model_folder(trainer, arguments, corpus, results, summary)
            print_summary(summary, results[summary["shipped_model"]])  # first: an upload can fail
    if args.should_save and push_to_hub:  # the upload's own bar shows
        logger.info("Published: %s", publish(output_dir, args.hub_model_id or output_dir.name, args.hub_token))
    return {"summary": summary, "results": results}


def print_summary(summary: dict, results: dict) -> None:
    lines = [
        f"steps: {summary['steps']} ({summary['epochs']} epochs) in {summary['wall_time_s']:.0f} s",
        f"training tokens/s (source + target, no padding): {summary['train_tokens_per_s']:,}",
        "validation BLEU: " + ", ".join(f"{model} {bleu:.2f}" for model, bleu in summary["validation_bleu"].items()),
        *(f"{split}: BLEU {s['bleu']:.2f}, chrF {s['chrf']:.2f}" for split, s in results.items()),
        f"model ({summary['shipped_model']}): {summary['output_dir']}",
    ]
    print("\n".join(["", "== training summary ==", *lines]))


# The console script: data, folder and OS errors end the run in one line that names them, not a traceback.
cli = one_line_errors(main)


if __name__ == "__main__":
    cli()
