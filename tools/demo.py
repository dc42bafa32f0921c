"""A page to explore a trained model: type a sentence, get its translation (and the n-best list), and watch the
attention that produced it, layer by layer and head by head; a second tab draws the positional encoding (§3.5).

vt-demo runs/multi30k_en_de                      # then open http://127.0.0.1:7860
vt-demo runs/tatoeba_en_zh --port 8080 --host 0.0.0.0

Built on Gradio, as Hugging Face Spaces are (`pip install 'vanilla-transformer[demo]'`); the pictures come from
`vanilla_transformer.visualization`, the same functions as `vt-visualize` and the README's figures.
"""

from __future__ import annotations

import argparse
import errno
import io
import socket
from typing import TYPE_CHECKING

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from vanilla_transformer.extras import MissingExtra
from vanilla_transformer.pipeline_vanilla_transformer import text_preparation
from vanilla_transformer.training import one_line_errors
from vanilla_transformer.visualization import (
    ATTENTION_KINDS,
    AttentionMaps,
    attention_maps,
    plot_attention_head,
    plot_positional_distance,
    plot_positional_encoding,
    pyplot,
)

from .translate import load_model_folder, resolve_device

if TYPE_CHECKING:  # matplotlib is the viz extra's
    from matplotlib.figure import Figure

try:
    import gradio as gr
    from PIL import Image
except ImportError:  # main() says what to install: the console script imports this module before main() runs
    gr = Image = None

AVERAGE = "average"


def n_best(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: str, num_beams: int, length_penalty: float
) -> list[tuple[str, float]]:
    """The beam's finished translations, best first, with their scores: the sum of the tokens' log-probabilities,
    divided by length^length_penalty for beam search (§6.1). The first is what generate() gives with these
    settings; greedy search (one beam) has one. `source` is prepared as the model's training text was."""
    inputs = tokenizer([text_preparation(tokenizer)(source)], return_tensors="pt").to(model.device)
    with torch.inference_mode():
        output = model.generate(
            **inputs,
            num_beams=num_beams,
            num_return_sequences=num_beams,
            length_penalty=length_penalty,
            output_scores=True,
            return_dict_in_generate=True,
        )
    if num_beams > 1:
        scores = output.sequences_scores.tolist()
    else:
        steps = model.compute_transition_scores(output.sequences, output.scores, normalize_logits=True)  # (1, T)
        scores = steps.masked_fill(steps.isinf(), 0.0).sum(-1).tolist()
    texts = tokenizer.batch_decode(output.sequences, skip_special_tokens=True)
    return [(text.strip(), round(score, 4)) for text, score in zip(texts, scores, strict=True)]


