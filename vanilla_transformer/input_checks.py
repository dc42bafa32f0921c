"""The checks of the model's public entry points (`forward` of the two top classes, `generate`, the tokenizer that
the pipeline pairs with the model): bad inputs end in a ValueError that names the input and the value, instead of an
index error deep inside torch or a translation in garbage.

Imported by the modeling and pipeline files, and so copied beside them into saved model folders.
"""

import hashlib
import json
import math

import torch
from transformers import GenerationConfig, PretrainedConfig, PreTrainedTokenizerBase
from transformers.cache_utils import Cache
from transformers.utils import is_torchdynamo_compiling


def check_token_ids(input_ids: torch.Tensor | None, vocab_size: int, name: str, values: bool = False) -> None:
    """Shape (batch, length), an integer type, and (on the CPU, or where `values` asks) ids inside the vocabulary.

    On a GPU, reading the ids would make the host wait for the device at every forward: there `generate()` reads its
    input once per call, and training checks its data once when the trainer starts.
    """
    if input_ids is None or is_torchdynamo_compiling():
        return
    if input_ids.dim() != 2 or 0 in input_ids.shape:
        raise ValueError(f"{name} has shape {tuple(input_ids.shape)}: expected (batch, length), both at least 1.")
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise ValueError(f"{name} holds {input_ids.dtype} values: token ids are integers (torch.long).")
    if not (values or input_ids.device.type == "cpu"):
        return
    low, high = torch.aminmax(input_ids)
    if low < 0 or high >= vocab_size:
        bad = int(low) if low < 0 else int(high)
        raise ValueError(f"Token id {bad} in {name} is outside the vocabulary (ids must be in [0, {vocab_size - 1}]).")


def check_batch_sizes(**inputs: torch.Tensor | None) -> None:
    """The inputs of one call describe the same sentences: their first dimensions must agree."""
    shapes = {name: tuple(tensor.shape) for name, tensor in inputs.items() if tensor is not None}
    sizes = [shape[0] for shape in shapes.values()]
    if any(size != sizes[0] for size in sizes[1:]):  # no set: an exported graph's sizes are symbols, not hashable
        listed = ", ".join(f"{name} {shape}" for name, shape in shapes.items())
        raise ValueError(f"The inputs disagree on the batch size (the first dimension): {listed}.")


def check_attention_mask(attention_mask: torch.Tensor | None, expected_shape: tuple[int, int], name: str) -> None:
    """A (batch, length) padding mask matches its tokens. A 4D mask (batch, 1, queries, keys) is already the attention
    pattern (generate() makes one for a static cache) and goes to the masking functions as it is."""
    if attention_mask is None or attention_mask.dim() == 4:
        return
    if tuple(attention_mask.shape) != tuple(expected_shape):
        raise ValueError(
            f"{name} has shape {tuple(attention_mask.shape)}, but the tokens it masks have shape "
            f"{tuple(expected_shape)} (batch, length)."
        )


def check_seq2seq_inputs(
    vocab_size: int,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    decoder_input_ids: torch.Tensor | None = None,
    decoder_attention_mask: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
    decoder_inputs_embeds: torch.Tensor | None = None,
    encoder_hidden_states: torch.Tensor | None = None,
    cache: Cache | None = None,
) -> None:
    """Every input of an encoder-decoder forward, checked against the vocabulary and against each other."""
    if decoder_input_ids is None and decoder_inputs_embeds is None:
        raise ValueError(
            "The decoder needs decoder_input_ids (or labels, from which they are shifted right). With the Trainer's "
            "label smoothing the labels never reach the model: build batches with DataCollatorForSeq2Seq(tokenizer, "
            "model=model), which adds decoder_input_ids."
        )
    for name, ids, embeds in (
        ("input_ids", input_ids, inputs_embeds),
        ("decoder_input_ids", decoder_input_ids, decoder_inputs_embeds),
    ):
        if ids is not None and embeds is not None:
            raise ValueError(f"Pass {name} or its embeddings, not both.")
        check_token_ids(ids, vocab_size, name)
    source = input_ids if input_ids is not None else inputs_embeds
    if source is None:  # the encoder's output given instead (generate())
        source = encoder_hidden_states
    target = decoder_input_ids if decoder_input_ids is not None else decoder_inputs_embeds
    check_batch_sizes(
        input_ids=input_ids,
        attention_mask=attention_mask,
        inputs_embeds=inputs_embeds,
        decoder_input_ids=decoder_input_ids,
        decoder_inputs_embeds=decoder_inputs_embeds,
    )
    if source is not None:
        check_attention_mask(attention_mask, source.shape[:2], "attention_mask")
    if decoder_attention_mask is not None and decoder_attention_mask.dim() == 2:  # it covers the cached positions too
        cached = cache.get_seq_length() if cache is not None else 0
        check_attention_mask(
            decoder_attention_mask, (target.shape[0], cached + target.shape[1]), "decoder_attention_mask"
        )


