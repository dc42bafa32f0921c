"""The paper's recipe: token-budget batches, the learning-rate schedule, metrics."""

import copy
import random
import re

import pytest
import sacrebleu
import torch
from datasets import Dataset
from transformers import GenerationConfig, TrainerCallback

from vanilla_transformer.training.batching import TokenBudgetBatchSampler
from vanilla_transformer.training.metrics import translation_scores


# Batching ---------------------------------------------------------------------------------------------------------
def random_lengths(count: int, seed: int = 0) -> tuple[list[int], list[int]]:
    rng = random.Random(seed)
    return [rng.randint(3, 60) for _ in range(count)], [rng.randint(3, 70) for _ in range(count)]


@pytest.mark.parametrize("max_tokens", [64, 500, 4096])
def test_no_batch_over_budget_and_every_example_once_per_epoch(max_tokens):
    source, target = random_lengths(1000)
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=max_tokens, seed=1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(1000))
        for batch in batches:
            padded = len(batch) * max(max(source[i] for i in batch), max(target[i] for i in batch))
            assert padded <= max_tokens or len(batch) == 1


def test_batches_group_similar_lengths_and_epochs_reorder_them():
    source, target = random_lengths(2000)
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1)
    real = sum(source) + sum(target)
    padded = sum(len(b) * (max(source[i] for i in b) + max(target[i] for i in b)) for b in sampler)
    assert real / padded > 0.7  # source sides are sorted; target sides pad more
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert first != second and sorted(map(tuple, first)) == sorted(map(tuple, second))
    again = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1)
    again.set_epoch(1)
    assert list(again) == second  # a resumed run sees the same batches in the same order


def test_regrouped_batches_keep_their_shapes_and_change_their_pairs_every_epoch():
    source, target = random_lengths(2000)
    fixed = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1)
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1, regroup=True)
    assert sampler.batches == fixed.batches  # epoch 0 is the plain sampler's

    def shapes(batches):
        return sorted((max(source[i] for i in b), max(target[i] for i in b), len(b)) for b in batches)

    sampler.set_epoch(1)
    second = list(sampler)
    assert shapes(second) == shapes(fixed.batches)
    assert sorted(i for batch in second for i in batch) == list(range(2000))
    assert {frozenset(b) for b in second} != {frozenset(b) for b in fixed.batches}
    again = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1, regroup=True)
    again.set_epoch(1)
    assert list(again) == second  # a resumed run sees the same batches in the same order


def test_the_curriculum_competence_grows_as_a_square_root_from_one_percent_to_all():
    from vanilla_transformer.training.batching import competence

    assert competence(0, 1000) == pytest.approx(0.01)
    assert competence(250, 1000) == pytest.approx(0.5, abs=1e-4)  # sqrt(1/4)
    assert competence(999, 1000) < 1 and competence(1000, 1000) == competence(5000, 1000) == 1


def test_a_curriculum_draws_the_first_steps_from_the_shortest_pairs_then_every_pair():
    source, target = random_lengths(2000)
    plain = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1)
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1, curriculum_steps=2 * len(plain))

    def longest(batch):
        return max(max(source[i], target[i]) for i in batch)

    lengths = sorted(max(pair) for pair in zip(source, target, strict=True))
    first_epoch = list(sampler)
    assert len(first_epoch) == len(plain)
    assert first_epoch[0] == plain.batches[0]  # step 0's 1% of the pairs lie in the shortest batch
    early, late = first_epoch[: len(plain) // 10], first_epoch[-len(plain) // 10 :]
    assert max(map(longest, early)) < lengths[len(lengths) // 2] < max(map(longest, late))
    assert len({i for batch in first_epoch for i in batch}) < 2000  # the longest pairs wait
    sampler.set_epoch(2)  # steps past the curriculum: the plain sampler's batches, in its order
    plain.set_epoch(2)
    assert list(sampler) == list(plain)
    again = TokenBudgetBatchSampler(source, target, max_tokens=1000, seed=1, curriculum_steps=2 * len(plain))
    assert list(again) == first_epoch  # seeded: a resumed run draws the same batches
    # Counted in steps: at two batches a step (two processes, or accumulation) the second epoch is still in it.
    plain.set_epoch(1)
    for batches_per_step, in_curriculum in ((1, False), (2, True)):
        sampler = TokenBudgetBatchSampler(
            source, target, max_tokens=1000, seed=1, curriculum_steps=len(plain), batches_per_step=batches_per_step
        )
        sampler.set_epoch(1)
        assert (list(sampler) != list(plain)) == in_curriculum


def trainer_on_pairs(tmp_path, dropout: float = 0.1, **arguments):
    """A TranslationTrainer of a tiny model on the helpers' word-level PAIRS, on the CPU."""
    from datasets import Dataset
    from transformers import DataCollatorForSeq2Seq

    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.recipe import TranslationTrainer

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=dropout)
    pairs = Dataset.from_list([dict(tokenizer(s, text_target=t)) for s, t in PAIRS])
    args = TranslationTrainingArguments(str(tmp_path), report_to=[], use_cpu=True, **arguments)
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    return TranslationTrainer(
        model=model, args=args, train_dataset=pairs, data_collator=collator, processing_class=tokenizer
    )


def test_the_trainers_batches_follow_the_curriculum_counted_in_optimizer_steps(tmp_path):
    trainer = trainer_on_pairs(tmp_path, curriculum_steps=50, gradient_accumulation_steps=3, max_tokens=16)
    sampler = trainer.get_train_dataloader().batch_sampler
    assert (sampler.curriculum_steps, sampler.batches_per_step) == (50, 3)
    assert next(iter(sampler)) == sampler.batches[0]  # the first step: the shortest pairs


def test_the_batches_order_follows_data_seed_where_given_else_seed(tmp_path):
    def batches(**seeds) -> list[list[int]]:
        return list(trainer_on_pairs(tmp_path, max_tokens=16, **seeds).get_train_dataloader().batch_sampler)

    assert batches(seed=3, data_seed=8) == batches(seed=8) != batches(seed=3)


def test_translation_like_lengths_pad_under_five_percent():
    # Target lengths follow source lengths, as in a parallel corpus: a quarter longer or shorter at most.
    rng = random.Random(0)
    source = [rng.randint(5, 40) for _ in range(20000)]
    target = [max(3, round(s * rng.uniform(0.75, 1.25))) for s in source]
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=4096, seed=1)
    real = sum(source) + sum(target)
    padded = sum(len(b) * (max(source[i] for i in b) + max(target[i] for i in b)) for b in sampler)
    assert 1 - real / padded < 0.05


def test_a_pair_longer_than_the_budget_gets_its_own_batch():
    sampler = TokenBudgetBatchSampler([5, 300, 6], [5, 10, 6], max_tokens=100)
    assert sorted(map(sorted, sampler)) == [[0, 2], [1]]


def test_bad_sampler_arguments_are_value_errors():
    with pytest.raises(ValueError, match="3 source lengths but 2 target lengths"):
        TokenBudgetBatchSampler([1, 2, 3], [1, 2], max_tokens=10)
    with pytest.raises(ValueError, match="max_tokens must be positive, got 0"):
        TokenBudgetBatchSampler([1], [1], max_tokens=0)


