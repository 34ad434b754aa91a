#!/usr/bin/env bash
# The GPU checks of issue 36 (`load(device="cuda")`, `--device cuda`), for a machine where
# PyTorch sees a CUDA GPU: one command from anywhere in the checkout, under 3 minutes.
#
#   bash benchmarks/gpu_check.sh          # PYTHON=/path/to/python3 to choose the interpreter
#
# It says which PyTorch and GPU it found, then runs tests/test_devices.py, whose GPU tests compare
# generate (greedy, batched, beam), generate --record, translate (greedy, beam, n-best),
# classify, embed, eval and diff on cuda with the same model on the CPU (float32, within 1e-4;
# diff: the float64 engine within 1e-6 of the reference at every step). Where PyTorch sees no
# GPU it says so and exits 1 (the tests would only be skipped). Needs numpy, safetensors,
# tokenizers, torch and pytest; threadpoolctl for the thread tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
"$PYTHON" - <<'PY' || { echo "gpu_check: PyTorch sees no CUDA GPU here: nothing to check" >&2; exit 1; }
import sys

import torch

n = torch.cuda.device_count()
names = [torch.cuda.get_device_name(k) for k in range(n)]
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {n} GPU(s): {names}")
sys.exit(0 if n else 1)
PY
start=$SECONDS
timeout 170 "$PYTHON" -m pytest -q -p no:cacheprovider -rs tests/test_devices.py
echo "gpu_check: done in $((SECONDS - start)) s"
