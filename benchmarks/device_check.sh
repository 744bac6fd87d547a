#!/usr/bin/env bash
# What a machine with a GPU owes jab, in one script of at most 8 minutes on one GPU:
#   1. the device JAX computes on, and the settings jab gives it;
#   2. the tests that touch devices (tests/core/test_devices.py, tests/training/test_sharding.py);
#   3. the training throughput table (benchmarks/run.py --sections train);
#   4. the paper's study, studies/chomsky_paper.yaml, at its 10,000 steps, each cell's three
#      seeds trained together in one process, for what is left of the 8 minutes (stopped by
#      a Ctrl-C's signal then: its cells keep their checkpoints, and the same command run
#      again resumes them); then its table by the paper's score and each cell's steps/s.
#
#   pip install -e ".[gpu,test]"                     # jab, JAX for CUDA 12 and the test tools
#   bash benchmarks/device_check.sh [OUT]            # OUT: where results go (default: a new folder)
#   bash benchmarks/device_check.sh --quick [OUT]    # any machine, a CPU too: a few minutes
#
# --quick runs every step at a smoke-test size (tests/core/test_devices.py alone, run.py --quick, two
# cells of the study for 20 steps and 2 seeds, measured at lengths 41-50): it checks that the
# script works, not the figures. PYTHON names the interpreter (default: python3);
# DEVICE_CHECK_SECONDS the whole budget (default 480). Everything printed also goes to
# OUT/device_check.log; the throughput figures to OUT/results.json, the study to OUT/study.
set -uo pipefail

quick=0
if [[ "${1:-}" == "--quick" ]]; then
    quick=1
    shift
fi
out="${1:-$(mktemp -d "${TMPDIR:-/tmp}/jab-device-check-XXXXXX")}"
python="${PYTHON:-python3}"
budget="${DEVICE_CHECK_SECONDS:-480}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here" || exit 2
mkdir -p "$out"
exec > >(tee -a "$out/device_check.log") 2>&1
failed=()

section() { printf '\n== %s (%d s in)\n' "$1" "$SECONDS"; }

section "device"
"$python" - <<'EOF' || failed+=(device)
import jax
from jabcli.core import memory, runtime

runtime.configure()
device = jax.devices()[0]
print(f"JAX {jax.__version__}, backend {jax.default_backend()}: {jax.device_count()} device(s),")
print(f"  the first {device.device_kind} ({device.platform}, {device.client.platform_version})")
free = memory.available_bytes()
print(f"  memory jab's checks count as free: {memory.size(free) if free else 'unknown'}")
print(f"  float32 matmul precision: {jax.config.jax_default_matmul_precision}")
EOF
if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
fi

section "tests that touch devices"
tests=(tests/core/test_devices.py tests/training/test_sharding.py)
((quick)) && tests=(tests/core/test_devices.py)
"$python" -m pytest -q -p no:cacheprovider "${tests[@]}" || failed+=(tests)

section "training throughput"
sizes=()
((quick)) && sizes=(--quick)
# At the matmul precision `jab` sets (run.py trains through jab's library, which leaves the
# process's JAX settings to the command that calls it), unless the caller chose another.
JAX_DEFAULT_MATMUL_PRECISION="${JAX_DEFAULT_MATMUL_PRECISION:-float32}" \
    "$python" benchmarks/run.py --sections train "${sizes[@]}" --out "$out/results.json" \
    || failed+=(throughput)

section "the paper's study"
study=studies/chomsky_paper.yaml
if ((quick)); then
    study="$out/chomsky_paper_quick.yaml"
    "$python" - "$study" <<'EOF' || failed+=(study)
import sys

import yaml

study = yaml.safe_load(open("studies/chomsky_paper.yaml"))
study["name"] += "_quick"
study["base"]["steps"] = 20
study["seeds"] = 2
study["rows"] = study["rows"][:2]
study["evaluate"].update(lengths="41-50", samples=2, bins=["41-50"])
yaml.safe_dump(study, open(sys.argv[1], "w"), sort_keys=False)
EOF
fi
left=$((budget - SECONDS - 60)) # a minute kept for the cells to stop and the tables
if ((left < 30)); then
    echo "no time left for the study (${SECONDS} s of ${budget} s spent)"
    failed+=(study)
else
    echo "jab study run $study --out $out/study, for at most $left s"
    timeout --signal=INT --kill-after=45 "$left" \
        "$python" -m jabcli study run "$study" --out "$out/study"
    code=$?
    ((code == 0 || code == 124 || code == 130)) || failed+=(study)
    "$python" -m jabcli study show "$out/study" --metric forced_symbol_acc --markdown \
        || echo "(no cell measured yet)"
    "$python" - "$out/study" <<'EOF' || failed+=(study)
import json
import subprocess
import sys

listed = subprocess.run(
    [sys.executable, "-m", "jabcli", "runs", sys.argv[1], "--json"],
    capture_output=True, text=True, check=True,
)
print("| cell | seeds | steps | seconds training | steps/s |\n|---|---:|---:|---:|---:|")
for run in json.loads(listed.stdout):
    seconds = run["train_s"] or 0
    rate = f"{run['step'] / seconds:.1f}" if seconds else "-"
    done = f"{run['step']} of {run['steps']}"
    print(f"| {run['run']} | {run['seeds']} | {done} | {seconds:.0f} | {rate} |")
EOF
fi

section "done"
echo "results in $out"
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}"
    exit 1
fi
