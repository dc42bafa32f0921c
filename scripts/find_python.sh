#!/usr/bin/env bash
# Prints the path of the first Python interpreter given that is at least the `requires-python` of pyproject.toml; by
# default $PYTHON alone where it is set, else python3, then python3.14 down to the oldest release accepted. Where none
# is, says what each given one is and how to get one, and exits 1.
#   bash scripts/find_python.sh [INTERPRETER ...]
set -euo pipefail
wanted="$(sed -n 's/^requires-python = ">=\([0-9.]*\)"$/\1/p' "$(dirname "$0")/../pyproject.toml")"
candidates=("$@")
if [ ${#candidates[@]} -eq 0 ] && [ -n "${PYTHON:-}" ]; then
    candidates=("$PYTHON")  # named by the user: that one or none
elif [ ${#candidates[@]} -eq 0 ]; then
    candidates=(python3)
    for minor in $(seq 14 -1 "${wanted#3.}"); do candidates+=("python3.$minor"); done
fi

found=()
for candidate in "${candidates[@]}"; do
    if ! version="$("$candidate" -c 'import platform; print(platform.python_version())' 2>/dev/null)"; then
        [ ${#candidates[@]} -gt 1 ] || found+=("$candidate is not a Python interpreter")
        continue
    fi
    if [ "$(printf '%s\n' "$wanted" "$version" | sort -V | head -n 1)" = "$wanted" ]; then
        command -v "$candidate"
        exit 0
    fi
    found+=("$candidate is $version")
done
seen="$(IFS=';'; echo "${found[*]:-no python3 was found}")"
echo "Python $wanted or later is needed (pyproject.toml; transformers and onnxruntime ask for it too), and" \
    "${seen//;/, }: install one (Debian, Ubuntu: sudo apt install python$wanted python$wanted-venv)" \
    "or name it with PYTHON=/path/to/python." >&2
exit 1
