#!/usr/bin/env bash
# Twentieth run. Each PART is one device call of at most 10 minutes (several PARTs may share a call).
#   PART=tests (nvidia-h200) the CUDA tests of warp specialization, the Hopper knobs, varlen and the workload checks.
#   PART=grid (nvidia-h200) issue 7's bf16 grid as in run 18 (GP, budget 24, cold cache, SDPA after the sweep), with
#           the space's warp-specialized configs (4 warps, TMA, one key loop, 2 stages) and the searcher's
#           warp-specialized move.
#   PART=ws (nvidia-h200) issue 7: Hopper warp specialization as Triton's pass takes it. The pass (Triton 3.6 and
#           3.9, `add_hopper_warpspec`) acts only on a kernel written for 4 warps, then adds a producer warp group
#           and splits the tile's rows over two consumer warp groups (FlashAttention-3's layout); it aborts on a
#           pointer load, an early return or a second key loop. The kernel now loads Q through a descriptor and
#           skips no block under WARP_SPECIALIZE. kernel_ab.py on run 18's bf16 winners of all 24 cells (S 512,
#           1024, 4096, 16384; D 64, 128, 256; full and causal) against warp-specialized configs (4 warps, TMA,
#           one key loop) of several tiles and stages, with SDPA flash and cuDNN in the same run; the TTGIR of
#           each head dim's winner and first variant. Then the CUDA suite's Hopper-knob tests.
# Calls: PART=ws: 1 at e4ffe44 (the second consumer group's rows stored 64 too far down: a Triton bug, worked around since,
# and an empty varlen sequence's Q descriptor had no row); 2 at the commit after it, with the checks' outputs
# NaN-filled (an unwritten row passed before). 3: PART=tests then PART=grid (one command) at the commit that
# put the warp-specialized layout in the space. Run from the repository root of the commit (the device copies the working tree):
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run20.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz and .gpu-bundle/pytest-site, pytest for the CUDA tests)
RUN=run20 PART=${PART:-ws}
source docs/benchmarks/gpu_lib.sh

case $PART in
  ws)
    mkdir -p /tmp/ws
    TRITON_CACHE_DIR=/tmp/triton-ab timeout 420 python3 docs/benchmarks/kernel_ab.py --short 0 \
      --winners docs/benchmarks/h200/run18/grid-bf16_best_configs.json \
      --variants ws4+m128+n64+s2,ws4+m128+n64+s3,ws4+m128+n128+s2,ws4+m128+n32+s2,ws4+m64+n64+s2,ws4+m256+n64+s2,ws4+m256+n128+s2,ws4+m128+n64+s2+pers,tma+nosplit \
      --ir-dir /tmp/ws/ir --out /tmp/ws/ws_bf16.json --workers 15 2>&1 \
      | tee /tmp/ws/ws_bf16.log | grep -v "TFLOP/s" | tail -70
    cuda_tests /tmp/ws/cuda_tests.log
    (cd /tmp && tar -czf "$OUT/${RUN}_ws.tar.gz" ws) ;;
  tests)
    cuda_tests "$OUT/cuda_tests.log" ;;
  grid)
    issue7_grid bf16 ;;
  *) echo "unknown PART=$PART"; exit 2 ;;
esac
