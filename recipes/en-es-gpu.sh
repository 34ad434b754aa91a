#!/usr/bin/env bash
# How models/en-es was made: on one GPU, train the translator with the translate recipe
# (sp-bpe 8k, shared embeddings, bf16), keep the weights of the last 5 evaluations, export the
# last and the averaged weights as float16, then measure quality per step against a plain
# nn.Transformer script (benchmarks/translate_quality_per_step.py) in the time that is left.
#
#   OUT=/tmp/out MINUTES=5 BENCH_SECONDS=200 recipes/en-es-gpu.sh
#
# Runs from the repository root with any python3 that has torch, tokenizers, safetensors,
# sacrebleu and matplotlib (no install needed: PYTHONPATH points at this checkout).
set -euo pipefail
OUT=${OUT:-out}
MINUTES=${MINUTES:-5}
BENCH_SECONDS=${BENCH_SECONDS:-200}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-600}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
gf() { python3 -m glassformer.cli "$@"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python3 -c "import torch, tokenizers, sacrebleu; print('torch', torch.__version__,
  'tokenizers', tokenizers.__version__, 'sacrebleu', sacrebleu.__version__)"

start=$(date +%s)
gf train translate --out runs/en-es --device "$DEVICE" --quiet \
  --set bf16=true --set max_minutes="$MINUTES" --set max_steps=100000 \
  --set eval_interval=500 --set keep_snapshots=5
echo "training took $(( $(date +%s) - start )) s"
gf export runs/en-es "$OUT/en-es-avg" --average 5 || echo "fewer than 5 snapshots: no average"
gf export runs/en-es runs/en-es-last
mkdir -p "$OUT/en-es-last"
cp runs/en-es-last/model.safetensors "$OUT/en-es-last/"
cp runs/en-es/log.csv runs/en-es/train_config.json "$OUT/"

timeout "$BENCH_SECONDS" python3 benchmarks/translate_quality_per_step.py \
  --device "$DEVICE" --bf16 --steps "$STEPS" --json "$OUT/quality.json" \
  --variant "bpe:tokenizer=bpe" \
  --variant "no-share:share_embeddings=false" \
  --variant "learned-pos:positions=learned,embed_scale=false" \
  --variant "old-optim:warmup_steps=200,beta2=0.99,weight_decay=0.1,min_lr=1e-4" \
  --variant "old-recipe:tokenizer=bpe,share_embeddings=false,positions=learned,embed_scale=false,warmup_steps=200,beta2=0.99,weight_decay=0.1,min_lr=1e-4" \
  || echo "benchmark stopped after ${BENCH_SECONDS} s (results so far are in quality.json)"
