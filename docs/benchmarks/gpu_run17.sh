#!/usr/bin/env bash
# Seventeenth run. Each PART is one device call of at most 10 minutes.
#   PART=pqk  (nvidia-h200) issue 7: does PIPELINE_QK (the next key block's q.k issued before this block's softmax,
#             FlashAttention-3's intra-warpgroup overlap) pay? pipeline_qk_check.py: 18 cells of the bf16 grid
#             (D 64/128/256, causal and not, S 512/4096/16384), run 13's winner of each cell against the same config
#             pipelined and a few pipelined Hopper tiles, SDPA flash and cuDNN in the same run, and the PTX's
#             wgmma.wait_group counts (is a matmul left in flight?).
#   PART=ab   (nvidia-h200) issue 7: kernel_ab.py (pipeline_qk_check.py renamed and generalized): TMA_QO (Q loaded and
#             O stored through tensor descriptors) on run 13's winners, alone and with K/V TMA, over 24 cells (S 512,
#             1024, 4096, 16384), and hand-picked configs for the short sequences (S <= 1024), where the winners came
#             closest to SDPA flash.
#   PART=ab2  (nvidia-h200) call 3's TMA_QO lost nearly everywhere while it freed registers: which end costs? TMA_QO
#             split in two knobs, TMA_Q (the load) and TMA_O (the store), each alone on the winners, 24 cells.
#   PART=preload (nvidia-h200-x2) issue 4: the embedded cluster's worker processes import Ray Tune and the trial module
#             as Ray starts them (RAY_preload_python_modules; Ray prestarts workers when the driver connects, and Tune's
#             trial actors take them). The Llama sweep as in run 16 call 3 (copies of one precompiled cache, 16 trials
#             per GPU, no baselines, host cleared between sweeps): one GPU without then with the preload, two GPUs
#             without then with, all in one call.
# Call 1 ran PART=pqk at debfe84 (PIPELINE_QK as first written: q.k one block ahead, softmax right after), call 2 at
# f6d93a5 (the reordered loop); call 3 PART=ab at 59666ec, call 4 PART=ab2 at be833de, call 5 PART=preload at dcee9f3 (the preload was
# removed after it: it changed nothing, and the part runs only from that commit).
# The three parts measured knobs removed after call 4 (PIPELINE_QK, TMA_QO, TMA_Q, TMA_O; docs/kernel.md, "Tried and
# dropped"): they run only from the commits named above, where pipeline_qk_check.py / kernel_ab.py knew them.
# Run from the repository root of the commit (the device copies the working tree):
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run17.sh
# Earlier runs' scripts ran from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run17.sh
RUN=run17 PART=${PART:-pqk}
source docs/benchmarks/gpu_lib.sh

case $PART in
  pqk)
    TRITON_CACHE_DIR=/tmp/triton-pqk timeout 560 python3 docs/benchmarks/pipeline_qk_check.py \
      --out "$OUT/pqk_bf16.json" --workers 15 2>&1 | tee "$OUT/pqk_bf16.log" | grep -v "TFLOP/s" | tail -70 ;;
  ab)
    TRITON_CACHE_DIR=/tmp/triton-ab timeout 560 python3 docs/benchmarks/kernel_ab.py \
      --out "$OUT/ab_bf16.json" --workers 15 2>&1 | tee "$OUT/ab_bf16.log" | grep -v "TFLOP/s" | tail -70 ;;
  ab2)
    TRITON_CACHE_DIR=/tmp/triton-ab timeout 560 python3 docs/benchmarks/kernel_ab.py --variants tmaq,tmao,tmaq+tma \
      --short 0 --out "$OUT/ab2_bf16.json" --workers 15 2>&1 | tee "$OUT/ab2_bf16.log" | grep -v "TFLOP/s" | tail -70 ;;
  preload)
    precompile 150
    for n in 1gpu 2gpu; do
      gpus=0; [ $n = 2gpu ] && gpus=0,1
      (export RAY_preload_python_modules=; paired llama-$n-off 120 $gpus 16); tune_phases llama-$n-off
      paired llama-$n-on 120 $gpus 16; tune_phases llama-$n-on
    done ;;
esac
