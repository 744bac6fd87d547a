#!/usr/bin/env bash
# Representative runs whose results must not change when code is only moved around:
#   bash benchmarks/same_runs.sh DIR       (once before the change, once after, e.g. from
#                                           a git worktree of each commit)
#   python benchmarks/same_runs.py BEFORE AFTER
# Each run: 200 steps, evaluated at 100 and 200, no compilation cache. Packed reverse,
# coupled copy, copy with index hints, coupled reversed addition, a file: task and a
# 2-seed sort group; then jab eval at every length 1-20, jab predict with hints and
# jab show-attention.
set -euo pipefail
out=$(realpath -m "$1"); mkdir -p "$out"
cd "$out"  # file:pairs.tsv, a relative name, as older versions of jab take it too
export COLUMNS=100
python - > pairs.tsv <<'PY'
import random
r = random.Random(0)
for _ in range(400):
    s = "".join(r.choice("abc") for _ in range(r.randint(1, 8)))
    print(f"{s}\t{s[::-1].replace('a', 'x')}")
PY
common="--steps 200 --set train.eval_every=100 --set train.log_every=50 --no-cache"
jab train --task reverse $common --out "$out/reverse" > /dev/null
jab train --task copy $common --set model.pos_encoding=coupled --out "$out/copy-coupled" > /dev/null
jab train --task copy $common --set task.index_hints=true --set model.pos_encoding=distance \
    --out "$out/copy-hints" > /dev/null
jab train --task addition $common --set task.reverse_answer=true --set model.pos_encoding=coupled \
    --out "$out/addition" > /dev/null
jab train --task file:pairs.tsv $common --out "$out/file" > /dev/null
jab train --task sort $common --seeds 2 --set model.pos_encoding=randomized --out "$out/sort2" > /dev/null
for r in reverse copy-coupled copy-hints file sort2; do
  jab eval --run "$out/$r" --lengths 1-20 --samples 10 --json > "$out/$r.eval.json"
done
jab eval --run "$out/addition" --lengths 3-20 --samples 10 --json > "$out/addition.eval.json"
jab predict 12345 --run "$out/copy-hints" > "$out/predict-hints.txt"
jab show-attention --run "$out/copy-coupled" --input 12345 --head mean > "$out/attn.txt"
