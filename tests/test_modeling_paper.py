"""The model is the paper's: each test names the section it checks."""

import math

import pytest
import torch

from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    sinusoidal_positional_encoding,
)
from vanilla_transformer.modeling_vanilla_transformer import shift_tokens_right
from vanilla_transformer.visualization import parameter_breakdown

from .helpers import random_batch, tiny_model


# §3.5 -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d_model", [64, 512, 63])
def test_positional_encoding_matches_the_formula_far_beyond_training_lengths(d_model):
    positions = torch.tensor([0, 1, 2, 17, 511, 4999, 20000])
    table = sinusoidal_positional_encoding(positions, d_model)
    assert table.shape == (len(positions), d_model)
    for row, pos in enumerate(positions.tolist()):
        for dim in range(d_model):
            i = dim // 2
            angle = pos / 10000 ** (2 * i / d_model)
            expected = math.sin(angle) if dim % 2 == 0 else math.cos(angle)
            assert table[row, dim].item() == pytest.approx(expected, abs=1e-6), (pos, dim)


def test_a_5000_token_input_runs():
    model = tiny_model()
    source = torch.randint(4, 99, (1, 5000))
    with torch.no_grad():
        out = model(input_ids=source, decoder_input_ids=torch.tensor([[2, 5, 6]]))
    assert torch.isfinite(out.logits).all()