def as_image(figure: Figure) -> Image.Image:
    """A matplotlib figure as a PNG image (the figure is closed: the page draws many)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    pyplot().close(figure)
    buffer.seek(0)
    return Image.open(buffer)


def heatmap(maps: AttentionMaps | None, kind: str, layer: str, head: str) -> Image.Image | None:
    """The chosen map (layer and head as the page shows them, from 1) of the last translation, if any."""
    if maps is None:
        return None
    chosen_head = None if head == AVERAGE else int(head) - 1
    return as_image(plot_attention_head(maps, kind, int(layer) - 1, chosen_head))


def build_demo(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> gr.Blocks:
    """The page for one model and its tokenizer."""
    config = model.config
    generation = model.generation_config
    layers = [str(n) for n in range(1, max(config.encoder_layers, config.decoder_layers) + 1)]
    heads = [AVERAGE, *(str(n) for n in range(1, config.encoder_attention_heads + 1))]

    def translate(
        source: str, num_beams: float, length_penalty: float, kind: str, layer: str, head: str
    ) -> tuple[str, list[list], AttentionMaps, Image.Image | None]:
        if not source.strip():
            raise gr.Error("Type a sentence to translate.")
        candidates = n_best(model, tokenizer, source, int(num_beams), length_penalty)
        maps = attention_maps(model, tokenizer, source, candidates[0][0])
        ranked = [[rank, text, score] for rank, (text, score) in enumerate(candidates, start=1)]
        return candidates[0][0], ranked, maps, heatmap(maps, kind, layer, head)

    with gr.Blocks(title="vanilla-transformer: look inside") as demo:
        gr.Markdown(
            f"## Attention Is All You Need, trained\n{config.encoder_layers} + {config.decoder_layers} layers, "
            f"d_model {config.d_model}, {config.encoder_attention_heads} heads, {config.vocab_size:,} tokens."
        )
        maps = gr.State(None)
        with gr.Tab("Translate and attention"):
            with gr.Row():
                source = gr.Textbox(label="Source sentence", elem_id="source", scale=3)
                with gr.Column(scale=1):
                    num_beams = gr.Slider(1, 8, value=generation.num_beams or 1, step=1, label="Beam size")
                    length_penalty = gr.Slider(
                        0.0, 2.0, value=generation.length_penalty, step=0.1, label="Length penalty (§6.1: 0.6)"
                    )
            translate_button = gr.Button("Translate", variant="primary", elem_id="translate")
            translation = gr.Textbox(label="Translation", elem_id="translation", interactive=False)
            candidates = gr.Dataframe(headers=["rank", "translation", "score"], label="n-best", elem_id="nbest")
            with gr.Row():
                kind = gr.Radio(
                    [(label, name) for name, label in ATTENTION_KINDS.items()],
                    value="cross",
                    label="Attention",
                    elem_id="kind",
                )
                layer = gr.Radio(layers, value="1", label="Layer", elem_id="layer")
                head = gr.Radio(heads, value=AVERAGE, label="Head", elem_id="head")
            picture = gr.Image(label="Attention weights (rows: queries, columns: keys)", elem_id="heatmap")
            gr.on(
                [translate_button.click, source.submit],
                translate,
                [source, num_beams, length_penalty, kind, layer, head],
                [translation, candidates, maps, picture],
            )
            for control in (kind, layer, head):
                control.change(heatmap, [maps, kind, layer, head], picture)
        with gr.Tab("Positional encoding"):
            with gr.Row():
                d_model = gr.Slider(16, 1024, value=config.d_model, step=16, label="d_model", elem_id="d_model")
                length = gr.Slider(10, 500, value=100, step=10, label="Positions / distances")
            encoding = gr.Image(label="PE(pos, i): sin on even, cos on odd dimensions", elem_id="pe")
            distance = gr.Image(label="PE(pos) · PE(pos + k): a function of k alone", elem_id="pe_distance")

            def draw(width: float, positions: float) -> tuple[Image.Image, Image.Image]:
                figures = (plot_positional_encoding, plot_positional_distance)
                return tuple(as_image(plot(int(width), int(positions))) for plot in figures)

            for control in (d_model, length):
                control.release(draw, [d_model, length], [encoding, distance])
            demo.load(draw, [d_model, length], [encoding, distance])
    return demo


def port_number(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port}: a port is a number from 0 to 65535")
    return port


def check_address(host: str, port: int) -> None:
    """The page can be served at host:port: the name resolves to this machine and the port is free (Gradio says
    neither; it blames the port for a bad host)."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as error:
        raise ValueError(f"--host {host}: no such address ({error.strerror}).") from None
    try:
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: a closed port is free
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise ValueError(f"--port {port}: in use on {host}; choose another port.") from None
        raise ValueError(f"--host {host}: not an address of this machine ({error.strerror}).") from None


def parse_arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vt-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", help="A model folder written by training.train (or a Hub id).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to serve on (0.0.0.0: every interface).")
    parser.add_argument("--port", type=port_number, default=7860)
    parser.add_argument("--device", default="auto", help="cpu, cuda, ... (default: cuda if available).")
    return parser.parse_args(argv)


@one_line_errors
def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    if gr is None:
        raise MissingExtra("The demo needs Gradio", "demo")
    check_address(args.host, args.port)
    model, tokenizer = load_model_folder(args.model, resolve_device(args.device))
    build_demo(model, tokenizer).launch(server_name=args.host, server_port=args.port)


if __name__ == "__main__":
    main()
