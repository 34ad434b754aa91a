#!/usr/bin/env bash
# The worked example of docs/research/sae.md (issue 41, point 5), end to end and timed: the shipped
# char-LM's residual stream after block 1 recorded over the first 300,000 characters of
# tinyshakespeare, a TopK SAE of 1,024 features (k = 32) trained on it on the CPU, evaluated on
# the last 30,000 characters (not recorded: held out) in the float64 reference engine, and the
# cards of three features read from the store.
#
#   bash benchmarks/sae_char_lm.sh [OUT]      # OUT: where the store and the SAE go (runs/sae-demo)
#
# About 5 minutes on 2 cores. Needs torch (the SAE trains with PyTorch) and tqdm.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/sae-demo}
GF=${GF:-.venv/bin/glassformer}
rm -rf "$OUT/store" "$OUT/sae"
mkdir -p "$OUT"
DATA=glassformer/data/tinyshakespeare.txt.gz
python3 -c "import gzip,sys; sys.stdout.write(gzip.open('$DATA','rt').read()[-30000:])" \
    > "$OUT/heldout.txt"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores: $(lscpu | sed -n 's/^Model name: *//p')"
set -x
time $GF record-corpus models/char-lm tinyshakespeare --steps decoder.1.out --out "$OUT/store" \
    --max-tokens 300000
time $GF sae train "$OUT/store" --step decoder.1.out --features 1024 --topk 32 --steps 3000 \
    --batch-size 1024 --lr 1e-3 --out "$OUT/sae" --overwrite --quiet
time $GF sae eval "$OUT/sae" models/char-lm "$OUT/heldout.txt" --max-tokens 4096
time $GF sae features "$OUT/sae" models/char-lm --store "$OUT/store" --feature 1016 \
    --feature 1011 --feature 1007 --k 6 --html "$OUT/features.html" --overwrite
$GF sae features "$OUT/sae" models/char-lm --store "$OUT/store" --feature 1016 --feature 1011 \
    --feature 1007 --k 6