# Schedule (§5.3) --------------------------------------------------------------------------------------------------
def test_learning_rate_follows_the_papers_formula_at_every_step(tmp_path):
    """§5.3 through the Trainer's own "inverse_sqrt" schedule: after s steps the rate is
    d_model^-0.5 · min(s^-0.5, s · warmup^-1.5), its peak d_model^-0.5 · warmup^-0.5 (~7e-4 for the base model)."""
    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.recipe import TranslationTrainer

    from .helpers import tiny_model

    d_model, warmup = 512, 4000
    args = TranslationTrainingArguments(str(tmp_path), warmup_steps=warmup, report_to=[], use_cpu=True)
    assert args.lr_scheduler_type == "inverse_sqrt"
    args.learning_rate = args.paper_learning_rate(d_model)
    assert args.learning_rate == pytest.approx(7.0e-4, rel=0.02)
    trainer = TranslationTrainer(model=tiny_model(), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=12000)
    for step in range(1, 12001):
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(expected, rel=1e-9), step


def test_scale_multiplies_the_rate_and_warmup_is_at_least_one_step(tmp_path):
    from vanilla_transformer.training.arguments import TranslationTrainingArguments

    args = TranslationTrainingArguments(str(tmp_path), warmup_steps=100, lr_scale=2.0, report_to=[], use_cpu=True)
    assert args.paper_learning_rate(256) == pytest.approx(2 * 256**-0.5 * 100**-0.5)
    with pytest.raises(ValueError, match="--warmup_steps 0: must be at least 1"):
        TranslationTrainingArguments(str(tmp_path), warmup_steps=0, report_to=[], use_cpu=True)


@pytest.mark.parametrize(
    ("arguments", "warned"),
    [
        ({"warmup_steps": 4000, "num_train_epochs": 2}, r"\d+ steps \(--num_train_epochs 2\) end inside its 4,000"),
        ({"warmup_steps": 8, "max_steps": 6}, r"The run's 6 steps \(--max_steps 6\) end inside its 8 warmup steps"),
        ({"warmup_steps": 8, "max_steps": 9}, None),
        ({"warmup_steps": 8, "max_steps": 6, "lr_scheduler_type": "constant"}, None),  # its rate has no warmup
    ],
)
def test_a_run_that_ends_inside_its_warmup_is_warned_of(tmp_path, caplog, arguments, warned):
    trainer = trainer_on_pairs(tmp_path, max_tokens=16, save_strategy="no", **arguments)
    with caplog.at_level("WARNING", logger="vanilla_transformer.training.recipe"):
        trainer.train()
    assert re.search(warned, caplog.text) if warned else "warmup steps" not in caplog.text


# Metrics ----------------------------------------------------------------------------------------------------------
def test_scores_are_sacrebleus_and_tokenized_bleu_is_lowercased():
    hypotheses = ["Ein Hund läuft über das Gras.", "Zwei Männer spielen Fußball."]
    references = ["Ein Hund rennt über das Gras.", "zwei Männer spielen Fußball."]
    scores = translation_scores(hypotheses, references, "de")
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score)
    assert scores["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score)
    assert "tok:13a" in scores["bleu_signature"]
    lowered = sacrebleu.corpus_bleu([h.lower() for h in hypotheses], [[r.lower() for r in references]]).score
    assert scores["tokenized_bleu"] == pytest.approx(lowered, abs=1e-6)
    assert scores["tokenized_bleu"] > scores["bleu"]


@pytest.mark.parametrize("code", ["zh", "zh-CN", "zh_Hant", "cmn", "ZH"])
def test_chinese_targets_use_the_zh_tokenizer_and_mismatched_lengths_fail(code):
    scores = translation_scores(["我是学生。"], ["我是老师。"], code)  # 13a scored this 0.0: one "word" each
    assert "tok:zh" in scores["bleu_signature"] and "tokenized_bleu" not in scores
    assert scores["bleu"] == pytest.approx(sacrebleu.corpus_bleu(["我是学生。"], [["我是老师。"]], tokenize="zh").score)
    with pytest.raises(ValueError, match="1 translations for 2 references"):
        translation_scores(["a"], ["a", "b"], "en")


# Label smoothing (§5.4) -------------------------------------------------------------------------------------------
def test_label_smoothing_is_the_papers():
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy

    from .helpers import random_batch, tiny_model

    model = tiny_model()
    input_ids, attention_mask, labels = random_batch()
    labels[0, -2:] = -100
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    keep = labels != -100
    log_probs = outputs.logits[keep].log_softmax(-1)
    nll = -log_probs.gather(-1, labels[keep].unsqueeze(-1)).mean()
    torch.testing.assert_close(outputs.loss, nll)  # the model's own loss: the plain cross-entropy
    smoothed = LabelSmoothedCrossEntropy(0.1)(outputs, labels)
    torch.testing.assert_close(smoothed, 0.9 * nll + 0.1 * -log_probs.mean())
    for count in (None, 0, torch.tensor(0)):  # a batch without a label: 0, not the nan of a mean over nothing
        assert LabelSmoothedCrossEntropy(0.1)(outputs, torch.full_like(labels, -100), count).item() == 0.0


def test_translation_trainer_loss_is_the_trainers_label_smoothed_loss(tmp_path):
    from transformers import DataCollatorForSeq2Seq
    from transformers.trainer_pt_utils import LabelSmoother

    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.recipe import TranslationTrainer

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0)
    batch = DataCollatorForSeq2Seq(tokenizer, model=model)([tokenizer(s, text_target=t) for s, t in PAIRS[:4]])
    assert (batch["labels"] == -100).any()
    args = TranslationTrainingArguments(str(tmp_path), label_smoothing_factor=0.1, report_to=[], use_cpu=True)
    trainer = TranslationTrainer(model=model, args=args)

    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    expected = LabelSmoother(epsilon=0.1)({"logits": logits}, batch["labels"])
    model.train()
    torch.testing.assert_close(trainer.compute_loss(model, dict(batch)), expected, rtol=1e-5, atol=1e-6)
    # An evaluation step (outputs returned) has the logits too.
    loss, outputs = trainer.compute_loss(model, dict(batch), return_outputs=True)
    assert outputs.logits.shape == (*batch["labels"].shape, model.config.vocab_size)
    count = int((batch["labels"] != -100).sum())
    halved = trainer.compute_loss(model, dict(batch), num_items_in_batch=2 * count)
    torch.testing.assert_close(halved, expected / 2, rtol=1e-5, atol=1e-6)


# R-Drop (Liang et al., 2021), a recipe option ---------------------------------------------------------------------
def test_r_drop_adds_alpha_times_the_symmetric_kl_of_the_two_copies_to_their_cross_entropy():
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy, RDropLoss

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 5, 11, generator=generator, requires_grad=True)  # 2 pairs, each twice: (2B, T, V)
    labels = torch.randint(0, 11, (2, 5), generator=generator)
    labels[1, -2:] = -100
    labels = torch.cat([labels, labels])
    log_p1, log_p2 = logits.log_softmax(-1).chunk(2)
    kl = torch.nn.functional.kl_div  # kl_div(log q, log p, log_target=True) = KL(p || q), per word
    both = kl(log_p2, log_p1, reduction="none", log_target=True) + kl(log_p1, log_p2, reduction="none", log_target=True)
    symmetric = both.sum(-1)[labels[:2] != -100].sum() / 2
    smoothed = LabelSmoothedCrossEntropy(0.1)({"logits": logits}, labels)
    count = int((labels != -100).sum())

    loss = RDropLoss(0.1, alpha=5.0)({"logits": logits}, labels)
    torch.testing.assert_close(loss, smoothed + 5.0 * symmetric / count)
    loss.backward()  # both copies learn from the divergence
    assert logits.grad[:2].abs().sum() > 0 and logits.grad[2:].abs().sum() > 0
    same = torch.cat([logits[:2], logits[:2]]).detach().requires_grad_()  # one dropout mask twice: no divergence
    torch.testing.assert_close(
        RDropLoss(0.1, 5.0)({"logits": same}, labels), LabelSmoothedCrossEntropy(0.1)({"logits": same}, labels)
    )
    once = logits.detach()[:3]  # evaluation runs without gradients, each pair once: the cross-entropy alone
    torch.testing.assert_close(
        RDropLoss(0.1, 5.0)({"logits": once}, labels[:3]), LabelSmoothedCrossEntropy(0.1)({"logits": once}, labels[:3])
    )
    with pytest.raises(ValueError, match="training batch of 3 rows cannot hold each pair twice"):
        RDropLoss(0.1, 5.0)({"logits": logits[:3]}, labels[:3])


