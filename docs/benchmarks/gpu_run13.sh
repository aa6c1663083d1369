#!/usr/bin/env bash
# Thirteenth run. Each PART is one device call of at most 10 minutes (one H200 unless said).
#   PART=land256 the D=256 landscape that replay lacked: every config of docs/benchmarks/d256_space.yaml (208: tiles,
#                warps, stages, TMA) on 4 cells of issue 7's bf16 grid (full S 4096 and 16384, which share their
#                binaries; causal S 2048 and 8192), 15 compile processes, cold cache, 20 ms of timed runs a config.
#   PART=capping the Llama-3-8B prefill GP sweep (study space, budget 30, cold cache, 15 compile processes) with
#                adaptive capping on two runs over the cap (run 12's FIFO sweep capped 10 configs on one stalled run).
#   PART=grid    issue 7's bf16 grid (36 cells) as run 10 call 3 ran it (GP, budget 24, Hopper space, cold cache,
#                15 compile processes), now with the D=256 default's 4 warps and the scale-up screening (run 13's
#                D=256 landscape), the sibling winners and the baselines after the sweep.
#   PART=grid16  the same on the fp16 grid.
#   PART=w16     every config of docs/benchmarks/w16_space.yaml (76: 64-256 x 32-128 tiles, 4-16 warps) on 5 cells of
#                the bf16 grid (D=64 full, D=128 full and causal at S=4096; D=256 full S=4096, causal S=8192): does
#                a 256-row tile with 16 warps beat the best 8-warp tiles?
#   PART=pair    (nvidia-h200-x2) issue 4's two-GPU measurement with two-run capping: the Llama sweep on one GPU, then
#                on two, on copies of one precompiled Triton cache, 31 compile processes, 48 trials per GPU, the host
#                cleared between sweeps (as run 12 call 3, without the ramp).
#   PART=gridpair (nvidia-h200-x2) the same for issue 7's bf16 grid (864 trials, GPU busy 0.83 on one H200): a cold
#                one-GPU sweep fills the cache; then one GPU and two GPUs on copies of it.
#   PART=d128w4  the grids' D=128 winners timed against 128x64, 4 warps, 2 stages, TMA (the w16 landscape's best of D=128
#                full S=4096, which no D=128 search tried) on each D=128 cell, bf16 and fp16, alternately on one GPU
#                (es_winners.py; the variant artifacts from variant_artifact.py).
#   PART=d128    the 12 D=128 cells of the bf16 grid as PART=grid ran them, now with the design's fewer-warps-with-TMA
#                move (gp.py FEWER_WARPS_TMA, after PART=d128w4).
#   PART=d128f16 the same on the fp16 grid's 12 D=128 cells (prepared, not run: no device time left to start a machine).
# Calls 1-8 ran land256, capping, grid, grid16, w16 (nvidia-h200), pair, gridpair (nvidia-h200-x2), d128w4.
# (Calls 1 and 5 ran the landscape parts with the exhaustive command written out in each part: the same command.)
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run13.sh
RUN=run13 PART=${PART:-land256}
source docs/benchmarks/gpu_lib.sh

case $PART in
  land256)
    landscape d256 530 dense-b4-hq8-hkv8-sq4096-sk4096-d256-full-bfloat16 \
      dense-b1-hq8-hkv8-sq16384-sk16384-d256-full-bfloat16 dense-b2-hq8-hkv8-sq8192-sk8192-d256-causal-bfloat16 \
      dense-b8-hq8-hkv8-sq2048-sk2048-d256-causal-bfloat16 ;;
  capping)
    llama llama-capping 480 --compile-workers 15 ;;
  grid)
    sweep grid-bf16 560 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  grid16)
    sweep grid-fp16 560 grid_fp16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  w16)
    landscape w16 500 dense-b4-hq32-hkv32-sq4096-sk4096-d64-full-bfloat16 \
      dense-b4-hq16-hkv16-sq4096-sk4096-d128-full-bfloat16 dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16 \
      dense-b4-hq8-hkv8-sq4096-sk4096-d256-full-bfloat16 dense-b2-hq8-hkv8-sq8192-sk8192-d256-causal-bfloat16 ;;
  pair)
    precompile 150 llama-1gpu llama-2gpu
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu 150 --compile-workers 31 --trials-per-gpu 48
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu 150 --compile-workers 31 --trials-per-gpu 48 ;;
  gridpair)
    CUDA_VISIBLE_DEVICES=0 sweep grid-cold 230 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 48 \
      --compile-workers 31
    for n in grid-1gpu grid-2gpu; do rm -rf /tmp/triton-$n; cp -r /tmp/triton-grid-cold /tmp/triton-$n; done
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 sweep grid-1gpu 170 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 48 \
      --compile-workers 31
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 sweep grid-2gpu 150 grid_bf16 --searcher gp --budget 24 \
      --trials-per-gpu 48 --compile-workers 31 ;;
  d128w4)
    for d in bf16 fp16; do
      TRITON_CACHE_DIR=/tmp/triton-d128w4 timeout 270 python3 docs/benchmarks/es_winners.py \
        docs/benchmarks/h200/run13/grid-${d}_best_configs.json docs/benchmarks/h200/run13/d128_w4tma_${d}_best_configs.json \
        --out "$OUT/d128_w4tma_${d}.csv" 2>&1 | tail -16 | tee "$OUT/d128_w4tma_${d}.txt"
    done ;;
  d128)
    head_dim_cells grid_bf16 128
    sweep grid-bf16-d128 400 /tmp/grid_bf16_d128.yaml --searcher gp --budget 24 --trials-per-gpu 24 \
      --compile-workers 15 ;;
  d128f16)
    head_dim_cells grid_fp16 128
    sweep grid-fp16-d128 300 /tmp/grid_fp16_d128.yaml --searcher gp --budget 24 --trials-per-gpu 24 \
      --compile-workers 15 ;;
esac
