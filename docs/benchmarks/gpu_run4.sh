#!/usr/bin/env bash
# Fourth H100 run: GP sweeps (budget 20) of the two problems with recorded exhaustive landscapes, with and
# without early stopping, then the inference example on the sweep's artifact. Results land in $OUT.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
for mode in asha fifo; do
  flag=""; [ $mode = fifo ] && flag="--no-early-stop"
  timeout 240 python3 -m raytune_attn tune --problems pipelines/problems/h100_landscapes.yaml --searcher gp \
    --budget 20 --space search_spaces/nvidia/sm90_study.yaml --name land-$mode --out /tmp/land-$mode $flag \
    --tracking-uri sqlite:////tmp/land-mlflow.db > "$OUT/sweep_$mode.log" 2>&1
  echo "sweep $mode rc=$?"; grep -A6 "^sweep " "$OUT/sweep_$mode.log"
  cp /tmp/land-$mode/trials.parquet "$OUT/land_${mode}_trials.parquet"; cp /tmp/land-$mode/summary.json "$OUT/land_${mode}_summary.json"
done
cp /tmp/land-asha/best_configs.json "$OUT/best_configs.json"
timeout 100 python3 examples/inference.py /tmp/land-asha/best_configs.json --out "$OUT/inference.json"