def check_labels(labels: torch.Tensor, vocab_size: int, decoder_input_ids: torch.Tensor | None, **inputs) -> None:
    """Labels are token ids or -100 (no loss there), one per decoder position, for the same sentences."""
    check_token_ids(labels.masked_fill(labels == -100, 0), vocab_size, "labels")
    reads_values = labels.device.type == "cpu" and not is_torchdynamo_compiling()  # as check_token_ids does
    if reads_values and not (labels != -100).any():  # the mean over no position is nan
        raise ValueError("labels are all -100: no position to compute the loss on.")
    check_batch_sizes(**inputs, labels=labels)
    if decoder_input_ids is not None and decoder_input_ids.shape != labels.shape:
        raise ValueError(
            f"labels {tuple(labels.shape)} and decoder_input_ids {tuple(decoder_input_ids.shape)} must have the same "
            "shape: decoder position t predicts labels[t]."
        )


# Generation settings that are whole numbers, with their least value; and those that name a token.
GENERATION_COUNTS = {
    "num_beams": 1,
    "num_return_sequences": 1,
    "max_new_tokens": 1,
    "max_length": 1,
    "min_new_tokens": 0,
    "max_length_beyond_source": 0,
}
GENERATION_TOKENS = (
    "eos_token_id",
    "pad_token_id",
    "bos_token_id",
    "decoder_start_token_id",
    "forced_bos_token_id",
    "forced_eos_token_id",
)


def is_finite_number(value: object) -> bool:
    """A number as YAML or JSON gives one: an int or a float, finite; not a bool, which Python counts as an int."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_generation_settings(settings: dict, vocab_size: int, where: str) -> None:
    """Decoding settings of a generate() call or of a generation_config.json (`where` names which): counts are whole
    numbers in range, the length penalty a finite number, token ids in the vocabulary. transformers accepts most
    wrong values and fails far from them, or decodes to the length limit (an end-of-sentence id it never meets)."""
    for name, least in GENERATION_COUNTS.items():
        value = settings.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            hint = " (1 is greedy search)" if name == "num_beams" else ""
            raise ValueError(f"{where}: {name}={value!r}: must be a whole number of at least {least}{hint}.")
    penalty = settings.get("length_penalty")
    if penalty is not None and not is_finite_number(penalty):
        raise ValueError(f"{where}: length_penalty={penalty!r}: must be a finite number.")
    for name in GENERATION_TOKENS:
        value = settings.get(name)
        for token_id in value if isinstance(value, list) else [value]:
            if token_id is not None and not (isinstance(token_id, int) and 0 <= token_id < vocab_size):
                raise ValueError(
                    f"{where}: {name}={token_id!r} is not a token id of the vocabulary (ids 0 to {vocab_size - 1})."
                )


def check_generation_file(path: str, vocab_size: int) -> None:
    """A generation_config.json that transformers can read, with settings in range; else a ValueError naming it."""
    try:
        with open(path, encoding="utf-8") as file:
            settings = json.load(file)
        if not isinstance(settings, dict):
            raise TypeError(f"a JSON {type(settings).__name__}, not an object of settings")
        GenerationConfig.from_dict(settings)
    except (OSError, ValueError, TypeError) as error:
        raise ValueError(f"{path} cannot be read ({error}): repair or delete it.") from None
    check_generation_settings(settings, vocab_size, path)


def vocabulary_record(tokenizer: PreTrainedTokenizerBase) -> dict[str, int | str]:
    """What a model's embeddings were trained on: its tokenizer's token count and the sha256 of its tokens in id
    order. Training writes it into config.json as `trained_vocabulary`."""
    return {"tokens": len(tokenizer), "sha256": tokens_sha256(tokenizer, len(tokenizer))}


def tokens_sha256(tokenizer: PreTrainedTokenizerBase, count: int) -> str:
    """sha256 of the tokens with ids 0 to count - 1, in id order (tokens added later, with higher ids, left out)."""
    tokens = sorted((index, token) for token, index in tokenizer.get_vocab().items() if index < count)
    return hashlib.sha256(json.dumps(tokens, ensure_ascii=False).encode("utf-8")).hexdigest()


def check_tokenizer(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase, where: str) -> None:
    """The tokenizer is the model's: no more tokens than its embeddings have rows, the same padding and end ids, and
    (where training recorded it) the same tokens under the same ids. Another vocabulary, even of the same size,
    translates into garbage without an error."""
    problem = None
    if len(tokenizer) > config.vocab_size:
        problem = f"has {len(tokenizer)} tokens, the model {config.vocab_size}"
    for name in ("pad_token_id", "eos_token_id"):  # unset in a tokenizer.json without its tokenizer_config.json
        if problem is None and getattr(tokenizer, name) not in (None, getattr(config, name)):
            problem = f"has {name} {getattr(tokenizer, name)}, the model {getattr(config, name)}"
    trained = getattr(config, "trained_vocabulary", None)
    if problem is None and trained and tokens_sha256(tokenizer, trained["tokens"]) != trained["sha256"]:
        problem = f"holds other tokens than the {trained['tokens']:,} the model was trained with"
    if problem:
        raise ValueError(
            f"{where}: the tokenizer (tokenizer.json) {problem}: it is not the model's; copy the model folder whole, "
            "its tokenizer with its weights."
        )
