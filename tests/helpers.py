"""What the tests share: tiny models and batches, a word tokenizer, the smoke config, and a Python run that
cannot import this project (what a user of a published folder has)."""

import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, LogitsProcessor

from vanilla_transformer import VanillaTransformerConfig, VanillaTransformerForConditionalGeneration

TINY = dict(
    vocab_size=99,
    d_model=64,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=128,
    decoder_ffn_dim=128,
)


def tiny_config(**overrides) -> VanillaTransformerConfig:
    return VanillaTransformerConfig(**{**TINY, **overrides})


def tiny_model(seed: int = 0, **overrides) -> VanillaTransformerForConditionalGeneration:
    torch.manual_seed(seed)
    return VanillaTransformerForConditionalGeneration(tiny_config(**overrides)).eval()


def random_batch(batch: int = 3, source_length: int = 7, target_length: int = 6, seed: int = 1):
    """Token ids >= 4 (clear of pad/unk/bos/eos), the last source row right-padded by two."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(4, TINY["vocab_size"], (batch, source_length), generator=generator)
    labels = torch.randint(4, TINY["vocab_size"], (batch, target_length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[-1, -2:] = 0
    input_ids[-1, -2:] = 0
    return input_ids, attention_mask, labels


class EndFirstSentenceAt(LogitsProcessor):
    """The first sentence's rows (all its beams) must end at the given length; no other row may end."""

    def __init__(self, length: int, sentences: int, eos_token_id: int):
        self.length, self.sentences, self.eos = length, sentences, eos_token_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        first = torch.arange(scores.shape[0]) < scores.shape[0] // self.sentences
        scores[~first, self.eos] = -float("inf")
        if input_ids.shape[1] == self.length - 1:
            scores[first] = -float("inf")
            scores[first, self.eos] = 0.0
        return scores


SPECIAL_TOKENS = {"pad_token": "<pad>", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}


def word_tokenizer(sentences: list[str]):
    """A whitespace word-level tokenizer over `sentences`, with the config's special ids (pad 0, unk 1, bos 2,
    eos 3) and </s> appended to every sequence: enough for collators, the Trainer and generate() in tests."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS.values())}
    for word in sorted({w for s in sentences for w in s.split()}):
        vocab.setdefault(word, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, **SPECIAL_TOKENS)


PAIRS = [
    ("a dog runs on the grass", "ein hund läuft auf dem gras"),
    ("two men play football", "zwei männer spielen fußball"),
    ("a woman reads a book", "eine frau liest ein buch"),
    ("children swim in the lake", "kinder schwimmen im see"),
    ("a cat sleeps", "eine katze schläft"),
    ("the man is cooking dinner", "der mann kocht das abendessen"),
    ("a girl rides a red bicycle", "ein mädchen fährt ein rotes fahrrad"),
    ("people walk through the city", "menschen gehen durch die stadt"),
]


ROOT = Path(__file__).resolve().parent.parent
# A deadline for the training runs that tests start as subprocesses: they take ~20 s on an idle 2-core machine, and a
# loaded one was seen 15 times slower; the deadline only stops a run that hangs.
SUBPROCESS_DEADLINE_S = 1800
SMOKE = ["--config", str(ROOT / "training/configs/smoke.yaml"), "--data_dir", str(ROOT / "examples/tiny")]


def translate(folder: Path, sentences: list[str]) -> list[str]:
    """What a saved folder's model generates for the sentences, with its own generation config."""
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    generated = model.generate(**tokenizer(sentences, return_tensors="pt", padding=True))
    return tokenizer.batch_decode(generated, skip_special_tokens=True)


# What a user of a published folder lacks: this project's packages.
PROJECT_PACKAGES = ("vanilla_transformer", "training", "tools")


def run_python(
    code: str, cwd: Path, without: tuple[str, ...] = PROJECT_PACKAGES, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run `code` in a new Python, offline, with a transformers modules cache of its own under `cwd`, where importing
    the packages `without` fails (by default this project's: what a user of a published folder has). Asserts
    success and returns the finished process, whose stdout the caller reads."""
    blocked = "".join(f"sys.modules[{name!r}] = None\n" for name in without)
    script = "import sys\n" + blocked + textwrap.dedent(code)
    environment = {"HF_MODULES_CACHE": str(cwd / "modules"), "HF_HUB_OFFLINE": "1", "PATH": "", **(env or {})}
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=SUBPROCESS_DEADLINE_S,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def page_faults_of_freed_blocks(setup: str) -> int:
    """The page faults of allocating and freeing ten 64 MB tensors, as a training step's logits or a decoding step's
    vocabulary-sized tensors come and go, in a new Python after `setup` (code) has run there, from the repository
    root. With glibc's defaults each block is mapped and zeroed anew, page by page (training.allocator)."""
    code = f"""
import resource
import torch
{textwrap.dedent(setup)}
for _ in range(20):  # the first blocks leave holes in malloc's heap, which later blocks fit into
    torch.ones(2**24)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    torch.ones(2**24)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=SUBPROCESS_DEADLINE_S
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return int(result.stdout.split()[-1])


# Ten 64 MB blocks mapped anew: at least half their pages faulted in.
FAULTS_OF_BLOCKS_MAPPED_ANEW = 10 * 2**24 * 4 // 4096 // 2


def shared_data() -> Path:
    if "VT_SHARED_DATA" not in os.environ:
        pytest.skip("VT_SHARED_DATA is not set (CI sets it to ../shared/data)")
    path = Path(os.environ["VT_SHARED_DATA"])
    assert (path / "multi30k" / "train.en.gz").exists(), f"VT_SHARED_DATA={path} has no multi30k/train.en.gz"
    return path


def free_port() -> int:
    """A port nobody listens on now, so that two test runs on one machine (or two pytest-xdist workers) do not meet."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition, what: str, timeout_s: float = 120.0):
    """condition()'s first true value, polled; a test failure naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
