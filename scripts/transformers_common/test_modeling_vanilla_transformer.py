"""transformers' own common model tests (`ModelTesterMixin`, `ConfigTester`) on this package's model.

Run by scripts/transformers_common_tests.sh inside the test tree of the installed transformers release, as
tests/models/vanilla_transformer/; the tester follows `MarianModelTester` (tests/models/marian) field by field.
"""

import unittest

from transformers.models.auto import modeling_auto
from transformers.testing_utils import require_torch

from vanilla_transformer import (
    VanillaTransformerConfig,
    VanillaTransformerForConditionalGeneration,
    VanillaTransformerModel,
)

from ...test_configuration_common import ConfigTester
from ...test_modeling_common import ModelTesterMixin, ids_tensor

# The common tests tell a base model from a model with a head by transformers' own tables, where Marian is listed:
# this model is listed there as Marian is, so that they give it labels and train it as they do Marian.
modeling_auto.MODEL_MAPPING_NAMES["vanilla_transformer"] = "VanillaTransformerModel"
modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES["vanilla_transformer"] = (
    "VanillaTransformerForConditionalGeneration"
)


class VanillaTransformerModelTester:
    """A 2+2-layer model of width 16 and a batch of 13 random sequences of 7 tokens, as Marian's tester."""

    def __init__(self, parent: unittest.TestCase, batch_size: int = 13, seq_length: int = 7) -> None:
        self.parent = parent
        self.batch_size = batch_size
        self.seq_length = seq_length
        self.encoder_seq_length = seq_length
        self.decoder_seq_length = seq_length
        self.is_training = True
        self.use_labels = False
        self.vocab_size = 99
        self.hidden_size = 16
        self.num_hidden_layers = 2
        self.num_attention_heads = 4

    def get_config(self) -> VanillaTransformerConfig:
        return VanillaTransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads,
            encoder_ffn_dim=4,
            decoder_ffn_dim=4,
            dropout=0.1,
            attention_dropout=0.1,
            bos_token_id=0,
            pad_token_id=1,
            eos_token_id=2,
            decoder_start_token_id=3,
        )

    def prepare_config_and_inputs(self) -> tuple:
        config = self.get_config()
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        input_ids[:, -1] = config.eos_token_id
        decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        # Decoder inputs begin with the start token; padding before it is a target padded on the left, which the
        # model masks without being given a mask (and whose rows then see nothing: no kernel's output to compare).
        decoder_input_ids[:, 0] = config.decoder_start_token_id
        attention_mask = input_ids.ne(config.pad_token_id)
        inputs = {
            "input_ids": input_ids,
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": attention_mask,
            "decoder_attention_mask": attention_mask,
        }
        return config, inputs

    def prepare_config_and_inputs_for_common(self) -> tuple:
        return self.prepare_config_and_inputs()


@require_torch
class VanillaTransformerModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (VanillaTransformerModel, VanillaTransformerForConditionalGeneration)
    is_encoder_decoder = True
    fx_compatible = False
    test_missing_keys = False
    # transformers 4.x tests these two; 5.0 removed both from every model, and the modeling file follows 5.x.
    test_pruning = False
    test_head_masking = False

    def setUp(self) -> None:
        self.model_tester = VanillaTransformerModelTester(self)
        self.config_tester = ConfigTester(self, config_class=VanillaTransformerConfig)

    def test_config(self) -> None:
        self.config_tester.run_common_tests()

    @unittest.skip(reason="the source release lacks tests/generation: tests/test_modeling_hf.py covers generate()")
    def test_generation_tester_mixin_inheritance(self) -> None:
        pass
