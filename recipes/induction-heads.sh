#!/usr/bin/env bash
# The induction-head demo (models/induction): a two-layer attention-only decoder trained on the
# generated corpus "repeats" (random segments of letters and digits written twice, with random
# letters between the copies), recording a training time-lapse of one probe text. An induction
# head forms in layer 1 at about step 1,000 (its prefix-matching score jumps from ~0.1 to ~0.75
# while the loss on the repeated tokens falls from ~3.7 to ~1.2), after a previous-token head in
# layer 0. How long it takes: docs/benchmarks.md (measured there, once); the walk-through of
# what it shows: docs/learn/time-lapse.md.
#
#   recipes/induction-heads.sh            # runs/induction (the run), runs/induction-model
#   THREADS=2 recipes/induction-heads.sh  # PyTorch's and BLAS's threads (default: glassformer's, the
#                                         # cores less the other runnable tasks at start)
#   glassformer explain runs/induction --over-training --html runs/induction.html
#   glassformer serve runs/induction      # the explorer's Training tab
#
# Runs from the repository root with glassformer installed (make demo), or with any python3 that
# has torch, tokenizers and safetensors (PYTHONPATH points at this checkout).
set -euo pipefail
RUN=${RUN:-runs/induction}
OUT=${OUT:-runs/induction-model}  # models/induction: OUT=models/induction, then its README.md
PROBE=${PROBE:-Tq3ZbK8mWc1RxY7Tq3ZbK8mWc1R}  # a 12-character segment, 3 letters, the segment again
export PYTHONPATH=$PWD
gf() { python3 -m glassformer.cli "$@"; }
if command -v glassformer >/dev/null; then gf() { glassformer "$@"; }; fi
gf train lm --data repeats --out "$RUN" --overwrite --quiet \
  --set n_decoder_layers=2 --set d_model=128 --set n_heads=2 --set d_ff=0 \
  --set max_len=48 --set positions=rotary --set norm=pre --set tie_embeddings=false \
  --set max_steps=2000 --set warmup_steps=100 --set lr=1e-3 --set min_lr=1e-4 \
  --set batch_size=32 --set weight_decay=0 --set eval_interval=500 ${THREADS:+--threads "$THREADS"} \
  --snapshot-views "$PROBE" --view-every 25
gf export "$RUN" "$OUT" --dtype float32 --overwrite
for f in views.safetensors log.csv loss.png train_config.json; do cp "$RUN/$f" "$OUT/$f"; done
gf explain "$OUT" --over-training
