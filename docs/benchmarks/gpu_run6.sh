#!/usr/bin/env bash
# Sixth run (H100), in two parts (each one device call):
#   PART=exhaustive  every config of the study's 450-config space on each of the 15 Llama-3-8B prefill keys (the
#                    exhaustive bests the sweep is judged against).
#   PART=knobs       the Hopper-knob check (docs/kernel.md).
#   PART=sweep       the GP sweep of the same 15 keys, cold Triton cache, with early stopping (ASHA) and without
#                    (FIFO), each in its own cold cache: wall time, GPU busy fraction, overhead, savings.
set -u
# Run from a snapshot of the commit (git archive HEAD) so the kernel measured is the committed one:
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run6.sh
mkdir -p /tmp/site && tar -xJf "${BUNDLE:-.gpu-bundle/devenv-py312.tar.xz}" -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PART=${PART:-exhaustive}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
KEYS=$(python3 -c "from raytune_attn.sweep.problems import load_problems
print(' '.join('--problem ' + p.key for p in load_problems('llama3_8b_prefill')))")
if [ "$PART" = exhaustive ]; then
  TRITON_CACHE_DIR=/tmp/triton-exh timeout 420 python3 -m raytune_attn.exhaustive \
    --space search_spaces/nvidia/sm90_study.yaml $KEYS --out "$OUT/llama_exhaustive.parquet" --rep-ms 20 \
    --timeout-s 60 --workers 15 > "$OUT/llama_exhaustive.log" 2>&1
  echo "exhaustive rc=$?"; grep '^{' "$OUT/llama_exhaustive.log" | cut -c1-220
elif [ "$PART" = knobs ]; then
  TRITON_CACHE_DIR=/tmp/triton-knobs timeout 150 python3 docs/benchmarks/gpu_knobs_check.py --out "$OUT/knobs.json" \
    > "$OUT/knobs.log" 2>&1
  echo "knobs rc=$?"; tail -40 "$OUT/knobs.log"
else
  for mode in asha fifo; do
    flag=""; [ $mode = fifo ] && flag="--no-early-stop"
    TRITON_CACHE_DIR=/tmp/triton-$mode timeout 270 python3 -m raytune_attn tune --problems llama3_8b_prefill \
      --searcher gp --budget 30 --trials-per-gpu 24 --space search_spaces/nvidia/sm90_study.yaml $flag \
      --name llama-$mode --out /tmp/llama-$mode --tracking-uri sqlite:////tmp/llama-$mode.db \
      > "$OUT/sweep_$mode.log" 2>&1
    echo "sweep $mode rc=$?"; grep -A16 "^sweep " "$OUT/sweep_$mode.log" | cut -c1-250
    cp /tmp/llama-$mode/summary.json "$OUT/sweep_${mode}_summary.json"
    cp /tmp/llama-$mode/trials.parquet "$OUT/sweep_${mode}_trials.parquet"
  done
fi
