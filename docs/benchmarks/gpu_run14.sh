#!/usr/bin/env bash
# Fourteenth run. Each PART is one device call of at most 10 minutes.
#   PART=inflight  (nvidia-h200-x2) issue 4's two-GPU speed-up with fewer trials in flight: run 13's pair (48 trials
#                  per GPU) reached 1.47x end to end, its start (96 trial processes) taking the first rung from
#                  10.2 s to 18.6 s after Tune's start. The Llama sweep on copies of one precompiled Triton cache,
#                  31 compile processes, no baselines (they run after Tune), the host cleared between sweeps:
#                  one GPU, then two, both with 24 trials per GPU; vmstat every second beside each sweep.
#   PART=inflight2 (nvidia-h200-x2) the same with 16 trials per GPU (the sweep's default), one GPU then two, and
#                  two GPUs with 24 again (same host).
#   PART=pair16    (nvidia-h200-x2) PART=inflight2's first two sweeps again, on another host: one GPU, then two, with
#                  16 trials per GPU.
#   PART=d128f16   (nvidia-h200) is gpu_run13.sh's part of that name (call 4 ran it from a76310c).
# Calls 1 (at 6d05723) and 2 (at e1a310d: the Broker's shared queue, eager compile processes) ran PART=inflight,
# call 3 (at a76310c: compile processes create their CUDA context at start) PART=inflight2, call 5 PART=pair16.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run14.sh
RUN=run14 PART=${PART:-inflight}
source docs/benchmarks/gpu_lib.sh

case $PART in
  inflight)
    precompile 150
    paired llama-1gpu-24 170 0 24
    paired llama-2gpu-24 140 0,1 24 ;;
  inflight2)
    [ -d /tmp/triton-full ] || precompile 150
    paired llama-1gpu-16 150 0 16
    paired llama-2gpu-16 120 0,1 16
    paired llama-2gpu-24b 120 0,1 24 ;;
  pair16)
    precompile 150
    paired llama-1gpu-16 150 0 16
    paired llama-2gpu-16 120 0,1 16 ;;
esac