def test_r_drop_trains_on_each_pair_twice_under_two_dropout_masks(tmp_path):
    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy

    trainer = trainer_on_pairs(tmp_path, dropout=0.3, r_drop_alpha=5.0, max_tokens=64, remove_unused_columns=False)
    model = trainer.model
    batch = next(iter(trainer.get_train_dataloader()))
    rows = len(batch["labels"]) // 2
    assert rows > 0 and len(batch["labels"]) == 2 * rows
    for name in ("input_ids", "attention_mask", "decoder_input_ids", "labels"):
        assert torch.equal(batch[name][:rows], batch[name][rows:]), name

    model.train()
    torch.manual_seed(0)
    loss, outputs = trainer.compute_loss(model, dict(batch), return_outputs=True)
    assert not torch.allclose(outputs.logits[:rows], outputs.logits[rows:])  # two dropout masks
    cross_entropy = LabelSmoothedCrossEntropy(0.1)(outputs, batch["labels"])
    assert loss > cross_entropy  # the divergence between the masks' predictions is added
    with pytest.raises(ValueError, match="--r_drop_alpha -1.0: must be at least 0"):
        TranslationTrainingArguments(str(tmp_path), r_drop_alpha=-1.0)


# Word dropout (--word_dropout), a recipe option ------------------------------------------------------------------
def test_word_dropout_blanks_input_words_with_unk_never_labels_or_special_tokens():
    from transformers import DataCollatorForSeq2Seq

    from vanilla_transformer.training.word_dropout import WordDropout

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    collator = DataCollatorForSeq2Seq(tokenizer, model=tiny_model(vocab_size=len(tokenizer)))
    clean = collator([tokenizer(s, text_target=t) for s, t in PAIRS])
    torch.manual_seed(0)
    noisy = WordDropout(collator, 0.3, tokenizer)([tokenizer(s, text_target=t) for s, t in PAIRS])
    assert all(torch.equal(noisy[name], clean[name]) for name in ("labels", "attention_mask"))
    special = torch.tensor(tokenizer.all_special_ids)
    for name in ("input_ids", "decoder_input_ids"):
        blanked = noisy[name] != clean[name]
        assert (noisy[name][blanked] == tokenizer.unk_token_id).all(), name
        assert not torch.isin(clean[name][blanked], special).any(), name  # padding, </s>, the start token
        assert 0.2 < blanked.sum() / (~torch.isin(clean[name], special)).sum() < 0.4, name
    with pytest.raises(ValueError, match=r"--word_dropout 1.0: must be in \(0, 1\)"):
        WordDropout(collator, 1.0, tokenizer)
    with pytest.raises(ValueError, match="--word_dropout blanks tokens with <unk>: the trainer needs a tokenizer"):
        WordDropout(collator, 0.1, None)


def test_the_trainer_blanks_words_in_training_batches_alike_for_r_drops_two_passes(tmp_path):
    trainer = trainer_on_pairs(tmp_path, word_dropout=0.5, r_drop_alpha=1.0, max_tokens=64, remove_unused_columns=False)
    unk = trainer.processing_class.unk_token_id
    batches = list(trainer.get_train_dataloader())
    assert any((batch["input_ids"] == unk).any() for batch in batches)
    for batch in batches:
        rows = len(batch["labels"]) // 2
        assert torch.equal(batch["input_ids"][:rows], batch["input_ids"][rows:])  # the same blanks in both passes
    evaluated = next(iter(trainer.get_eval_dataloader(trainer.train_dataset)))
    assert not (evaluated["input_ids"] == unk).any()  # evaluation sees its inputs whole


# Late dropout (--late_dropout_steps), a recipe option --------------------------------------------------------------
class DropoutRates(TrainerCallback):
    """Records, at the start of each step, the rates of the model's dropout modules that have one."""

    def __init__(self):
        self.rates: list[set[float]] = []

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.rates.append({m.p for m in model.modules() if isinstance(m, torch.nn.Dropout) and m.p != 0.0} or {0.0})


@pytest.mark.parametrize("max_steps", [5, 2])
def test_late_dropout_trains_the_first_steps_without_dropout_then_with_the_models_rates(tmp_path, max_steps):
    trainer = trainer_on_pairs(
        tmp_path, dropout=0.3, late_dropout_steps=3, max_steps=max_steps, max_tokens=16, save_strategy="no"
    )
    rates = DropoutRates()
    trainer.add_callback(rates)  # after LateDropout: sees the rates each step trains with
    trainer.train()
    assert rates.rates == [{0.0}, {0.0}, {0.0}, {0.3}, {0.3}][:max_steps]
    # A run that ends before the switch leaves its model with its config's rates as well.
    assert {m.p for m in trainer.model.modules() if isinstance(m, torch.nn.Dropout)} - {0.0} == {0.3}
    assert trainer.model.config.dropout == 0.3


def test_a_run_resumed_past_the_late_dropout_switch_trains_with_the_models_rates():
    from transformers import TrainerState

    from vanilla_transformer.training.late_dropout import LateDropout

    from .helpers import tiny_model

    model = tiny_model(dropout=0.3)
    late = LateDropout(steps=3)
    late.on_train_begin(None, TrainerState(global_step=7), None, model=model)
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} - {0.0} == {0.3}
    with pytest.raises(ValueError, match="--late_dropout_steps 0: must be at least 1"):
        LateDropout(steps=0)


