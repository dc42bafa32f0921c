#!/usr/bin/env bash
# The main job on a fresh machine: install into .venv (torch first: the CPU build), train with a shipped config,
# then translate with the trained model.
#   bash scripts/train_and_translate.sh                                   # Multi30K En→De, about 50 min on 2 CPU cores
#   bash scripts/train_and_translate.sh training/configs/smoke.yaml       # seconds: the whole pipeline on a toy corpus
#   bash scripts/train_and_translate.sh CONFIG "Sentence to translate." ...
set -euo pipefail
cd "$(dirname "$0")/.."

config="${1:-training/configs/multi30k_en_de.yaml}"
shift || true
sentences=("$@")
[ ${#sentences[@]} -gt 0 ] || sentences=("A little girl climbs into a wooden playhouse." "Two dogs play in the snow.")

[ -d .venv ] || python3 -m venv .venv
# shellcheck disable=SC1091
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q torch==2.13.0   # an unpinned torch would pull several GB of CUDA packages
python -m pip install -q -e ".[viz,demo]"   # the curves, attention pictures and the page of vt-demo

output="runs/$(basename "$config" .yaml)"
if [ -f "$output/results.json" ]; then   # written when a run has finished: reuse it, do not train or evaluate again
    echo "Translating with the finished run in $output (remove the folder to train it again)."
else
    vt-train --config "$config" --output_dir "$output"
fi
vt-translate --model "$output" "${sentences[@]}"
echo "Explore the model's attention in your browser: .venv/bin/vt-demo $output   (then open http://127.0.0.1:7860)"
