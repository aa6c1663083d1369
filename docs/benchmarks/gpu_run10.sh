#!/usr/bin/env bash
# Tenth run (calls 1-4 ran PART=warm, diag, kernel, esrand; call 5 PART=ab; cold did not). Each PART is one device call
# of at most 10 minutes.
#   PART=warm   (nvidia-h200-x2) every config the GP could propose for the Llama set compiled into one Triton cache
#               (warm_cache.py), then on copies of it the sweep WITH baselines (they hide the search actors' start)
#               on one GPU and on two at equal per-search concurrency: the end-to-end two-GPU speed-up.
#   PART=diag   (nvidia-h200-x2) after call 1 (PART=warm: two GPUs 1.08x, their rungs ~25 ms longer each): the same
#               precompiled cache, two GPUs with and without the searches' speculative compiles
#               (RAYTUNE_ATTN_NO_SPECULATION=1), then one GPU, each actor's rung time split by step (phase_s).
#   PART=ab     (nvidia-h200-x2; call 5: the last sweep was cut by the call's limit) which change took two GPUs from run 9's 1.41x to
#               call 1-2's 1.0-1.08x: on the precompiled cache, two GPUs without baselines at DEPTH 2 and at DEPTH 1
#               (RAYTUNE_ATTN_BROKER_DEPTH=1), then with baselines at DEPTH 1; last, one GPU without baselines at
#               DEPTH 2 (the same run's one-GPU reference).
#   PART=cold   (nvidia-h200-x2) the cold-cache sweep on one GPU, then on two: what the speculative compiles of each
#               search's likely next configs (prefetch.Speculator) and the coupled screening change.
#   PART=esrand (nvidia-h200) what early stopping alone costs: the random searcher (its configs do not depend on
#               the results, so both sweeps measure the same 450 configs) with ASHA, then with FIFO on the Triton
#               cache the first one filled; compare search GPU seconds and each key's re-measured best.
#   PART=kernel (nvidia-h200) a GP sweep of issue 7's bf16 grid (pipelines/problems/grid_bf16.yaml) over the Hopper
#               space (search_spaces/nvidia/sm90.yaml), SDPA's backends measured in the same sweep.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run10.sh
RUN=run10 PART=${PART:-warm}
source docs/benchmarks/gpu_lib.sh

case $PART in
  warm)
    precompile 170 llama-1gpu-full llama-2gpu-full
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-full 180 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-full 160 --compile-workers 31 ;;
  diag)
    precompile 150 llama-2gpu-nospec-diag llama-2gpu-diag llama-1gpu-diag
    RAYTUNE_ATTN_NO_SPECULATION=1 KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-nospec-diag 135 \
      --compile-workers 31
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-diag 135 --compile-workers 31
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-diag 150 --compile-workers 31 --trials-per-gpu 48 ;;
  ab)
    precompile 150 llama-2gpu-nb-d2 llama-2gpu-nb-d1 llama-2gpu-b-d1 llama-1gpu-nb-d2
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-nb-d2 130 --compile-workers 31 --no-baselines
    RAYTUNE_ATTN_BROKER_DEPTH=1 KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-nb-d1 130 --compile-workers 31 \
      --no-baselines
    RAYTUNE_ATTN_BROKER_DEPTH=1 KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-b-d1 140 --compile-workers 31
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-nb-d2 110 --compile-workers 31 --trials-per-gpu 48 \
      --no-baselines ;;
  cold)
    CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-cold 260 --compile-workers 31 --trials-per-gpu 48
    CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-cold 240 --compile-workers 31 ;;
  esrand)
    llama llama-rand-asha 280 --searcher random --compile-workers 15
    rm -rf /tmp/triton-llama-rand-fifo; cp -r /tmp/triton-llama-rand-asha /tmp/triton-llama-rand-fifo
    KEEP_CACHE=1 llama llama-rand-fifo 280 --searcher random --compile-workers 15 --no-early-stop ;;
  kernel)
    sweep grid-bf16 540 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
esac
