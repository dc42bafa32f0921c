"""Attention maps, positional-encoding pictures, the parameter table and attention recomputed by hand."""

import json
import math
import re
import warnings

import pytest
import torch

from vanilla_transformer.tools.visualize import main as visualize_main
from vanilla_transformer.visualization import (
    attention_by_hand,
    attention_maps,
    parameter_table,
    plot_attention,
    plot_positional_curves,
    plot_positional_distance,
    plot_positional_encoding,
    positional_dot_products,
)

from .helpers import PAIRS, ROOT, random_batch, tiny_model, word_tokenizer

CHINESE = [("i am a student", "我 是 学生 。"), ("i have a cat", "我 有 一只 猫 。")]


def drawn_without_missing_glyphs(figure) -> list[str]:
    """Draw the figure; return the warnings matplotlib gives for characters its fonts lack."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        figure.canvas.draw()
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


@pytest.mark.parametrize("pairs", [PAIRS, CHINESE], ids=["english-german", "english-chinese"])
def test_attention_maps_have_the_models_shapes_and_rows_that_sum_to_one(pairs):
    tokenizer = word_tokenizer([s for pair in pairs for s in pair])
    model = tiny_model(vocab_size=len(tokenizer))
    source, target = pairs[0]
    maps = attention_maps(model, tokenizer, source, target)
    source_length, target_length = len(source.split()) + 1, len(target.split()) + 1  # + </s>; <s> + target
    assert maps.source_tokens[-1] == "</s>" and maps.target_tokens[0] == "<s>"
    assert maps.target_tokens[1:] == target.split()
    assert maps.encoder.shape == (2, 4, source_length, source_length)
    assert maps.decoder.shape == (2, 4, target_length, target_length)
    assert maps.cross.shape == (2, 4, target_length, source_length)
    for kind in ("encoder", "decoder", "cross"):
        torch.testing.assert_close(maps.weights(kind).sum(-1), torch.ones(maps.weights(kind).shape[:-1]))
    assert model.config._attn_implementation == "sdpa", "the model's attention implementation is restored"


def test_masked_decoder_maps_are_zero_above_the_diagonal():
    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    maps = attention_maps(tiny_model(vocab_size=len(tokenizer)), tokenizer, *PAIRS[6])
    above = torch.triu(torch.ones(maps.decoder.shape[-2:], dtype=torch.bool), diagonal=1)
    assert (maps.decoder[..., above] == 0).all()
    assert (maps.decoder[..., ~above] > 0).all()


@pytest.mark.parametrize("pairs", [PAIRS, CHINESE], ids=["english-german", "english-chinese"])
@pytest.mark.parametrize("kind", ["encoder", "decoder", "cross"])
def test_attention_figures_draw_every_token_of_both_languages(pairs, kind):
    tokenizer = word_tokenizer([s for pair in pairs for s in pair])
    maps = attention_maps(tiny_model(vocab_size=len(tokenizer)), tokenizer, *pairs[0])
    figure = plot_attention(maps, kind)
    assert len(figure.axes) == 2 * (4 + 1)  # a row per layer; a column per head, and the average
    assert drawn_without_missing_glyphs(figure) == []
    queries, keys = maps.axis_tokens(kind)
    assert [label.get_text() for label in figure.axes[0].get_yticklabels()] == queries
    assert [label.get_text() for label in figure.axes[0].get_xticklabels()] == keys


def test_without_a_target_the_models_own_translation_is_shown():
    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    model = tiny_model(vocab_size=len(tokenizer))
    model.generation_config.max_new_tokens = 5
    maps = attention_maps(model, tokenizer, PAIRS[0][0])
    assert 1 < len(maps.target_tokens) <= 6 and maps.target_tokens[0] == "<s>"


@pytest.mark.parametrize("layer_norm_position", ["post", "pre"])
@pytest.mark.parametrize("layer,head", [(0, 0), (1, 3)])
def test_attention_by_hand_equals_what_the_model_returns(layer_norm_position, layer, head):
    model = tiny_model(layer_norm_position=layer_norm_position)
    model.set_attn_implementation("eager")
    input_ids, attention_mask, labels = random_batch()  # the last row is padded
    returned = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels, output_attentions=True)
    by_hand = attention_by_hand(model, input_ids, attention_mask, layer, head)
    torch.testing.assert_close(by_hand, returned.encoder_attentions[layer][:, head], rtol=1e-5, atol=1e-6)
    assert (by_hand[-1, :, -2:] == 0).all(), "padding gets no attention"


def test_the_dot_product_of_two_encodings_depends_on_their_distance_only():
    near, far = positional_dot_products(64, start=0, max_distance=200), positional_dot_products(64, 3_000, 200)
    torch.testing.assert_close(near, far, rtol=0, atol=1e-5)  # the encoding is float32, as the model uses it
    # sum_i sin(a w_i) sin(b w_i) + cos(a w_i) cos(b w_i) = sum_i cos(k w_i), with w_i = 10000^(-2i/d)
    frequencies = [10000 ** (-2 * i / 64) for i in range(32)]
    expected = torch.tensor([sum(math.cos(k * w) for w in frequencies) for k in range(201)], dtype=torch.float64)
    torch.testing.assert_close(near, expected, rtol=0, atol=1e-5)
    assert near[0] == pytest.approx(32) and (near[1:] < near[0]).all()


def test_positional_encoding_figures_build():
    heatmap = plot_positional_encoding(d_model=64, length=50)
    assert heatmap.axes[0].images[0].get_array().shape == (50, 64)
    assert len(plot_positional_curves(d_model=64, length=50).axes[0].lines) == 4
    distance = plot_positional_distance(d_model=64, max_distance=50, starts=(0, 7))
    first, second = (line.get_ydata() for line in distance.axes[0].lines)
    assert abs(first - second).max() < 1e-5


def test_the_readme_shows_the_parameter_table_the_model_gives():
    table = parameter_table()
    assert "| **total** | **63,082,496** | **214,245,376** |" in table
    assert table in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_chinese_guide_shows_the_same_counts_and_existing_pictures():
    """README.zh-CN.md translates the table's labels: its numbers, row by row, are the model's."""
    guide = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")

    def numbers(text: str) -> list[str]:
        return re.findall(r"\| \**([\d,]{5,})\** \| \**([\d,]{5,})\** \|", text)

    assert numbers(guide) == numbers(parameter_table()) and len(numbers(guide)) == 9
    for picture in re.findall(r"\]\((docs/images/[^)]+)\)", guide):
        assert (ROOT / picture).is_file(), picture


def test_cli_writes_attention_and_positional_encoding_pictures(smoke_run, tmp_path, capsys):
    folder, _ = smoke_run
    attention = tmp_path / "cross.png"
    visualize_main(["attention", "--model", str(folder), "--source", "a dog runs", "--output", str(attention)])
    visualize_main(["pe-distance", "--d_model", "32", "--output", str(tmp_path / "pe.png")])
    visualize_main(["parameters"])
    printed = capsys.readouterr().out
    assert "source: " in printed and parameter_table() in printed
    for picture in (attention, tmp_path / "pe.png"):
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    too_deep = ["attention", "--model", str(folder), "--source", "a dog", "--layers", "0", "2", "--output", "x.png"]
    with pytest.raises(SystemExit, match=r"Layers \[0, 2\]: the model has 2 layers, numbered 0 to 1"):
        visualize_main(too_deep)


def test_the_picture_is_written_under_the_name_given_and_printed(smoke_run, tmp_path, capsys):
    """matplotlib adds ".png" to a name without a suffix; the file named (and printed) is the one written."""
    visualize_main(["pe-curves", "--output", str(tmp_path / "curves")])
    assert capsys.readouterr().out == f"wrote {tmp_path / 'curves'}\n"
    assert (tmp_path / "curves").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "curves.png").exists()


def test_attention_maps_feed_bertviz_encoder_decoder_views():
    import bertviz  # the viz extra brings it

    tokenizer = word_tokenizer([s for pair in PAIRS for s in pair])
    maps = attention_maps(tiny_model(vocab_size=len(tokenizer)), tokenizer, *PAIRS[0])
    arguments = maps.bertviz_arguments()
    assert [layer.shape for layer in arguments["cross_attention"]] == [(1, *maps.cross.shape[1:])] * len(maps.cross)
    for view in (bertviz.head_view, bertviz.model_view):
        page = view(**arguments, html_action="return").data  # the HTML + JavaScript a notebook shows
        assert all(json.dumps(token) in page for token in maps.source_tokens + maps.target_tokens)  # ä as \\u00e4
        assert "cross" in page.lower()


def test_the_bertviz_notebook_runs_on_a_trained_folder(smoke_run):
    """examples/bertviz_attention.ipynb's code cells, in order, on the smoke model instead of the Multi30K one."""
    folder, _ = smoke_run
    notebook = json.loads((ROOT / "examples/bertviz_attention.ipynb").read_text(encoding="utf-8"))
    code = [
        "".join(cell["source"]).replace('"runs/multi30k_en_de"', repr(str(folder)))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code"
    ]
    namespace: dict = {}
    exec("\n".join(code), namespace)  # noqa: S102  (the notebook, as Jupyter would run it)
    assert namespace["maps"].target_tokens[0] == "<s>" and namespace["maps"].cross.shape[-1] == len(
        namespace["maps"].source_tokens
    )