# LayerDrop (--layer_drop), a recipe option -------------------------------------------------------------------------
def test_layer_drop_skips_whole_layers_in_training_only_and_leaves_the_model_as_it_was():
    from vanilla_transformer.training.layer_drop import LayerDrop

    from .helpers import random_batch, tiny_model

    model, plain = tiny_model(dropout=0.0), tiny_model(dropout=0.0)
    layers = [*model.get_encoder().layers, *model.get_decoder().layers]
    runs = {layer: 0 for layer in layers}
    for layer in layers:  # the FFN runs once per forward of its layer: counts the layers that were not skipped
        layer.ffn.register_forward_hook(
            lambda module, args, output, layer=layer: runs.__setitem__(layer, runs[layer] + 1)
        )
    drop = LayerDrop(0.5)
    drop.on_train_begin(None, None, None, model=model)
    input_ids, attention_mask, labels = random_batch()
    torch.manual_seed(0)
    model.train()
    for _ in range(40):
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    assert all(8 <= count <= 32 for count in runs.values()), runs  # each about half of the 40 batches
    assert len(set(runs.values())) > 1  # each layer draws its own skips
    # A copy (the exponential average's) skips its own layers, not the original's.
    copied = copy.deepcopy(model)
    assert all(a.forward.__self__ is a for a in [*copied.get_encoder().layers, *copied.get_decoder().layers])
    model.eval()
    with torch.no_grad():  # every layer evaluates
        logits = [m(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits for m in (model, plain)]
    assert torch.equal(*logits)
    drop.on_train_end(None, None, None)
    assert all("forward" not in vars(layer) for layer in layers)
    with pytest.raises(ValueError, match="--layer_drop 1.0: must be in"):
        LayerDrop(1.0)


def test_the_trainer_trains_with_layer_drop_and_the_exponential_average(tmp_path):
    from vanilla_transformer.training.layer_drop import LayerDrop

    trainer = trainer_on_pairs(tmp_path, layer_drop=0.5, ema_decay=0.9, max_steps=4, max_tokens=16, save_strategy="no")
    assert any(isinstance(callback, LayerDrop) for callback in trainer.callback_handler.callbacks)
    assert trainer.args.ddp_find_unused_parameters  # a skipped layer's parameters have no gradient in its step
    trainer.train()
    layers = [*trainer.model.get_encoder().layers, *trainer.model.get_decoder().layers]
    assert all("forward" not in vars(layer) for layer in layers)


# Dropout's masks from random bits (--random_bits_dropout), a recipe option ------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_random_bits_masks_drop_each_element_with_probability_p_independently_and_keep_the_mean(p):
    from vanilla_transformer.training.dropout import keep_mask

    torch.manual_seed(0)
    mask = keep_mask(torch.Size([1000, 1001]), p, torch.float32, torch.device("cpu"))  # not a multiple of 4
    assert mask.shape == (1000, 1001) and mask.dtype == torch.float32
    kept = mask != 0
    assert mask.unique().tolist() == [0.0, pytest.approx(1 / (1 - p), rel=2**-16)]  # p rounded to a 65,536th
    assert kept.float().mean().item() == pytest.approx(1 - p, abs=0.002)  # 5 standard deviations
    assert mask.mean().item() == pytest.approx(1.0, abs=0.005)  # the expected output is the input
    # The four integers of one 64-bit word are independent: neighbours are both kept (1 - p)^2 of the time.
    both = (kept[:, :-1] & kept[:, 1:]).float().mean().item()
    assert both == pytest.approx((1 - p) ** 2, abs=0.003)
    torch.manual_seed(0)
    assert torch.equal(keep_mask(torch.Size([1000, 1001]), p, torch.float32, torch.device("cpu")), mask)
    assert not torch.equal(keep_mask(torch.Size([1000, 1001]), p, torch.float32, torch.device("cpu")), mask)


def test_random_bits_dropout_is_nn_dropout_at_its_rate_in_training_only_and_its_gradient_is_its_mask():
    from vanilla_transformer.training.dropout import RandomBitsDropout, keep_mask

    dropout = RandomBitsDropout(0.3)
    inputs = torch.randn(7, 9, requires_grad=True)
    torch.manual_seed(1)
    outputs = dropout(inputs)
    torch.manual_seed(1)
    mask = keep_mask(inputs.shape, 0.3, inputs.dtype, inputs.device)
    torch.testing.assert_close(outputs, inputs * mask)
    outputs.sum().backward()
    torch.testing.assert_close(inputs.grad, mask)
    assert torch.equal(dropout.eval()(inputs), inputs)  # evaluation and inference see their inputs whole
    dropout.train().p = 0.0  # as late dropout sets it
    assert torch.equal(dropout(inputs), inputs)
    dropout.p = 1.0
    assert torch.equal(dropout(inputs), torch.zeros_like(inputs))
    assert torch.equal(keep_mask(torch.Size([5]), 1 - 1e-9, torch.float32, torch.device("cpu")), torch.zeros(5))


def test_the_trainer_draws_dropout_from_random_bits_on_a_cpu_and_leaves_the_model_and_its_weights_as_they_were(
    tmp_path, monkeypatch
):
    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.dropout import RandomBitsDropout

    plain = trainer_on_pairs(tmp_path, dropout=0.3, random_bits_dropout=False).model
    trainer = trainer_on_pairs(tmp_path, dropout=0.3)  # the default on a CPU
    assert trainer.random_bits_dropout
    rates = [(name, module.p) for name, module in plain.named_modules() if isinstance(module, torch.nn.Dropout)]
    swapped = trainer.model.named_modules()
    assert [(name, module.p) for name, module in swapped if type(module) is RandomBitsDropout] == rates
    assert not any(type(module) is torch.nn.Dropout for module in trainer.model.modules())
    assert trainer.model.state_dict().keys() == plain.state_dict().keys()  # dropout holds no weights
    input_ids, labels = torch.randint(4, plain.config.vocab_size, (2, 3, 7))
    attention_mask = torch.ones_like(input_ids)
    trainer.model.load_state_dict(plain.state_dict())
    for model in (plain, trainer.model):
        model.eval()
    torch.testing.assert_close(
        trainer.model(input_ids, attention_mask=attention_mask, labels=labels).logits,
        plain(input_ids, attention_mask=attention_mask, labels=labels).logits,
    )
    trainer.model.train()
    training = trainer.model(input_ids, attention_mask=attention_mask, labels=labels).logits
    assert not torch.equal(training, trainer.model(input_ids, attention_mask=attention_mask, labels=labels).logits)
    # On a GPU torch's fused dropout stays: asked for there, the option is refused with the arguments.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ValueError, match="--random_bits_dropout is for training on a CPU; on a GPU leave it out."):
        TranslationTrainingArguments(str(tmp_path), report_to=[], random_bits_dropout=True)
    assert TranslationTrainingArguments(str(tmp_path), report_to=[], use_cpu=True).random_bits_dropout_clash() is None


# A schedule-free optimizer (--optim schedule_free_adamw), a Trainer option -------------------------------------------
class SavedWeights(TrainerCallback):
    """Records, at each checkpoint, whether the weights written are the model's at that moment, and whether the
    optimizer had put its average x in the parameters."""

    def __init__(self):
        self.saved: list[tuple[bool, bool]] = []

    def on_save(self, args, state, control, model=None, optimizer=None, **kwargs):
        from safetensors.torch import load_file

        written = load_file(f"{args.output_dir}/checkpoint-{state.global_step}/model.safetensors")
        now = model.state_dict()
        same = all(torch.equal(tensor, now[name]) for name, tensor in written.items())
        self.saved.append((same, not optimizer.optimizer.param_groups[0]["train_mode"]))


def test_a_schedule_free_optimizers_checkpoints_and_final_model_hold_its_average_not_its_gradient_point(tmp_path):
    pytest.importorskip("schedulefree")
    arguments = dict(optim="schedule_free_adamw", lr_scheduler_type="constant", learning_rate=0.01, warmup_steps=2)
    trainer = trainer_on_pairs(tmp_path, max_steps=6, max_tokens=16, save_steps=3, **arguments)
    saved = SavedWeights()
    trainer.add_callback(saved)
    trainer.train()
    assert saved.saved == [(True, True), (True, True)]  # steps 3 and 6: written while the parameters held x
    x = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.optimizer.train()  # y, where the gradients were taken: another point, which no checkpoint holds
    assert any(not torch.equal(a, b) for a, b in zip(x, trainer.model.parameters(), strict=True))


# An exponential moving average of the weights (--ema_decay), a recipe option -----------------------------------------
class WeightsAfterEachStep(TrainerCallback):
    def __init__(self):
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.weights.append({name: tensor.clone() for name, tensor in model.state_dict().items()})  # tied names too


def test_the_exponential_average_moves_toward_the_weights_each_step_and_resumes_from_its_checkpoint(tmp_path):
    from safetensors.torch import load_file

    from vanilla_transformer.training.exponential_average import EXPONENTIAL_AVERAGE

    arguments = dict(ema_decay=0.5, learning_rate=0.01, warmup_steps=1, max_steps=4, max_tokens=16, save_steps=2)
    trainer = trainer_on_pairs(tmp_path, **arguments)
    steps = WeightsAfterEachStep()
    trainer.add_callback(steps)
    trainer.train()
    expected = dict(steps.weights[0])  # the first step's weights, then half way toward each next step's
    for step, weights in enumerate(steps.weights[1:], start=2):
        expected = {name: 0.5 * expected[name] + 0.5 * weights[name] for name in expected}
        if step % 2 == 0:  # each checkpoint holds the average of its step
            written = load_file(tmp_path / f"checkpoint-{step}" / EXPONENTIAL_AVERAGE)
            for name, tensor in written.items():
                torch.testing.assert_close(tensor, expected[name], msg=name)
    average = trainer.exponential_average.weights()
    for name, tensor in expected.items():
        torch.testing.assert_close(average[name], tensor, msg=name)
    assert any(not torch.equal(average[name], steps.weights[-1][name]) for name in expected)  # not the last weights

    # Resumed from the step-2 checkpoint: the average goes on from the checkpoint's, not from the resumed weights.
    resumed = trainer_on_pairs(tmp_path, **arguments)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    for name, tensor in resumed.exponential_average.weights().items():
        torch.testing.assert_close(tensor, average[name], msg=name)


def test_the_exponential_averages_update_is_torchs_averaged_model_update_bit_for_bit():
    from types import SimpleNamespace

    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    from vanilla_transformer.training.exponential_average import ExponentialAverage

    from .helpers import tiny_model

    model = tiny_model()
    no_save = SimpleNamespace(should_save=False)
    callback = ExponentialAverage(0.9)
    callback.on_train_begin(no_save, SimpleNamespace(global_step=0), no_save, model=model)
    reference = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9), use_buffers=False)
    for _ in range(5):  # a training step's change, then both updates
        with torch.no_grad():
            for weight in model.parameters():
                weight.add_(torch.randn_like(weight))
        callback.on_step_end(no_save, None, no_save, model=model)
        reference.update_parameters(model)
    for ours, torchs in zip(callback.average.module.parameters(), reference.module.parameters(), strict=True):
        assert torch.equal(ours, torchs)
    assert int(callback.average.n_averaged) == 5


