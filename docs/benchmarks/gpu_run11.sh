#!/usr/bin/env bash
# Eleventh run (call 1 ran PART=scale, call 2 PART=scale2; the ramp and early-stopping parts prepared here ran as
# gpu_run12.sh's). Each PART is one device call of at most 10 minutes.
#   PART=scale  (nvidia-h200-x2) after run 10's call 5 (PART=ab: the baselines measured before the sweep, not the
#               two-rung queue, halved two GPUs' mid-sweep rate): the sweep as it now runs by default (search actors
#               started beside the GPU actors, SDPA's baselines after the final re-measure) on one GPU, then on two,
#               on copies of one precompiled Triton cache at equal per-search concurrency; then, on one GPU, the
#               rung's host-side steps before and after SDPA's baselines in one process (baseline_pollution.py).
#   PART=scale2 (nvidia-h200-x2) after PART=scale (1.45x; both sweeps' first trial 11-13 s after Tune started, the
#               same with the search actors started early): Tune now starts once every search has its first
#               suggestion, and the compile actor closes its workers at once; both sweeps with the same flags
#               (--trials-per-gpu 48 per GPU), two GPUs first.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run11.sh
RUN=run11 PART=${PART:-scale}
source docs/benchmarks/gpu_lib.sh

case $PART in
  scale)
    precompile 150 llama-1gpu llama-2gpu
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu 150 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu 130 --compile-workers 31
    TRITON_CACHE_DIR=/tmp/triton-full CUDA_VISIBLE_DEVICES=0 timeout 120 python3 \
      docs/benchmarks/baseline_pollution.py --out "$OUT/pollution.json" 2>&1 | tail -20 | tee "$OUT/pollution.log" ;;
  scale2)
    precompile 150 llama-2gpu-same llama-1gpu-same
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-same 140 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-same 170 --compile-workers 31 --trials-per-gpu 48 ;;
esac
