#!/usr/bin/env bash
# Twelfth run: what run 11 left prepared. Calls 1-4 ran PART=ramp, espair, ramp2, d256 (grid and grid16 are
# prepared, not run). Each PART is one device call of at most 10 minutes. The ramp parts' --no-ramp flag was removed
# with the ramp after call 3: they run only from the commits named in docs/benchmarks/README.md (run 12).
#   PART=ramp   (nvidia-h200-x2) after run 11 (two GPUs 1.35-1.45x end to end, 1.76-2.2x mid-sweep; Tune's first
#               trial 8.6-11.4 s after its start: 48-96 trial processes starting at once): the sweep now starts
#               2 trials per GPU and 2 more per trial that has reported; on copies of one precompiled Triton cache,
#               one GPU, then two, with the same flags, then two GPUs with --no-ramp.
#   PART=ramp2  (nvidia-h200-x2) after PART=ramp (call 1: the two-GPU ramp sweep was cut by its time limit during
#               its final re-measure; the one after it ran at half run 11's rate): two GPUs without, then with the
#               ramp, then one GPU with it, each sweep started on a machine cleared of the last one's processes.
#   PART=espair (nvidia-h200-x2) early stopping alone, with the final re-measure this time: the random searcher
#               (same seeds, so the same configs) with ASHA on GPU 0 and with FIFO on GPU 1 at the same time, each
#               on its own cold Triton cache with 15 compile processes (run 10 call 4 ran them one after the other
#               and both hit their limits before the re-measure); then both sweeps' winners timed against each
#               other on GPU 0 (es_winners.py).
#   PART=d256   (nvidia-h200) the D=256 half of issue 7's bf16 grid (12 cells) as run 10 call 3 ran it (GP, budget
#               24, Hopper space, cold cache), with --family-k 2: run 10's D=256 S=16384 stopped at 440 TFLOP/s where
#               S=8192 found 531. Fits the session's last minutes of device time, where the whole grid did not.
#   PART=grid   (nvidia-h200) issue 7's bf16 grid as run 10 call 3 (GP, budget 24, Hopper space, cold cache), now
#               with the final re-measure's sibling winners (--family-k 2, the default) and the baselines after it.
#   PART=grid16 (nvidia-h200) the same on the fp16 grid.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run12.sh
RUN=run12 PART=${PART:-ramp}
source docs/benchmarks/gpu_lib.sh

case $PART in
  ramp)
    precompile 150 llama-1gpu-ramp llama-2gpu-ramp llama-2gpu-noramp
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-ramp 140 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-ramp 110 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-noramp 110 --compile-workers 31 --trials-per-gpu 48 \
      --no-ramp ;;
  ramp2)
    precompile 150 llama-2gpu-noramp2 llama-2gpu-ramp2 llama-1gpu-ramp2
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-noramp2 140 --compile-workers 31 --trials-per-gpu 48 \
      --no-ramp
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-ramp2 140 --compile-workers 31 --trials-per-gpu 48
    clear_host
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-ramp2 150 --compile-workers 31 --trials-per-gpu 48 ;;
  espair)
    CUDA_VISIBLE_DEVICES=0 llama llama-rand-asha 400 --searcher random --compile-workers 15 &
    CUDA_VISIBLE_DEVICES=1 llama llama-rand-fifo 400 --searcher random --compile-workers 15 --no-early-stop &
    wait
    python3 docs/benchmarks/early_stop_pair.py /tmp/llama-rand-asha/trials.parquet /tmp/llama-rand-fifo/trials.parquet \
      | tee "$OUT/early_stop_pair.txt"
    TRITON_CACHE_DIR=/tmp/triton-llama-rand-asha CUDA_VISIBLE_DEVICES=0 timeout 120 python3 \
      docs/benchmarks/es_winners.py /tmp/llama-rand-asha/best_configs.json /tmp/llama-rand-fifo/best_configs.json \
      --out "$OUT/es_winners.csv" 2>&1 | tail -20 | tee "$OUT/es_winners.txt" ;;
  d256)
    head_dim_cells grid_bf16 256
    sweep grid-bf16-d256 270 /tmp/grid_bf16_d256.yaml --searcher gp --budget 24 --trials-per-gpu 24 \
      --compile-workers 15 --space search_spaces/nvidia/sm90.yaml ;;
  grid)
    sweep grid-bf16 540 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  grid16)
    sweep grid-fp16 540 grid_fp16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
esac