def test_a_checkpoint_without_an_exponential_average_is_not_resumed_with_one(tmp_path):
    trainer_on_pairs(tmp_path, learning_rate=0.01, warmup_steps=1, max_steps=2, max_tokens=16, save_steps=2).train()
    resumed = trainer_on_pairs(tmp_path, ema_decay=0.9, max_steps=4, max_tokens=16, save_steps=2)
    with pytest.raises(FileNotFoundError, match="checkpoint-2 has no exponential_average.safetensors: it was written"):
        resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))


# Muon for the layers' matrices (--muon), a recipe option ----------------------------------------------------------
@pytest.mark.parametrize("shape", [(8, 8), (6, 20), (20, 6)])
def test_newton_schulz_makes_a_matrix_about_orthogonal_whatever_its_shape(shape):
    from vanilla_transformer.training.muon import orthogonalize

    # Columns scaled from 0.3 to 3: singular values far apart.
    matrix = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) * torch.logspace(-0.5, 0.5, shape[1])
    orthogonal = orthogonalize(matrix)
    singular_values = torch.linalg.svdvals(orthogonal)
    # Jordan et al.'s quintic trades exactness for speed: about 1, between 0.5 and 1.5, instead of exactly 1.
    assert orthogonal.shape == shape
    assert singular_values.min() > 0.5 and singular_values.max() < 1.5
    before = torch.linalg.svdvals(matrix)
    assert before.max() / before.min() > 5  # it was far from it


def test_muon_trains_the_layers_matrices_and_adamw_the_rest_in_one_optimizer_that_resumes_where_it_was(tmp_path):
    from vanilla_transformer.training.muon import MuonWithAdamW

    rate = dict(learning_rate=0.01, warmup_steps=1)
    trainer = trainer_on_pairs(tmp_path, muon=True, max_steps=4, max_tokens=16, save_steps=2, **rate)
    before = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    trainer.train()
    optimizer = trainer.optimizer.optimizer  # accelerate's wrapper holds it
    assert isinstance(optimizer, MuonWithAdamW)
    muon, adamw = optimizer.param_groups
    names = {id(p): name for name, p in trainer.model.named_parameters()}
    assert muon["muon"] and not adamw["muon"]
    assert {names[id(p)].rsplit(".", 2)[-2] for p in muon["params"]} == {
        "q_proj",
        "k_proj",
        "v_proj",
        "out_proj",
        "fc1",
        "fc2",
    }
    assert "model.encoder.embeddings.embed_tokens.weight" in {names[id(p)] for p in adamw["params"]}  # tied: AdamW
    assert len(muon["params"]) + len(adamw["params"]) == len(before)  # each parameter once
    assert muon["lr"] == adamw["lr"] > 0  # one schedule for both
    assert all("momentum_buffer" in optimizer.state[p] for p in muon["params"])
    assert all("exp_avg" in optimizer.state[p] for p in adamw["params"])
    assert all(not torch.equal(p, before[name]) for name, p in trainer.model.named_parameters())

    # Resumed from the step-2 checkpoint (Muon's momentum buffers and Adam's moments in one state): the same weights.
    resumed = trainer_on_pairs(tmp_path, muon=True, max_steps=4, max_tokens=16, save_steps=2, **rate)
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    for (name, p), q in zip(trainer.model.named_parameters(), resumed.model.parameters(), strict=True):
        torch.testing.assert_close(q, p, msg=name)


def test_a_muon_step_is_the_orthogonalised_nesterov_momentum_at_adamws_update_size():
    from vanilla_transformer.training.muon import MuonWithAdamW, orthogonalize

    generator = torch.Generator().manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(4, 16, generator=generator))
    start, gradient = weight.detach().clone(), torch.randn(4, 16, generator=generator)
    optimizer = MuonWithAdamW([{"params": [weight], "muon": True}], lr=0.1, weight_decay=0.5)
    weight.grad = gradient
    optimizer.step()
    nesterov = gradient.lerp(gradient * (1 - 0.95), 0.95)  # the first step's momentum is (1 - 0.95) * gradient
    expected = start * (1 - 0.1 * 0.5) - 0.1 * 0.2 * 16**0.5 * orthogonalize(nesterov)
    torch.testing.assert_close(weight.detach(), expected)
    rms = (expected - start * (1 - 0.05)).pow(2).mean().sqrt()
    assert 0.1 * 0.2 * 0.5 < rms < 0.1 * 0.2 * 1.5  # the update's size is the rate's share AdamW's would have
    with pytest.raises(ValueError, match="Muon steps 2-D weight matrices only"):
        MuonWithAdamW([{"params": [torch.nn.Parameter(torch.zeros(4))], "muon": True}])


