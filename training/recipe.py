"""The paper's training recipe (§5) as a `Seq2SeqTrainer`: token-budget batches, label smoothing (R-Drop as an
option) as the Trainer's `compute_loss_func` (on a CPU fused with the output layer, `--fused_output_loss`; on a GPU
recorded with the whole step as CUDA graphs, `--cuda_graphs`), a wall-clock limit, and evaluation metrics computed on
exactly the evaluation set. Adam(0.9, 0.98, 1e-9), the warmup / inverse-sqrt rate and dropout are plain Trainer and
model settings (see `arguments.TranslationTrainingArguments`; on a CPU dropout's masks come from random bits,
`--random_bits_dropout`); late dropout (`--late_dropout_steps`), LayerDrop (`--layer_drop`), an exponential
average of the weights (`--ema_decay`) and the checkpoints of a schedule-free optimizer (`--optim schedule_free_adamw`)
are callbacks, and Muon for the layers' matrices (`--muon`) the Trainer's optimizer factory."""

import copy
import logging
import time

import pyarrow as pa
import torch
from torch import nn
from torch.utils.data import DataLoader
from transformers import (
    PreTrainedModel,
    SchedulerType,
    Seq2SeqTrainer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
)
from transformers.trainer_utils import EvalLoopOutput

from vanilla_transformer import VanillaTransformerForConditionalGeneration

from .arguments import TranslationTrainingArguments
from .batching import TokenBudgetBatchSampler
from .cuda_graphs import GraphedSteps
from .data import TEXT_COLUMNS, column_values, distinct_token_ids, first_token_outside, row_lengths, token_columns
from .dropout import swap_dropout
from .exponential_average import ExponentialAverage
from .late_dropout import LateDropout
from .layer_drop import LayerDrop
from .loss import (
    LabelSmoothedCrossEntropy,
    PairsTwice,
    RDropLoss,
    TargetVocabulary,
    fused_output_cross_entropy_sum,
    per_label,
)
from .muon import MuonForMatrices
from .schedule_free import ScheduleFreeAverage, is_schedule_free
from .subword_regularization import BpeDropoutPairs
from .word_dropout import WordDropout

logger = logging.getLogger(__name__)


def check_token_ids_fit(columns: dict[str, pa.ListArray], vocab_size: int) -> None:
    """Every token id of the training pairs' tokenized columns (token_columns) names a row of the model's embedding.
    Checked once, here, rather than at every step: on a GPU, reading the ids of a batch makes the host wait for the
    device (as the model's input checks say)."""
    for column, rows in columns.items():
        outside = first_token_outside(rows, vocab_size)
        if outside is not None:
            row, token = outside
            raise ValueError(
                f"Training pair {row}: token id {token} in {column} is outside the model's vocabulary "
                f"(ids must be in [0, {vocab_size - 1}]): the tokenizer and the model do not match."
            )


def flag_or_default(flag: bool | None, clash: str | None) -> bool:
    """An option's flag as given, refused with the reason where it clashes with the run; by default (None) on
    where nothing clashes."""
    if flag and clash:
        raise ValueError(clash)
    return clash is None if flag is None else flag


