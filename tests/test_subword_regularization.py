"""BPE-dropout: training pairs segmented anew every epoch, batches cut again for their lengths, nothing else changed."""

import random
import re

import pytest
from transformers import AutoTokenizer

from vanilla_transformer.training.arguments import parse_arguments
from vanilla_transformer.training.batching import TokenBudgetBatchSampler
from vanilla_transformer.training.subword_regularization import BpeDropoutPairs, tokenizer_with_bpe_dropout
from vanilla_transformer.training.tokenizer import VocabularySettings, train_tokenizer
from vanilla_transformer.training.train import main as train_main

from .helpers import SMOKE

ENGLISH = [
    "Two young, White males are outside near many bushes.",
    "Several men in hard hats are operating a giant pulley system.",
    "A little girl climbing into a wooden playhouse.",
    "A man in a blue shirt is standing on a ladder cleaning windows.",
]
GERMAN = [
    "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    "Mehrere Männer mit Schutzhelmen bedienen ein Antriebsradsystem.",
    "Ein kleines Mädchen klettert in ein Spielhaus aus Holz.",
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt Fenster.",
]


@pytest.fixture(scope="module")
def tokenizer():
    return train_tokenizer((ENGLISH + GERMAN) * 10, VocabularySettings(vocab_size=300, normalization="identity"))


def test_dropout_segments_the_same_text_into_more_and_varying_pieces(tokenizer):
    dropping = tokenizer_with_bpe_dropout(tokenizer, 0.3)
    plain = tokenizer(ENGLISH * 5)["input_ids"]
    first, second = dropping(ENGLISH * 5)["input_ids"], dropping(ENGLISH * 5)["input_ids"]
    assert first != second and sum(map(len, first)) > sum(map(len, plain))
    for ids in first:  # other pieces of the same text, ending in </s>
        assert ids[-1] == tokenizer.eos_token_id
    assert tokenizer.batch_decode(first, skip_special_tokens=True) == ENGLISH * 5
    assert tokenizer(ENGLISH * 5)["input_ids"] == plain  # the tokenizer that ships is untouched


def test_only_a_bpe_vocabulary_and_a_probability_are_accepted(tokenizer):
    unigram = train_tokenizer(ENGLISH * 10, VocabularySettings(vocab_size=60, model_type="unigram"))
    with pytest.raises(ValueError, match="--bpe_dropout needs a BPE vocabulary; this tokenizer's model is Unigram"):
        tokenizer_with_bpe_dropout(unigram, 0.1)
    with pytest.raises(ValueError, match=re.escape("--bpe_dropout 1.0: must be in (0, 1)")):
        tokenizer_with_bpe_dropout(tokenizer, 1.0)
    with pytest.raises(SystemExit, match=re.escape("--bpe_dropout -0.1: must be in [0, 1) (0: off)")):
        parse_arguments([*SMOKE, "--bpe_dropout", "-0.1"])
    with pytest.raises(SystemExit, match="--regroup_batches with --bpe_dropout: BPE-dropout already cuts new"):
        parse_arguments([*SMOKE, "--bpe_dropout", "0.1", "--regroup_batches", "true"])


def test_each_epoch_has_new_segmentations_and_batches_cut_for_them(tokenizer):
    sources, targets = ENGLISH * 30, GERMAN * 30
    plain = tokenizer(sources, text_target=targets)
    lengths = [[len(ids) for ids in plain[column]] for column in ("input_ids", "labels")]
    batches = TokenBudgetBatchSampler(*lengths, max_tokens=200, seed=1)
    count = len(batches)
    pairs = BpeDropoutPairs(sources, targets, tokenizer, 0.3, batches)
    first = [pairs[i] for i in range(len(pairs))]
    pairs.set_epoch(0)  # called again for the same epoch: nothing drawn anew
    assert [pairs[i] for i in range(len(pairs))] == first
    pairs.set_epoch(1)
    second = [pairs[i] for i in range(len(pairs))]
    assert second != first and set(second[0]) == {"input_ids", "labels"}  # the collator makes the masks
    assert len(batches) == count and sorted(i for batch in batches for i in batch) == list(range(len(sources)))
    # Cut from this epoch's lengths: a batch holds pairs of about one size, so padding stays small.
    real = sum(len(p["input_ids"]) + len(p["labels"]) for p in second)
    padded = sum(
        len(b) * (max(len(second[i]["input_ids"]) for i in b) + max(len(second[i]["labels"]) for i in b))
        for b in batches
    )
    assert real / padded > 0.82  # 0.84 to 0.87 over 200 draws; 0.73 to 0.78 with the plain segmentation's batches


@pytest.mark.parametrize("stretch", [0.7, 1.0, 1.15, 1.6])
def test_recut_gives_as_many_batches_each_within_one_budget(stretch):
    rng = random.Random(0)
    source = [rng.randint(3, 40) for _ in range(3000)]
    target = [max(2, round(s * rng.uniform(0.8, 1.2))) for s in source]
    sampler = TokenBudgetBatchSampler(source, target, max_tokens=1024, seed=1)
    count = len(sampler)
    longer_source = [max(1, round(s * stretch * rng.uniform(0.9, 1.1))) for s in source]
    longer_target = [max(1, round(t * stretch * rng.uniform(0.9, 1.1))) for t in target]
    sampler.recut(longer_source, longer_target)
    assert len(sampler) == count == len(list(sampler))
    assert sorted(i for batch in sampler for i in batch) == list(range(3000))
    sizes = [len(b) * max(max(longer_source[i], longer_target[i]) for i in b) for b in sampler.batches]
    assert max(sizes) <= 1024 * stretch * 1.25  # the budget grows with the lengths, not past them


def test_a_run_with_bpe_dropout_trains_on_each_epochs_segmentation_and_ships_the_plain_tokenizer(tmp_path, monkeypatch):
    drawn = {}
    set_epoch = BpeDropoutPairs.set_epoch

    def record(pairs: BpeDropoutPairs, epoch: int) -> None:
        set_epoch(pairs, epoch)
        drawn[epoch] = [pairs[i]["input_ids"] for i in range(len(pairs))]

    monkeypatch.setattr(BpeDropoutPairs, "set_epoch", record)
    output = tmp_path / "run"
    train_main([*SMOKE, "--output_dir", str(output), "--bpe_dropout", "0.3", "--max_steps", "20", "--save_steps", "10"])
    assert len(drawn) >= 3 and drawn[0] != drawn[1] != drawn[2]  # the smoke corpus is a few batches: epochs are short
    shipped = AutoTokenizer.from_pretrained(output)
    assert shipped.backend_tokenizer.model.dropout is None
    assert "| BPE-dropout | 0.3 |" in (output / "README.md").read_text(encoding="utf-8")