# The fused output loss (--fused_output_loss), a recipe option -----------------------------------------------------
def test_fused_output_loss_gives_the_output_layers_label_smoothed_loss_and_its_gradients():
    from vanilla_transformer.training.loss import ROWS_AT_A_TIME, fused_output_cross_entropy_sum

    generator = torch.Generator().manual_seed(0)
    length = ROWS_AT_A_TIME // 2 + 3  # three rows of labels: two chunks of positions, the second partly full
    hidden = torch.randn(3, length, 16, generator=generator, requires_grad=True)  # (B, T, D)
    weight = torch.randn(50, 16, generator=generator, requires_grad=True)  # (V, D)
    labels = torch.randint(0, 50, (3, length), generator=generator)
    labels[0, 20:] = -100
    logits = (hidden @ weight.t()).reshape(-1, 50)
    plain = torch.nn.functional.cross_entropy(logits, labels.reshape(-1), label_smoothing=0.1, reduction="sum")
    plain_gradients = torch.autograd.grad(plain / 7, (hidden, weight))

    fused = fused_output_cross_entropy_sum(hidden, weight, labels, 0.1)
    torch.testing.assert_close(fused, plain)
    for got, expected in zip(torch.autograd.grad(fused / 7, (hidden, weight)), plain_gradients, strict=True):
        torch.testing.assert_close(got, expected)
    unlabelled = torch.full_like(labels, -100)
    assert fused_output_cross_entropy_sum(hidden, weight, unlabelled, 0.1) == 0
    with torch.autocast("cpu", dtype=torch.bfloat16):  # --bf16: the output layer stays fp32
        in_bf16 = fused_output_cross_entropy_sum(hidden.bfloat16(), weight, labels, 0.1)
    torch.testing.assert_close(in_bf16, plain, rtol=1e-2, atol=0)
    (grad_hidden,) = torch.autograd.grad(in_bf16, hidden)
    assert grad_hidden.dtype == torch.float32 and grad_hidden.abs().sum() > 0


def test_the_fused_output_loss_trains_the_model_in_bf16_autocast_under_bf16(tmp_path):
    # Accelerate puts --bf16's autocast around the model's forward; the fused loss calls the model's body, which
    # trained in fp32 under --bf16 (the run's log said bf16).
    for bf16 in (True, False):
        trainer = trainer_on_pairs(tmp_path, bf16=bf16, max_steps=1, max_tokens=64, save_strategy="no")
        assert trainer.fuse_output_loss
        dtypes = []
        layer = trainer.model.model.encoder.layers[0].ffn.fc1
        layer.register_forward_hook(lambda module, inputs, output, seen=dtypes: seen.append(output.dtype))
        trainer.train()
        assert dtypes == [torch.bfloat16 if bf16 else torch.float32]


def test_fused_output_loss_is_on_where_it_can_run_trains_with_the_plain_loss_and_refuses_what_it_cannot_do(
    tmp_path, monkeypatch
):
    from transformers import DataCollatorForSeq2Seq, MarianConfig, MarianMTModel

    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.recipe import TranslationTrainer

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0)
    batch = DataCollatorForSeq2Seq(tokenizer, model=model)([tokenizer(s, text_target=t) for s, t in PAIRS[:4]])
    assert (batch["labels"] == -100).any()
    arguments = dict(max_tokens=64, report_to=[], use_cpu=True, label_smoothing_factor=0.1)
    plain = TranslationTrainer(
        model=model, args=TranslationTrainingArguments(str(tmp_path), fused_output_loss=False, **arguments)
    )
    fused = TranslationTrainer(model=model, args=TranslationTrainingArguments(str(tmp_path), **arguments))
    assert fused.fuse_output_loss and not plain.fuse_output_loss  # the default, on one CPU process
    model.train()
    expected = plain.compute_loss(model, dict(batch), num_items_in_batch=11)
    loss = fused.compute_loss(model, dict(batch), num_items_in_batch=11)
    torch.testing.assert_close(loss, expected)
    without_decoder_inputs = {name: value for name, value in batch.items() if name != "decoder_input_ids"}
    torch.testing.assert_close(fused.compute_loss(model, without_decoder_inputs, num_items_in_batch=11), expected)
    loss.backward()
    assert model.get_output_embeddings().weight.grad.abs().sum() > 0
    assert model.model.encoder.layers[0].ffn.fc1.weight.grad.abs().sum() > 0  # through the whole model

    # Where it cannot run, asked for it is refused, and by default the plain loss runs.
    for flags, message in (
        (dict(r_drop_alpha=5.0), "--fused_output_loss with --r_drop_alpha"),
        (dict(torch_compile=True), "--fused_output_loss with --torch_compile"),
    ):
        with pytest.raises(ValueError, match=message):
            TranslationTrainingArguments(str(tmp_path), fused_output_loss=True, use_cpu=True, **flags)
        by_default = TranslationTrainingArguments(str(tmp_path), **arguments, **flags)
        assert not TranslationTrainer(model=model, args=by_default).fuse_output_loss
    small = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=16, decoder_ffn_dim=16)
    ids = dict(pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    marian = MarianMTModel(MarianConfig(vocab_size=len(tokenizer), **small, **ids))  # its logits add a bias
    assert not TranslationTrainer(
        model=marian, args=TranslationTrainingArguments(str(tmp_path), **arguments)
    ).fuse_output_loss
    with pytest.raises(ValueError, match="this package's output layer, not MarianMTModel's"):
        TranslationTrainer(
            model=marian, args=TranslationTrainingArguments(str(tmp_path), fused_output_loss=True, **arguments)
        )
    # A GPU run gets the plain loss; a CPU run on a machine with a GPU (--use_cpu) the fused one.
    on_cpu = TranslationTrainingArguments(str(tmp_path), **arguments)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert on_cpu.fused_output_loss_clash() is None
    on_cpu.use_cpu = False
    assert on_cpu.fused_output_loss_clash() == "--fused_output_loss is for training on a CPU; on a GPU leave it out."
    monkeypatch.undo()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="--fused_output_loss trains in one process"):
        TranslationTrainingArguments(str(tmp_path), fused_output_loss=True, use_cpu=True)


# The softmax over the training targets' tokens (--target_vocabulary_softmax), a recipe option ---------------------
def test_a_target_vocabulary_selects_the_target_tokens_and_places_the_labels_among_them():
    from vanilla_transformer.training.loss import TargetVocabulary

    vocabulary = TargetVocabulary.of_labels([5, 2, -100, 7, 2], vocab_size=9)
    assert vocabulary.ids.tolist() == [2, 5, 7] and vocabulary.suppressed() == [0, 1, 3, 4, 6, 8]
    logits = torch.arange(18.0).reshape(2, 9)
    labels = torch.tensor([[7, -100], [3, 5]])
    selected, places = vocabulary.select(logits, labels, dim=-1)
    assert selected.tolist() == [[2.0, 5.0, 7.0], [11.0, 14.0, 16.0]]
    assert places.tolist() == [[2, -100], [-100, 1]]  # token 3 is no target token: no loss, as an unlabelled one
    rows, _ = vocabulary.select(logits.t(), labels, dim=0)  # the output layer's weight: its rows
    assert rows.t().tolist() == selected.tolist()


