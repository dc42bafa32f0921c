#!/usr/bin/env bash
# transformers' own common model tests on this package's model, for a maintainer after a change to the modeling file
# or a new transformers release: they hold every model in transformers to the same contract (saving and loading,
# tied weights, attention implementations, outputs, resizing embeddings, gradient checkpointing, training).
#   bash scripts/transformers_common_tests.sh [PYTEST ARGS]    # in the environment where the package is installed
# The source release of the installed transformers carries tests/test_modeling_common.py and its siblings but not
# every module they import: the missing ones are written as empty stand-ins (the generation mixin among them, which
# tests/test_modeling_hf.py replaces here), and the configuration's keyword table as its 5.x keys.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version="$(python -c 'import transformers; print(transformers.__version__)')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

python -m pip download -q --no-deps --no-binary :all: "transformers==$version" -d "$work"
tar -xzf "$work"/transformers-*.tar.gz -C "$work"
root="$work/transformers-$version"
tests="$root/tests"
if [ ! -f "$tests/test_modeling_common.py" ]; then
    echo "transformers $version's source release has no tests/test_modeling_common.py" >&2
    exit 1
fi
python -c "import parameterized" 2>/dev/null || python -m pip install -q parameterized   # a test dependency of theirs

stand_in() {  # FILE CONTENT: written only where the release lacks it
    [ -f "$tests/$1" ] && return
    mkdir -p "$(dirname "$tests/$1")"
    printf '%s\n' "$2" >"$tests/$1"
}
for package in . models generation exporters utils; do stand_in "$package/__init__.py" ""; done
stand_in generation/test_utils.py "class GenerationTesterMixin: pass"
stand_in exporters/test_export.py "class ExportTesterMixin: pass"
stand_in utils/test_configuration_utils.py 'config_common_kwargs = {
    "return_dict": False, "output_hidden_states": True, "output_attentions": True, "dtype": "float16",
    "chunk_size_feed_forward": 5, "architectures": ["BertModel"], "id2label": {0: "label"}, "label2id": {"label": "0"},
    "problem_type": "regression", "tie_word_embeddings": False,
    "bos_token_id": 6, "pad_token_id": 7, "eos_token_id": 8, "decoder_start_token_id": 10,
}'
mkdir -p "$tests/models/vanilla_transformer"
touch "$tests/models/vanilla_transformer/__init__.py"
cp "$repo/scripts/transformers_common/test_modeling_vanilla_transformer.py" "$tests/models/vanilla_transformer/"

echo "transformers $version's common tests on vanilla_transformer:"
cd "$root"
python -m pytest -q -p no:cacheprovider -rs tests/models/vanilla_transformer "$@"
