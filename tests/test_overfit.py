"""End to end: a tiny model memorises 8 sentence pairs, then generate() reproduces every target exactly."""

import torch
from transformers import DataCollatorForSeq2Seq

from .helpers import PAIRS, tiny_model, word_tokenizer


def test_tiny_model_overfits_eight_pairs_and_generates_them_back():
    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer), dropout=0.0).train()
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    batch = collator([tokenizer(src, text_target=tgt) for src, tgt in PAIRS])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for _ in range(300):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    assert loss.item() < 0.01

    model.eval()
    sources = tokenizer([src for src, _ in PAIRS], return_tensors="pt", padding=True)
    for num_beams in (1, 4):
        generated = model.generate(**sources, max_new_tokens=20, num_beams=num_beams)
        assert tokenizer.batch_decode(generated, skip_special_tokens=True) == [tgt for _, tgt in PAIRS]
