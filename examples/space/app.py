"""The demo page as a Hugging Face Space (Spaces run `python app.py`).

Put a model folder written by `training.train` next to this file as `model/` (or name another folder or Hub id in
VT_DEMO_MODEL), and list this project with its demo extra in the Space's requirements.txt
(`vanilla-transformer[demo]`, from a wheel built with `pip wheel .` or from the repository's git URL).
Locally, `vt-demo MODEL_DIR` serves the same page.
"""

import os

from vanilla_transformer.tools.demo import build_demo
from vanilla_transformer.tools.translate import load_model_folder, resolve_device

model, tokenizer = load_model_folder(os.environ.get("VT_DEMO_MODEL", "model"), resolve_device("auto"))
demo = build_demo(model, tokenizer)

if __name__ == "__main__":
    demo.launch()