def test_the_target_vocabulary_softmax_is_the_loss_over_the_target_tokens_and_generate_never_writes_the_others(
    tmp_path,
):
    from vanilla_transformer.training.loss import RDropLoss

    from .helpers import PAIRS

    arguments = dict(dropout=0.0, label_smoothing_factor=0.1, max_tokens=64, target_vocabulary_softmax=True)
    fused = trainer_on_pairs(tmp_path, **arguments)
    plain = trainer_on_pairs(tmp_path, fused_output_loss=False, **arguments)  # the same initial weights
    assert fused.fuse_output_loss and not plain.fuse_output_loss
    model, vocab_size = fused.model, fused.model.config.vocab_size
    targets = sorted({token for row in fused.train_dataset["labels"] for token in row})
    assert model.config.eos_token_id in targets and 0 < len(targets) < vocab_size  # English words are not
    assert model.generation_config.suppress_tokens == sorted(set(range(vocab_size)) - set(targets))
    assert model.generation_config.renormalize_logits  # beam search's scores: the softmax over the targets' tokens

    # The loss: label-smoothed cross-entropy over the target tokens' logits, the same fused or plain.
    batch = next(iter(fused.get_train_dataloader()))
    model.train()
    labels = batch["labels"].reshape(-1)
    places = torch.tensor([targets.index(token) if token != -100 else -100 for token in labels.tolist()])
    every_logit = model(**batch).logits.reshape(len(labels), -1)
    logits = every_logit[:, targets]
    expected = torch.nn.functional.cross_entropy(logits, places, label_smoothing=0.1)
    gradients = []
    for trainer in (fused, plain):
        loss = trainer.compute_loss(trainer.model, dict(batch))
        torch.testing.assert_close(loss, expected)
        trainer.model.zero_grad()
        loss.backward()
        gradients.append(trainer.model.get_output_embeddings().weight.grad)
    torch.testing.assert_close(*gradients)
    suppressed = model.generation_config.suppress_tokens
    r_drop = RDropLoss(0.1, 5.0, fused.target_vocabulary)  # R-Drop's divergence is over the same tokens
    doubled, doubled_labels = torch.stack([every_logit, every_logit]), torch.stack([labels, labels])  # no divergence
    torch.testing.assert_close(r_drop.summed(doubled, doubled_labels), 2 * expected * (places != -100).sum())

    # generate() follows the saved generation config: no token outside the training targets.
    model.eval()
    sources = fused.processing_class([source for source, _ in PAIRS], return_tensors="pt", padding=True)
    written = model.generate(**sources, max_new_tokens=8, num_beams=2)
    unrestricted = model.generate(**sources, max_new_tokens=8, num_beams=2, suppress_tokens=None)
    never = set(suppressed) - {model.config.pad_token_id}  # pad: what a finished translation is filled with
    assert set(unrestricted[:, 1:].flatten().tolist()) & never  # it would, after the start token
    assert not set(written[:, 1:].flatten().tolist()) & never


def test_a_fine_tune_of_a_narrowed_model_keeps_the_tokens_it_writes_beside_the_new_targets(tmp_path):
    from vanilla_transformer.training.loss import TargetVocabulary
    from vanilla_transformer.training.recipe import TranslationTrainer

    first = trainer_on_pairs(tmp_path, target_vocabulary_softmax=True)  # narrows its model's generation config
    model, vocab_size = first.model, first.model.config.vocab_size
    written = TargetVocabulary.of_generation_config(model.generation_config, vocab_size)
    assert written.ids.tolist() == first.target_vocabulary.ids.tolist()
    assert TargetVocabulary.of_generation_config(GenerationConfig(), vocab_size) is None  # a model never narrowed
    small_corpus = first.train_dataset.select([0])  # one pair: few tokens of its own
    fine_tune = TranslationTrainer(model=model, args=first.args, train_dataset=small_corpus)
    assert fine_tune.target_vocabulary.ids.tolist() == written.ids.tolist()  # not the one pair's tokens alone
    assert len(set(small_corpus["labels"][0])) < len(written.ids)


def test_the_target_vocabulary_softmax_refuses_what_it_cannot_restrict(tmp_path):
    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy
    from vanilla_transformer.training.recipe import TranslationTrainer

    with pytest.raises(ValueError, match="--target_vocabulary_softmax with --bpe_dropout"):
        TranslationTrainingArguments(str(tmp_path), report_to=[], target_vocabulary_softmax=True, bpe_dropout=0.1)
    trainer = trainer_on_pairs(tmp_path, target_vocabulary_softmax=True)
    model, args, pairs = trainer.model, trainer.args, trainer.train_dataset
    with pytest.raises(ValueError, match="not another compute_loss_func"):
        TranslationTrainer(model=model, args=args, train_dataset=pairs, compute_loss_func=LabelSmoothedCrossEntropy(0))
    with pytest.raises(ValueError, match="there is no train_dataset"):
        TranslationTrainer(model=model, args=args)


# CUDA graphs of the training step (--cuda_graphs), a recipe option -----------------------------------------------
def pair_batches(tokenizer, model, *groups):
    """The collator's training batch of each group of the helpers' PAIRS."""
    from transformers import DataCollatorForSeq2Seq

    collate = DataCollatorForSeq2Seq(tokenizer, model=model)
    return [dict(collate([tokenizer(s, text_target=t) for s, t in pairs])) for pairs in groups]


def test_graphed_steps_record_each_batch_shape_once_and_give_the_recipes_summed_loss():
    from vanilla_transformer.training.cuda_graphs import GraphedSteps
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy, RDropLoss

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0).train()
    first, second, again = pair_batches(tokenizer, model, PAIRS[:4], PAIRS[4:6], PAIRS[3::-1])
    assert first["input_ids"].shape != second["input_ids"].shape
    recorded, room = [], [True]

    def record(step, tensors):  # on a CPU the step runs as it is: the recording is torch's
        recorded.append(tuple(tensor.shape for tensor in tensors))
        return step

    for loss in (LabelSmoothedCrossEntropy(0.1), RDropLoss(0.1, alpha=5.0)):
        recorded.clear()
        graphed = GraphedSteps(loss, record=record, has_room=lambda: room[0])
        for batch in (first, second, again):
            inputs = {name: value for name, value in batch.items() if name != "labels"}
            expected = loss.summed(model(**inputs).logits, batch["labels"])
            torch.testing.assert_close(graphed.summed_loss(model, batch), expected)
        assert len(recorded) == 2  # the third batch (the first's pairs backwards) has the first one's shape
    other = tiny_model(seed=1, vocab_size=len(tokenizer), dropout=0.0).train()  # a model_init's new model, say
    inputs = {name: value for name, value in first.items() if name != "labels"}
    torch.testing.assert_close(graphed.summed_loss(other, first), loss.summed(other(**inputs).logits, first["labels"]))
    assert len(recorded) == 3  # its own graphs
    room[0] = False  # a full GPU: a new shape runs eagerly, the recorded ones still replay
    assert graphed.summed_loss(model, pair_batches(tokenizer, model, PAIRS[1:7])[0]) is None
    assert graphed.summed_loss(model, first) is not None and len(recorded) == 3


