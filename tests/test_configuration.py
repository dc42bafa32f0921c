import pytest
from transformers import AutoConfig

from vanilla_transformer import VanillaTransformerConfig


def test_defaults_are_the_papers_base_model():
    config = VanillaTransformerConfig()
    assert (config.d_model, config.encoder_layers, config.decoder_layers) == (512, 6, 6)
    assert (config.encoder_attention_heads, config.decoder_attention_heads) == (8, 8)
    assert (config.encoder_ffn_dim, config.decoder_ffn_dim) == (2048, 2048)
    assert config.dropout == 0.1
    assert config.activation_function == "relu"
    assert config.layer_norm_position == "post"
    assert config.scale_embedding and config.share_encoder_decoder_embeddings and config.tie_word_embeddings
    assert config.init_std == pytest.approx(512**-0.5)
    assert config.is_encoder_decoder and config.model_type == "vanilla_transformer"


def test_big_preset_and_overrides():
    big = VanillaTransformerConfig.big()
    assert (big.d_model, big.encoder_attention_heads, big.decoder_attention_heads) == (1024, 16, 16)
    assert (big.encoder_ffn_dim, big.decoder_ffn_dim, big.dropout) == (4096, 4096, 0.3)
    assert big.encoder_layers == 6
    assert VanillaTransformerConfig.big(vocab_size=8000, dropout=0.1).dropout == 0.1


def test_attribute_map_gives_generic_names():
    config = VanillaTransformerConfig(d_model=256, encoder_attention_heads=4, encoder_layers=3)
    assert (config.hidden_size, config.num_attention_heads, config.num_hidden_layers) == (256, 4, 3)


def test_round_trip_through_auto_config(tmp_path):
    VanillaTransformerConfig(d_model=128, encoder_attention_heads=4, decoder_attention_heads=4).save_pretrained(
        tmp_path
    )
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, VanillaTransformerConfig)
    assert loaded.d_model == 128 and loaded.init_std == pytest.approx(128**-0.5)


@pytest.mark.parametrize(
    "overrides, named",
    [
        ({"d_model": 100, "encoder_attention_heads": 8}, "d_model=100"),
        ({"decoder_attention_heads": 7}, "decoder_attention_heads=7"),
        ({"layer_norm_position": "middle"}, "'middle'"),
        ({"activation_function": "swishy"}, "'swishy'"),
        ({"encoder_layers": -1}, r"encoder_layers=-1: must be a whole number of at least 1"),
        ({"d_model": 0}, r"d_model=0: must be a whole number"),
        ({"vocab_size": 0}, r"vocab_size=0: must be a whole number"),
        ({"decoder_ffn_dim": "2048"}, r"decoder_ffn_dim='2048': must be a whole number"),
        ({"encoder_attention_heads": 0}, r"encoder_attention_heads=0: must be a whole number"),
        ({"dropout": 1.5}, r"dropout=1.5: a dropout probability must be a number from 0 to 1"),
        ({"attention_dropout": -0.1}, r"attention_dropout=-0.1"),
        ({"activation_dropout": "high"}, r"activation_dropout='high'"),
        ({"vocab_size": 3}, r"eos_token_id=3 is not a token id of the vocabulary \(vocab_size=3: ids 0 to 2\)"),
        ({"pad_token_id": 37000}, r"pad_token_id=37000 is not a token id"),
        ({"eos_token_id": [3, -1]}, r"eos_token_id=-1 is not a token id"),
        ({"scale_embedding": "false"}, r"scale_embedding='false': must be true or false"),  # was read as true
        ({"tie_word_embeddings": 0}, r"tie_word_embeddings=0: must be true or false"),
    ],
)
def test_bad_architecture_is_a_value_error_naming_the_value(overrides, named):
    with pytest.raises(ValueError, match=named):
        VanillaTransformerConfig(**overrides)
