#!/usr/bin/env bash
# Third H100 run: a cold-cache GP sweep of the Llama-3-8B prefill set (15 varlen keys) over the study's space,
# and the dispatch-overhead benchmark after the plan cache. Results land in $OUT.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 60 python3 -m raytune_attn.dispatch_bench --out "$OUT/dispatch_bench.json"
timeout 420 python3 -m raytune_attn tune --problems pipelines/problems/llama3_8b_prefill.yaml --searcher gp \
  --budget 30 --space search_spaces/nvidia/sm90_study.yaml --name llama-gp --out /tmp/llama-gp \
  --tracking-uri sqlite:////tmp/llama-gp-mlflow.db > "$OUT/sweep_llama_gp.log" 2>&1
echo "sweep rc=$?"; grep -v "^\[tune\|INFO\|WARNING" "$OUT/sweep_llama_gp.log" | tail -30
cp /tmp/llama-gp/trials.parquet "$OUT/llama_gp_trials.parquet"; cp /tmp/llama-gp/summary.json "$OUT/llama_gp_summary.json"
cp /tmp/llama-gp/best_configs.json "$OUT/llama_gp_best_configs.json"