def with_decoder_inputs(model: PreTrainedModel, inputs: dict) -> dict:
    """A copy of the batch with the decoder's inputs, made from the labels where the collator left them out (as the
    model's forward does)."""
    inputs = dict(inputs)
    if "decoder_input_ids" not in inputs:
        inputs["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(inputs["labels"])
    return inputs


class StartClock(TrainerCallback):
    """Starts the trainer's wall clock when training begins, from the time logged in the checkpoint if resumed."""

    def __init__(self, trainer: "TranslationTrainer"):
        self.trainer = trainer

    def on_train_begin(
        self, args: TranslationTrainingArguments, state: TrainerState, control: TrainerControl, **kwargs
    ) -> None:
        before = [entry["elapsed_s"] for entry in state.log_history if "elapsed_s" in entry]
        self.trainer.clock = (time.time(), before[-1] if before else 0.0)


class WarnOfAnUnfinishedWarmup(TrainerCallback):
    """Warns before the first step when the run ends inside its warmup, so that its rate never reaches its peak: the
    paper's 4,000 warmup steps over the Trainer's default 3 epochs of a small corpus are such a run."""

    def on_train_begin(
        self, args: TranslationTrainingArguments, state: TrainerState, control: TrainerControl, **kwargs
    ) -> None:
        warmup = args.get_warmup_steps(state.max_steps)
        # A constant rate has no warmup to finish, but a schedule-free optimizer warms up under it.
        no_warmup = args.schedule_name == SchedulerType.CONSTANT.value and not is_schedule_free(args.optim)
        if warmup < state.max_steps or no_warmup:
            return
        epochs = f"--num_train_epochs {args.num_train_epochs:g}"
        length = f"--max_steps {args.max_steps}" if args.max_steps > 0 else epochs
        logger.warning(
            "The run's %s steps (%s) end inside its %s warmup steps: its rate reaches %.0f%% of its peak, and the "
            "model will learn little. Give it more steps than --warmup_steps, or fewer warmup steps, or start from a "
            "shipped config fitted to a corpus of its size (--config tatoeba_en_zh for some 30,000 short pairs).",
            f"{state.max_steps:,}", length, f"{warmup:,}", 100 * state.max_steps / warmup,
        )  # fmt: skip


class StopAtTimeLimit(TrainerCallback):
    """Ends training once `args.max_train_minutes` of training wall time have passed (a resumed run counts the time
    before its checkpoint), with a checkpoint at that step: a time budget whatever the machine's speed. The
    inverse-sqrt rate does not depend on the number of steps, so stopping early leaves the schedule as it was.

    The clock is read at logging steps only, where the processes of a multi-GPU run agree on it (one small
    all-reduce): a process that stopped alone would leave the others waiting for it forever."""

    def __init__(self, trainer: "TranslationTrainer"):
        self.trainer = trainer

    def on_step_end(
        self, args: TranslationTrainingArguments, state: TrainerState, control: TrainerControl, **kwargs
    ) -> None:
        if not args.max_train_minutes or state.global_step % max(1, state.logging_steps):
            return
        expired = torch.tensor(float(self.trainer.elapsed_s() >= 60 * args.max_train_minutes))
        if self.trainer.accelerator.reduce(expired.to(self.trainer.accelerator.device), reduction="sum") > 0:
            control.should_training_stop = True
            control.should_save = True


class TranslationTrainer(Seq2SeqTrainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock = (time.time(), 0.0)  # (when this process began training, seconds trained before a resume)
        self.add_callback(StartClock(self))
        self.add_callback(StopAtTimeLimit(self))
        self.add_callback(WarnOfAnUnfinishedWarmup())
        if is_schedule_free(self.args.optim):  # after StopAtTimeLimit, which can ask for a checkpoint
            self.add_callback(ScheduleFreeAverage())
        if self.args.late_dropout_steps:
            self.add_callback(LateDropout(self.args.late_dropout_steps))
        # The average of the weights (--ema_decay), after StopAtTimeLimit, which can ask for a checkpoint.
        self.exponential_average = ExponentialAverage(self.args.ema_decay) if self.args.ema_decay else None
        if self.exponential_average is not None:
            self.add_callback(self.exponential_average)
        if self.args.layer_drop:
            self.add_callback(LayerDrop(self.args.layer_drop))
        if self.args.muon and self.optimizer_cls_and_kwargs is None:
            _, adamw_kwargs = self.get_optimizer_cls_and_kwargs(self.args, self.model)
            # The Trainer passes weight decay in its parameter groups, not these kwargs: else AdamW's 0.01 would apply.
            self.optimizer_cls_and_kwargs = (MuonForMatrices, {**adamw_kwargs, "weight_decay": self.args.weight_decay})
        if self.args.target_vocabulary_softmax and self.compute_loss_func is not None:
            raise ValueError("--target_vocabulary_softmax restricts this recipe's loss, not another compute_loss_func.")
        self.target_vocabulary = self.training_target_vocabulary() if self.args.target_vocabulary_softmax else None
        if self.target_vocabulary is not None:
            self.target_vocabulary.narrow(self.model.generation_config)
        if self.compute_loss_func is None:
            # §5.4: cross_entropy smooths fused, where the Trainer's LabelSmoother would materialise -log_softmax over
            # every logit of the batch.
            epsilon, alpha = self.args.label_smoothing_factor, self.args.r_drop_alpha
            vocabulary = self.target_vocabulary
            self.compute_loss_func = (
                RDropLoss(epsilon, alpha, vocabulary) if alpha else LabelSmoothedCrossEntropy(epsilon, vocabulary)
            )
            self.label_smoother = None
        self.fuse_output_loss = self.fused_output_loss_applies()
        self.random_bits_dropout = flag_or_default(self.args.random_bits_dropout, self.args.random_bits_dropout_clash())
        if self.random_bits_dropout:
            swap_dropout(self.model)
        self.graphed_steps = GraphedSteps(self.compute_loss_func) if self.cuda_graphs_apply() else None

    def training_target_vocabulary(self) -> TargetVocabulary:
        """The tokens of the training targets (`--target_vocabulary_softmax`), whose softmax the loss computes, and
        where the model's generation config already narrows its softmax (a fine-tune of a model trained so), the
        tokens it writes: a fine-tune on a small corpus keeps the others it could write."""
        if self.train_dataset is None:
            raise ValueError("--target_vocabulary_softmax reads the training targets: there is no train_dataset.")
        vocab_size = self.model.get_output_embeddings().weight.shape[0]
        targets = TargetVocabulary.of_labels(distinct_token_ids(self.train_dataset, "labels"), vocab_size)
        written = TargetVocabulary.of_generation_config(self.model.generation_config, vocab_size)
        if written is None:
            return targets
        return TargetVocabulary([*targets.ids.tolist(), *written.ids.tolist()], vocab_size)

    def fused_output_loss_applies(self) -> bool:
        """--fused_output_loss as given, or by default wherever nothing clashes with it: the arguments' clashes, and
        a model other than this package's, whose logits may hold more than the tied output layer (Marian's add a
        bias)."""
        clash = self.args.fused_output_loss_clash()
        if not (clash or isinstance(self.model, VanillaTransformerForConditionalGeneration)):
            name = type(self.model).__name__
            clash = f"--fused_output_loss computes this package's output layer, not {name}'s: leave it out."
        return flag_or_default(self.args.fused_output_loss, clash)

    def cuda_graphs_apply(self) -> bool:
        """--cuda_graphs as given, or by default wherever nothing clashes with it: the arguments' clashes, a model
        other than this package's, whose forward may wait on the GPU (which a recording cannot), and a
        `compute_loss_func` other than this recipe's, whose summed loss the graphs record."""
        clash = self.args.cuda_graphs_clash()
        if not (clash or isinstance(self.model, VanillaTransformerForConditionalGeneration)):
            clash = f"--cuda_graphs records this package's model, not {type(self.model).__name__}: leave it out."
        if not (clash or isinstance(self.compute_loss_func, LabelSmoothedCrossEntropy)):
            clash = "--cuda_graphs records this recipe's losses, not another compute_loss_func: leave it out."
        return flag_or_default(self.args.cuda_graphs, clash)

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict,
        return_outputs: bool = False,
        num_items_in_batch: int | torch.Tensor | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, object]:
        if model.training and not return_outputs:
            if self.graphed_steps:
                total = self.graphed_steps.summed_loss(model, with_decoder_inputs(model, inputs))
                if total is not None:  # None: a batch shape that found no room on the GPU, run eagerly
                    return per_label(total, inputs["labels"], num_items_in_batch)
            if self.fuse_output_loss:
                return self.fused_output_loss(model, inputs, num_items_in_batch)
        return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    def fused_output_loss(
        self, model: PreTrainedModel, inputs: dict, num_items_in_batch: int | torch.Tensor | None
    ) -> torch.Tensor:
        """§5.4's loss per label, with the output layer computed inside the fused loss (`--fused_output_loss`)."""
        inputs = with_decoder_inputs(model, inputs)
        labels = inputs.pop("labels")
        # The decoder's last hidden states (B, T, d_model) without the output layer, which the fused loss computes;
        # in --bf16's autocast, which Accelerate wraps around the model's forward only, not around model.model.
        with self.accelerator.autocast():
            hidden = model.model(**inputs).last_hidden_state
        weight = model.get_output_embeddings().weight  # (V, d_model), tied to the embeddings (§3.4)
        places = labels
        if self.target_vocabulary is not None:  # (V', d_model) rows and the labels' places among them
            weight, places = self.target_vocabulary.select(weight, labels, dim=0)
        total = fused_output_cross_entropy_sum(hidden, weight, places, self.args.label_smoothing_factor)
        return per_label(total, labels, num_items_in_batch)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """Every log entry gets `elapsed_s`, the wall-clock seconds since training began, so that loss and BLEU can
        be drawn against time (the Trainer's entries carry only the step). A resumed run goes on from the clock of
        its checkpoint."""
        logs["elapsed_s"] = round(self.elapsed_s(), 1)
        super().log(logs, start_time)

    def elapsed_s(self) -> float:
        """Seconds of training wall time, those before a resume included."""
        started, offset = self.clock
        return offset + time.time() - started

    def _run_epoch(self, *args, **kwargs):
        # transformers' epoch loop asks whether to stop only after a step: a run resumed from its last checkpoint
        # (killed during its final evaluation, or run again) trained one step more than --max_steps, mid-epoch, and
        # averaged that step into the model it shipped; past its time limit, up to --logging_steps more.
        if self.finished_before_this_process():
            self.control.should_training_stop = True
            return None
        return super()._run_epoch(*args, **kwargs)

    def finished_before_this_process(self) -> bool:
        """At --max_steps, or past --max_train_minutes with the time the checkpoint logged (the same on every
        process, so they agree without talking)."""
        trained_before_s = self.clock[1]
        out_of_time = self.args.max_train_minutes and trained_before_s >= 60 * self.args.max_train_minutes
        return self.state.global_step >= self.state.max_steps or bool(out_of_time)

    def get_train_dataloader(self) -> DataLoader:
        """Batches of about `args.max_tokens` padded tokens per side instead of a fixed number of sentences (input words
        blanked with word dropout, each pair twice with R-Drop)."""
        dataset = self.train_dataset
        columns = token_columns(dataset)
        check_token_ids_fit(columns, self.model.get_input_embeddings().num_embeddings)
        sampler = TokenBudgetBatchSampler(
            row_lengths(columns["input_ids"]),
            row_lengths(columns["labels"]),
            self.args.max_tokens,
            self.args.seed if self.args.data_seed is None else self.args.data_seed,  # the Trainer's rule
            regroup=self.args.regroup_batches,
            curriculum_steps=self.args.curriculum_steps,
            batches_per_step=self.args.world_size * self.args.gradient_accumulation_steps,
        )
        text = [column for column in TEXT_COLUMNS if column in dataset.column_names]
        if self.args.bpe_dropout:
            if len(text) < len(TEXT_COLUMNS):
                raise ValueError(f"--bpe_dropout segments the training text anew: the dataset has no {TEXT_COLUMNS}.")
            dropout = self.args.bpe_dropout
            sources, targets = column_values(dataset, "source"), column_values(dataset, "target")
            dataset = BpeDropoutPairs(sources, targets, self.processing_class, dropout, sampler)
        else:
            dataset = self._remove_unused_columns(dataset.remove_columns(text), description="training")
        collate = self.data_collator
        if self.args.word_dropout:
            collate = WordDropout(collate, self.args.word_dropout, self.processing_class)
        workers = self.args.dataloader_num_workers
        loader = DataLoader(
            dataset,
            batch_sampler=sampler,
            collate_fn=PairsTwice(collate) if self.args.r_drop_alpha else collate,  # R-Drop: the same blanks twice
            num_workers=workers,
            pin_memory=self.args.dataloader_pin_memory and torch.cuda.is_available(),
            persistent_workers=workers > 0 and self.args.dataloader_persistent_workers,
            prefetch_factor=self.args.dataloader_prefetch_factor if workers > 0 else None,
        )
        # Under several processes accelerate shards the batches: rank r gets batches r, r + n, r + 2n, ...
        return self.accelerator.prepare(loader)

    def evaluation_loop(self, *args, **kwargs) -> EvalLoopOutput:
        # Seq2SeqTrainer gathers generated tokens with a plain `gather`, which repeats samples to even out the
        # processes' shares; `gather_for_metrics` drops those repeats, so BLEU is on exactly the evaluation set.
        self.gather_function = self.accelerator.gather_for_metrics
        return super().evaluation_loop(*args, **kwargs)

    def prediction_step(
        self,
        model: nn.Module,
        inputs: dict,
        prediction_loss_only: bool,
        ignore_keys: list[str] | None = None,
        **gen_kwargs,
    ) -> tuple[float | None, torch.Tensor | None, torch.Tensor | None]:
        # Seq2SeqTrainer writes GenerationConfig's defaults (max_length=20, ...) into the model's own generation
        # config after every batch; every checkpoint and the final folder would then save them as the model's choice.
        generation_config = copy.deepcopy(self.model.generation_config)
        try:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys, **gen_kwargs)
        finally:
            self.model.generation_config = generation_config
