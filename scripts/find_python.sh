#!/usr/bin/env bash
# Prints the path of the first Python interpreter given that the set-up can install into: at least the
# `requires-python` of pyproject.toml, and at most the newest Python for which every package it installs has a build
# (torch 2.13.0, the set-up's pin, onnxruntime and gradio's orjson have none for 3.15). By default $PYTHON alone where
# it is set, else python3, then python3.14 down to the oldest release accepted. Where none is, says what each given one
# is and how to get one, and exits 1.
#   bash scripts/find_python.sh [INTERPRETER ...]
set -euo pipefail
wanted="$(sed -n 's/^requires-python = ">=\([0-9.]*\)"$/\1/p' "$(dirname "$0")/../pyproject.toml")"
newest=3.14  # follows the torch that the set-up scripts pin (scripts/train_and_translate.sh, .ci/run)
candidates=("$@")
if [ ${#candidates[@]} -eq 0 ] && [ -n "${PYTHON:-}" ]; then
    candidates=("$PYTHON")  # named by the user: that one or none
elif [ ${#candidates[@]} -eq 0 ]; then
    candidates=(python3)
    for minor in $(seq "${newest#3.}" -1 "${wanted#3.}"); do candidates+=("python3.$minor"); done
fi

at_most() {  # A B: whether version A is B or older
    [ "$(printf '%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]
}

found=()
for candidate in "${candidates[@]}"; do
    version="$("$candidate" -c 'import platform; print(platform.python_version())' 2>/dev/null)" || version=""
    if [ -z "$version" ]; then
        [ ${#candidates[@]} -gt 1 ] || found+=("$candidate is not a Python interpreter")
        continue
    fi
    release="$(echo "$version" | cut -d. -f1,2)"   # 3.15.0rc1 -> 3.15
    if at_most "$wanted" "$version" && at_most "$release" "$newest"; then
        command -v "$candidate"
        exit 0
    fi
    found+=("$candidate is $version")
done
seen="$(IFS=';'; echo "${found[*]:-no python3 was found}")"
echo "Python $wanted to $newest is needed (pyproject.toml asks for $wanted or later, as transformers and onnxruntime" \
    "do; torch 2.13.0, which the set-up installs, and onnxruntime have no build for a newer one), and" \
    "${seen//;/, }: install one (Debian, Ubuntu: sudo apt install python$wanted python$wanted-venv; Fedora: sudo dnf" \
    "install python$newest; macOS: brew install python@$newest) or name it with PYTHON=/path/to/python." >&2
exit 1
