#!/usr/bin/env bash
# How models/en-es was made, on one GPU (at commit 7395d69: the translate recipe has changed
# since; the model's card lists the --set flags that reproduce it). Three processes share it:
#   - the translator trained with the translate recipe (sp-bpe 8k, shared embeddings, bf16) for
#     each dropout in DROPOUTS, keeping the weights of the last 5 evaluations, then exported as
#     the float16 average of those 5 (export --average 5);
#   - benchmarks/translate_quality_per_step.py: quality per step against a plain
#     nn.Transformer script on the same batches, and which recipe choices matter (600 steps:
#     the variants say nothing about a full run).
#
#   OUT=/tmp/out MINUTES=7 BENCH_SECONDS=400 recipes/en-es-gpu.sh
#
# Runs from the repository root with any python3 that has torch, tokenizers, safetensors,
# sacrebleu and matplotlib (no install needed: PYTHONPATH points at this checkout).
set -euo pipefail
OUT=${OUT:-out}
MINUTES=${MINUTES:-7}
MAX_STEPS=${MAX_STEPS:-15000}
BENCH_SECONDS=${BENCH_SECONDS:-400}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-600}
DROPOUTS=${DROPOUTS:-0.1 0.3}
mkdir -p "$OUT" runs
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
gf() { python3 -m glassformer.cli "$@"; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python3 -c "import torch, tokenizers, sacrebleu; print('torch', torch.__version__,
  'tokenizers', tokenizers.__version__, 'sacrebleu', sacrebleu.__version__)"

start=$(date +%s)
for p in $DROPOUTS; do
  gf train translate --out "runs/en-es-d$p" --device "$DEVICE" --quiet \
    ${VALID:+--valid "$VALID"} --set dropout="$p" --set bf16=true \
    --set max_minutes="$MINUTES" --set max_steps="$MAX_STEPS" \
    --set eval_interval=500 --set keep_snapshots=5 > "runs/train-d$p.log" 2>&1 &
done
timeout "$BENCH_SECONDS" python3 benchmarks/translate_quality_per_step.py \
  --device "$DEVICE" --bf16 --steps "$STEPS" --json "$OUT/quality.json" \
  ${LIMIT:+--valid-limit "$LIMIT"} \
  --variant "relu:activation=relu" \
  --variant "lr1e-3:lr=1e-3" \
  --variant "no-share:share_embeddings=false" \
  --variant "bpe:tokenizer=bpe" \
  > runs/quality.log 2>&1 \
  || echo "benchmark stopped after ${BENCH_SECONDS} s (results so far are in quality.json)"
wait
echo "all done after $(( $(date +%s) - start )) s"
grep -v Warn runs/quality.log | grep -v "self.encoder" || true

for p in $DROPOUTS; do
  echo "== dropout $p"; cat "runs/train-d$p.log"
  mkdir -p "$OUT/d$p"
  if gf export "runs/en-es-d$p" "runs/avg-d$p" --average 5; then
    cp "runs/avg-d$p/model.safetensors" "$OUT/d$p/"
  else
    gf export "runs/en-es-d$p" "runs/avg-d$p" && cp "runs/avg-d$p/model.safetensors" "$OUT/d$p/"
  fi
  cp "runs/en-es-d$p/log.csv" "$OUT/d$p/"
done
first=$(echo $DROPOUTS | cut -d' ' -f1)
cp "runs/avg-d$first/config.json" "runs/avg-d$first/tokenizer.json" "runs/en-es-d$first/train_config.json" "$OUT/"
