#!/usr/bin/env bash
# The main job on a fresh machine: install into .venv (torch first: the CPU build), train with a shipped config,
# then translate with the trained model.
#   bash scripts/train_and_translate.sh                                   # Multi30K En→De, 40-90 min on 2 CPU cores
#   bash scripts/train_and_translate.sh training/configs/multi30k_en_de_quick.yaml   # the same in about 25 minutes
#   bash scripts/train_and_translate.sh training/configs/smoke.yaml       # seconds: the whole pipeline on a toy corpus
#   bash scripts/train_and_translate.sh CONFIG "Sentence to translate." ...
set -euo pipefail
cd "$(dirname "$0")/.."

config="${1:-training/configs/multi30k_en_de.yaml}"
shift || true
sentences=("$@")
[ ${#sentences[@]} -gt 0 ] || sentences=("A little girl climbs into a wooden playhouse." "Two dogs play in the snow.")

if [ -d .venv ]; then
    bash scripts/find_python.sh .venv/bin/python >/dev/null || {
        echo ".venv was made with that Python: remove it (rm -rf .venv) and run this again." >&2
        exit 1
    }
else
    python="$(bash scripts/find_python.sh)"
    "$python" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
# An unpinned torch would pull several GB of CUDA packages (find_python.sh's newest Python follows this pin).
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[viz,demo,onnx]"   # the curves, attention pictures, and the explorer's ONNX export

output="runs/$(basename "$config" .yaml)"
if [ -f "$output/results.json" ]; then   # written when a run has finished: reuse it, do not train or evaluate again
    echo "Translating with the finished run in $output (remove the folder to train it again)."
else
    vt-train --config "$config" --output_dir "$output"
fi
vt-translate --model "$output" "${sentences[@]}"
# The explorer: the model in a static page (building it fetches two JavaScript libraries with npm, once).
if command -v npm >/dev/null; then
    vt-site build "$output-site" --model "$output" --force   # it says how to open the page
else
    echo "To explore the model in your browser, install Node.js (npm), then: .venv/bin/vt-site build $output-site --model $output"
fi