def test_positional_encoding_is_not_a_saved_parameter_and_survives_loading(tmp_path):
    model = tiny_model()
    names = list(model.state_dict()) + [name for name, _ in model.named_buffers()]
    assert not any("position" in name for name in names)
    model.save_pretrained(tmp_path)
    # from_pretrained builds the model on the meta device, then loads the weights (the low-memory path).
    loaded = VanillaTransformerForConditionalGeneration.from_pretrained(tmp_path).eval()
    input_ids, attention_mask, labels = random_batch()
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits
        got = loaded(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_the_encoding_rows_kept_between_calls_are_the_formulas_at_every_offset():
    model = tiny_model()
    encoding = model.model.decoder.embeddings.embed_positions
    for start, length in [(0, 3), (5, 1), (0, 600), (599, 2), (10, 4)]:  # the table grows past 256 and 512 rows
        expected = sinusoidal_positional_encoding(torch.arange(start, start + length), 64)
        torch.testing.assert_close(encoding(start, length, torch.device("cpu")), expected, rtol=0, atol=0)
    assert encoding.table.shape == (1024, 64)
    assert "embed_positions" not in str(list(model.state_dict()))  # kept, but never saved


# §3.4 and §5.4 --------------------------------------------------------------------------------------------------
def test_embeddings_are_scaled_by_sqrt_d_model_and_added_to_the_encoding():
    model = tiny_model()
    embeddings = model.model.encoder.embeddings
    input_ids = torch.tensor([[5, 9, 13]])
    expected = embeddings.embed_tokens(input_ids) * math.sqrt(64) + sinusoidal_positional_encoding(torch.arange(3), 64)
    torch.testing.assert_close(embeddings(input_ids), expected)


def test_dropout_applies_to_the_embedding_sums_in_training():
    model = tiny_model(dropout=0.5)
    embeddings = model.model.encoder.embeddings.train()
    input_ids = torch.tensor([[5, 9, 13, 17]])
    dropped = embeddings(input_ids)
    assert (dropped == 0).float().mean() > 0.2
    embeddings.eval()
    assert (embeddings(input_ids) != 0).all()


def test_one_matrix_for_both_embeddings_and_the_pre_softmax_projection():
    model = tiny_model()
    shared = model.model.encoder.embeddings.embed_tokens.weight
    assert model.model.decoder.embeddings.embed_tokens.weight is shared
    assert model.lm_head.weight is shared
    separate = tiny_model(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    weights = [
        separate.model.encoder.embeddings.embed_tokens.weight,
        separate.model.decoder.embeddings.embed_tokens.weight,
        separate.lm_head.weight,
    ]
    assert len({w.data_ptr() for w in weights}) == 3
    tied_to_decoder = tiny_model(share_encoder_decoder_embeddings=False)
    assert tied_to_decoder.lm_head.weight is tied_to_decoder.model.decoder.embeddings.embed_tokens.weight


# §3.2 -----------------------------------------------------------------------------------------------------------
def test_multi_head_attention_is_scaled_dot_product_attention_per_head():
    model = tiny_model()
    model.set_attn_implementation("eager")
    attention = model.model.encoder.layers[0].self_attn
    x = torch.randn(2, 5, 64)
    output, weights = attention(x)
    heads, d_k = 4, 16
    q, k, v = attention.q_proj(x), attention.k_proj(x), attention.v_proj(x)
    concatenated = []
    for h in range(heads):
        part = slice(h * d_k, (h + 1) * d_k)
        head_weights = torch.softmax(q[..., part] @ k[..., part].transpose(1, 2) / math.sqrt(d_k), dim=-1)
        torch.testing.assert_close(weights[:, h], head_weights)
        concatenated.append(head_weights @ v[..., part])
    torch.testing.assert_close(output, attention.out_proj(torch.cat(concatenated, dim=-1)))


# §3.3 -----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_feed_forward_is_two_linear_maps_around_the_activation(activation):
    model = tiny_model(activation_function=activation)
    ffn = model.model.encoder.layers[0].ffn
    x = torch.randn(2, 5, 64)
    act = torch.relu if activation == "relu" else torch.nn.functional.gelu
    expected = act(x @ ffn.fc1.weight.T + ffn.fc1.bias) @ ffn.fc2.weight.T + ffn.fc2.bias
    torch.testing.assert_close(ffn(x), expected)


# §3.1 -----------------------------------------------------------------------------------------------------------
def test_post_ln_normalises_after_the_residual_and_pre_ln_before_the_sublayer():
    x = torch.randn(2, 5, 64)
    double = lambda h: 2 * h  # noqa: E731

    post = tiny_model().model.encoder.layers[0].self_attn_sublayer
    torch.testing.assert_close(post(x, double), post.layer_norm(x + 2 * x))

    pre_model = tiny_model(layer_norm_position="pre")
    pre = pre_model.model.encoder.layers[0].self_attn_sublayer
    torch.testing.assert_close(pre(x, double), x + 2 * pre.layer_norm(x))
    # Pre-LN ends each stack with one more LayerNorm; post-LN has none.
    assert pre_model.model.encoder.layer_norm is not None and pre_model.model.decoder.layer_norm is not None
    assert tiny_model().model.encoder.layer_norm is None


@pytest.mark.parametrize("position", ["post", "pre"])
def test_decoder_is_causal(position):
    model = tiny_model(layer_norm_position=position)
    input_ids, attention_mask, labels = random_batch()
    decoder_input_ids = shift_tokens_right(labels, 0, 2)
    with torch.no_grad():
        before = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
        for j in range(1, decoder_input_ids.shape[1]):
            changed = decoder_input_ids.clone()
            changed[:, j] = (changed[:, j] + 7) % 95 + 4
            after = model(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=changed).logits
            torch.testing.assert_close(after[:, :j], before[:, :j], rtol=0, atol=1e-6)
            assert not torch.allclose(after[:, j:], before[:, j:])


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_source_padding_never_changes_real_tokens(implementation):
    model = tiny_model()
    model.set_attn_implementation(implementation)
    source = torch.tensor([[11, 12, 13, 14, 3]])
    padded = torch.tensor([[11, 12, 13, 14, 3, 0, 0, 0, 0]])
    padded_mask = (padded != 0).long()
    target = torch.tensor([[2, 21, 22, 23]])
    with torch.no_grad():
        alone = model(input_ids=source, decoder_input_ids=target).logits
        with_padding = model(input_ids=padded, attention_mask=padded_mask, decoder_input_ids=target).logits
    torch.testing.assert_close(with_padding, alone, rtol=0, atol=1e-5)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_a_fully_padded_row_gives_finite_numbers(implementation):
    model = tiny_model()
    model.set_attn_implementation(implementation)
    input_ids, attention_mask, labels = random_batch()
    attention_mask[0] = 0
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    out.loss.backward()
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


# Parameter counts (Table 3) ---------------------------------------------------------------------------------------
def formula_count(config: VanillaTransformerConfig) -> dict[str, int]:
    d, v = config.d_model, config.vocab_size
    attention = 4 * d * d + 4 * d
    ffn = lambda d_ff: 2 * d * d_ff + d_ff + d  # noqa: E731
    layer_norm = 2 * d
    return {
        "embeddings": v * d,
        "encoder self-attention": config.encoder_layers * attention,
        "encoder feed-forward": config.encoder_layers * ffn(config.encoder_ffn_dim),
        "encoder layer norms": config.encoder_layers * 2 * layer_norm,
        "decoder self-attention": config.decoder_layers * attention,
        "decoder cross-attention": config.decoder_layers * attention,
        "decoder feed-forward": config.decoder_layers * ffn(config.decoder_ffn_dim),
        "decoder layer norms": config.decoder_layers * 3 * layer_norm,
    }


@pytest.mark.parametrize("preset, paper_millions", [("base", 65), ("big", 213)])
def test_parameter_count_matches_the_formulas_and_the_paper(preset, paper_millions):
    config = VanillaTransformerConfig(vocab_size=37000) if preset == "base" else VanillaTransformerConfig.big()
    with torch.device("meta"):
        model = VanillaTransformerForConditionalGeneration(config)
    breakdown = parameter_breakdown(model)
    expected = formula_count(config)
    assert {k: v for k, v in breakdown.items() if k != "total"} == expected
    assert breakdown["total"] == sum(expected.values()) == sum(p.numel() for p in model.parameters())
    assert abs(breakdown["total"] / (paper_millions * 1e6) - 1) < 0.03


def test_pre_ln_counts_its_final_layer_norms():
    model = tiny_model(layer_norm_position="pre")
    breakdown = parameter_breakdown(model)
    assert breakdown["encoder layer norms"] == 2 * 2 * 128 + 128
    assert breakdown["decoder layer norms"] == 2 * 3 * 128 + 128
    assert breakdown["total"] == sum(p.numel() for p in model.parameters())
