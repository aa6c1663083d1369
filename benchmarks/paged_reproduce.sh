#!/usr/bin/env bash
# The paged-KV results of docs/benchmarks/paged.md on one GPU: the Llama-3-8B decode set
# (pipelines/problems/llama3_8b_decode.yaml) tuned by `raytune-attn tune` (GP over <arch>_paged.yaml, no SDPA
# baselines: the benchmark times them), then the paged benchmark with that artifact's configs beside the defaults.
#   OUT=/tmp/out bash benchmarks/paged_reproduce.sh
# Needs the Ray/skopt/MLflow bundle in .gpu-bundle/ on a machine without network (benchmarks/gpu_lib.sh), and
# FlashInfer's wheels in $FI_WHL for its columns (benchmarks/paged_bench.sh; NO_FI=1 leaves it out). The bundle and
# the wheels together exceed what one device call here carries, so the committed results ran in two calls:
#   SWEEP_ONLY=1 OUT=/tmp/out bash benchmarks/paged_reproduce.sh            # the sweep: $OUT/decode_best_configs.json
#   OUT=/tmp/out FI_WHL=.fi-whl bash benchmarks/paged_bench.sh --configs decode_best_configs.json
# SWEEP_LIMIT and BENCH_TIMEOUT bound the two steps (seconds); BUDGET is the trials per problem.
RUN=${RUN:-h100}
source benchmarks/gpu_lib.sh
sweep decode "${SWEEP_LIMIT:-200}" llama3_8b_decode --searcher gp --budget "${BUDGET:-10}" --trials-per-gpu 8 \
  --compile-workers 15 --no-baselines --final-rep-ms 60
cp /tmp/decode/best_configs.json "$OUT/decode_best_configs.json" 2>/dev/null
clear_host
[ "${SWEEP_ONLY:-0}" = 1 ] && exit 0
cfg=()
[ -f /tmp/decode/best_configs.json ] && cfg=(--configs /tmp/decode/best_configs.json)
BENCH_TIMEOUT=${BENCH_TIMEOUT:-250} bash benchmarks/paged_bench.sh ${NO_FI:+--no-flashinfer} "${cfg[@]}"
