"""The checks of the model's public entry points (`forward` of the two top classes, `generate`): bad inputs end in a
ValueError that names the input and the value, instead of an index error deep inside torch.

Imported by the modeling file, and so copied beside it into saved model folders.
"""

import torch
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
    if len({shape[0] for shape in shapes.values()}) > 1:
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
    cached_length: int = 0,
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
    if source is None:
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
    check_attention_mask(
        decoder_attention_mask, (target.shape[0], cached_length + target.shape[1]), "decoder_attention_mask"
    )


def check_labels(labels: torch.Tensor, vocab_size: int, decoder_input_ids: torch.Tensor | None, **inputs) -> None:
    """Labels are token ids or -100 (no loss there), one per decoder position, for the same sentences."""
    check_token_ids(labels.masked_fill(labels == -100, 0), vocab_size, "labels")
    check_batch_sizes(**inputs, labels=labels)
    if decoder_input_ids is not None and decoder_input_ids.shape != labels.shape:
        raise ValueError(
            f"labels {tuple(labels.shape)} and decoder_input_ids {tuple(decoder_input_ids.shape)} must have the same "
            "shape: decoder position t predicts labels[t]."
        )


def check_num_beams(num_beams: int | None) -> None:
    if num_beams is not None and num_beams < 1:
        raise ValueError(f"num_beams={num_beams}: must be at least 1 (1 is greedy search).")