def test_cuda_graphs_are_on_where_they_can_run_train_with_the_plain_loss_and_refuse_what_they_cannot_do(
    tmp_path, monkeypatch
):
    from transformers import MarianConfig, MarianMTModel

    from vanilla_transformer.training.arguments import TranslationTrainingArguments
    from vanilla_transformer.training.cuda_graphs import GraphedSteps
    from vanilla_transformer.training.recipe import TranslationTrainer

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0)
    arguments = dict(max_tokens=64, report_to=[], use_cpu=True, label_smoothing_factor=0.1, fused_output_loss=False)
    trainer = TranslationTrainer(model=model, args=TranslationTrainingArguments(str(tmp_path), **arguments))
    assert trainer.graphed_steps is None  # on a CPU: off
    # The trainer's loss through the graphs' summed loss is its plain loss, with or without the decoder's inputs.
    (batch,) = pair_batches(tokenizer, model, PAIRS[:4])
    model.train()
    expected = trainer.compute_loss(model, dict(batch), num_items_in_batch=11)
    graphed = GraphedSteps(trainer.compute_loss_func, record=lambda step, tensors: step, has_room=lambda: True)
    trainer.graphed_steps = graphed
    torch.testing.assert_close(trainer.compute_loss(model, dict(batch), num_items_in_batch=11), expected)
    without_decoder_inputs = {name: value for name, value in batch.items() if name != "decoder_input_ids"}
    torch.testing.assert_close(trainer.compute_loss(model, without_decoder_inputs, num_items_in_batch=11), expected)
    assert len(trainer.graphed_steps.graphs) == 1

    with pytest.raises(ValueError, match="--cuda_graphs needs a CUDA GPU"):
        TranslationTrainingArguments(str(tmp_path), cuda_graphs=True, use_cpu=True)
    on_gpu = TranslationTrainingArguments(str(tmp_path), **arguments)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    on_gpu.use_cpu = False
    assert on_gpu.cuda_graphs_clash() is None
    for name, value, message in (
        ("torch_compile", True, "--cuda_graphs with --torch_compile"),
        ("gradient_accumulation_steps", 2, r"would overwrite the first one's gradients \(pytorch#181723\)"),
        ("late_dropout_steps", 100, "a graph keeps the dropout it was recorded with"),
    ):
        clashing = copy.copy(on_gpu)
        setattr(clashing, name, value)
        assert re.search(message, clashing.cuda_graphs_clash())
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert "one process's step" in on_gpu.cuda_graphs_clash()
    # Another model, or a loss function of one's own, is not what the graphs record: off by default, refused where
    # asked for.
    monkeypatch.setattr(trainer.args, "cuda_graphs_clash", lambda: None)
    assert trainer.cuda_graphs_apply()
    small = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_ffn_dim=16, decoder_ffn_dim=16)
    marian = MarianMTModel(MarianConfig(vocab_size=len(tokenizer), pad_token_id=0, decoder_start_token_id=0, **small))
    trainer.model = marian
    assert not trainer.cuda_graphs_apply()
    trainer.args.cuda_graphs = True
    with pytest.raises(ValueError, match="this package's model, not MarianMTModel"):
        trainer.cuda_graphs_apply()
    trainer.model, trainer.args.cuda_graphs = model, None
    trainer.compute_loss_func = lambda outputs, labels, num_items_in_batch=None: outputs.logits.sum()
    assert not trainer.cuda_graphs_apply()
    trainer.args.cuda_graphs = True
    with pytest.raises(ValueError, match="not another compute_loss_func"):
        trainer.cuda_graphs_apply()


def eager_loss_and_gradients(model, loss, batch: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    inputs = {name: value for name, value in batch.items() if name != "labels"}
    total = loss.summed(model(**inputs).logits, batch["labels"])
    return total.detach(), list(torch.autograd.grad(total, list(model.parameters())))


def graphed_loss_and_gradients(graphed, model, batch: dict) -> tuple[torch.Tensor, list[torch.Tensor]]:
    total = graphed.summed_loss(model, batch)
    total.backward()
    gradients = [parameter.grad.clone() for parameter in model.parameters()]
    model.zero_grad()  # as the Trainer does after every step
    return total.detach(), gradients


@pytest.mark.skipif(not torch.cuda.is_available(), reason="records CUDA graphs: needs a CUDA GPU")
def test_cuda_graphs_replay_the_eager_steps_loss_and_gradients_on_a_gpu():
    from vanilla_transformer.training.cuda_graphs import GraphedSteps
    from vanilla_transformer.training.loss import LabelSmoothedCrossEntropy

    from .helpers import PAIRS, tiny_model, word_tokenizer

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0).cuda().train()
    loss = LabelSmoothedCrossEntropy(0.1)
    graphed = GraphedSteps(loss)
    batches = pair_batches(tokenizer, model, PAIRS[:4], PAIRS[4:7], PAIRS[3::-1], PAIRS[6:3:-1])
    # Each step's autograd graph is gone before the next records (as in training: a live one, such as an unreleased
    # loss, makes the recording wait on the default stream, which CUDA refuses).
    for batch in batches:  # the third and the fourth replay the first two's graphs, their pairs in another order
        batch = {name: value.cuda() for name, value in batch.items()}
        expected, eager = eager_loss_and_gradients(model, loss, batch)
        total, gradients = graphed_loss_and_gradients(graphed, model, batch)
        torch.testing.assert_close(total, expected)
        for got, gradient in zip(gradients, eager, strict=True):
            torch.testing.assert_close(got, gradient)
    assert len(graphed.graphs) == 2


def test_training_pairs_with_ids_outside_the_model_are_named_before_training():
    from vanilla_transformer.training.data import token_columns
    from vanilla_transformer.training.recipe import check_token_ids_fit

    def pairs(sources: list[list[int]], targets: list[list[int]]) -> dict:
        return token_columns(Dataset.from_dict({"input_ids": sources, "labels": targets}))

    with pytest.raises(ValueError, match=r"Training pair 2: token id 120 in labels is outside .* \[0, 99\]"):
        check_token_ids_fit(pairs([[5, 6], [7], [4]], [[8], [3], [9, 120, 3]]), vocab_size=100)
    with pytest.raises(ValueError, match=r"Training pair 0: token id -5 in input_ids"):
        check_token_ids_fit(pairs([[-5]], [[8]]), vocab_size=100)
    # A filtered dataset's rows are counted as it presents them (an indices mapping over its table).
    kept = Dataset.from_dict({"input_ids": [[5], [7], [8]], "labels": [[8], [3], [100]]})
    kept = kept.filter(lambda pair: pair["input_ids"] != [7])
    with pytest.raises(ValueError, match=r"Training pair 1: token id 100 in labels"):
        check_token_ids_fit(token_columns(kept), vocab_size=100)
    check_token_ids_fit(pairs([[5], []], [[8, -100], [3]]), vocab_size=100)  # -100: a label without loss


def test_evaluation_decodes_shortest_sources_first_and_scores_each_translation_against_its_own_reference(smoke_run):
    import numpy as np
    from datasets import Dataset, DatasetDict
    from transformers import AutoTokenizer

    from vanilla_transformer.training.train import evaluate_translations, source_order

    tokenizer = AutoTokenizer.from_pretrained(smoke_run[0])
    targets = ["der hund läuft", "ein mann", "die frau sitzt auf der bank", "zwei"]
    corpus = DatasetDict(test=Dataset.from_dict({"source": ["a b c", "a b c d e", "a", "a b"], "target": targets}))
    tokenized = DatasetDict(test=corpus["test"].map(lambda row: tokenizer(row["source"], text_target=row["target"])))
    assert source_order(tokenized["test"]) == [2, 3, 0, 1]

    class Translator:  # "translates" each source into its own reference, and records the order it was given
        processing_class = tokenizer
        given: list[str] = []

        def predict(self, dataset, metric_key_prefix):
            Translator.given = [tokenizer.decode(ids, skip_special_tokens=True) for ids in dataset["input_ids"]]
            width = max(len(ids) for ids in dataset["labels"])
            padded = [ids + [-100] * (width - len(ids)) for ids in dataset["labels"]]
            return type("Prediction", (), {"predictions": np.array(padded)})

    scores = evaluate_translations(Translator(), corpus, tokenized, ["test"], "de")["test"]
    assert [len(text.split()) for text in Translator.given] == [1, 2, 3, 5]  # shortest source first
    assert scores["bleu"] == pytest.approx(100) and scores["translations"] == 4
