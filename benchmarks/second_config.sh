#!/usr/bin/env bash
# How long a `jab train` takes when an earlier config differed from it only where no
# program does (its step count, or its seed), in a fresh cache:
#   bash benchmarks/second_config.sh [CODE [OPTION...]]
# CODE: a folder holding jabcli/ (default: here), e.g. the code before a change from
# `git archive`. Trains reverse for 100 steps, then times a whole second process
# training it with OPTION... (default: --steps 120).
set -euo pipefail
code=$(realpath "${1:-.}"); shift || true
second=("$@"); [ ${#second[@]} -gt 0 ] || second=(--steps 120)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work"
export XDG_CACHE_HOME="$work/cache" PYTHONPATH="$code"
train() {  # quietly; what went wrong, if anything, on stderr
    python -m jabcli train --task reverse --steps 100 "$@" > log 2>&1 || { cat log >&2; exit 1; }
}
train --out first
start=$(date +%s.%N)
train "${second[@]}" --out second
end=$(date +%s.%N)
python -c "print(f'the second config ({\" \".join(\"${second[*]}\".split())}): {$end - $start:.1f} s')"
