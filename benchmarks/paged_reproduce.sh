#!/usr/bin/env bash
# The paged-KV results of docs/benchmarks/paged.md on one GPU, in one device call: the Llama-3-8B decode set
# (pipelines/problems/llama3_8b_decode.yaml) tuned by `raytune-attn tune` (GP over <arch>_paged.yaml, no SDPA
# baselines: the benchmark times them), then the paged benchmark with that artifact's configs beside the defaults.
#   OUT=/tmp/out bash benchmarks/paged_reproduce.sh
# Needs the Ray/skopt/MLflow bundle in .gpu-bundle/ on a machine without network (benchmarks/gpu_lib.sh), and
# FlashInfer's wheels in $FI_WHL for its columns (benchmarks/paged_bench.sh; NO_FI=1 leaves it out). SWEEP_LIMIT and
# BENCH_TIMEOUT bound the two steps (seconds); BUDGET is the trials per problem.
RUN=${RUN:-h100}
source benchmarks/gpu_lib.sh
sweep decode "${SWEEP_LIMIT:-200}" llama3_8b_decode --searcher gp --budget "${BUDGET:-6}" --trials-per-gpu 8 \
  --compile-workers 15 --no-baselines --final-rep-ms 60
clear_host
cfg=()
[ -f /tmp/decode/best_configs.json ] && cfg=(--configs /tmp/decode/best_configs.json)
BENCH_TIMEOUT=${BENCH_TIMEOUT:-250} bash benchmarks/paged_bench.sh ${NO_FI:+--no-flashinfer} "${cfg[@]}"
