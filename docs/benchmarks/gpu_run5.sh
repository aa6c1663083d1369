#!/usr/bin/env bash
# Fifth run, on two H200s: the same GP sweep (two landscape problems, budget 20, 8 trials in flight per GPU) on
# one GPU and then on both, each with its own cold Triton cache; configs per second give the speed-up.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for n in 1 2; do
  devs=0; [ $n = 2 ] && devs=0,1
  CUDA_VISIBLE_DEVICES=$devs TRITON_CACHE_DIR=/tmp/triton-cache-$n timeout 260 python3 -m raytune_attn tune \
    --problems pipelines/problems/h100_landscapes.yaml --searcher gp --budget 20 --trials-per-gpu 8 \
    --space search_spaces/nvidia/sm90_study.yaml --name gpus-$n --out /tmp/gpus-$n --no-mlflow \
    > "$OUT/sweep_${n}gpu.log" 2>&1
  echo "sweep on $n GPU(s) rc=$?"; grep -A4 "^sweep " "$OUT/sweep_${n}gpu.log"
  cp /tmp/gpus-$n/summary.json "$OUT/sweep_${n}gpu_summary.json"; cp /tmp/gpus-$n/trials.parquet "$OUT/sweep_${n}gpu_trials.parquet"
done
