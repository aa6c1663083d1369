#!/usr/bin/env bash
# Nineteenth run. Each PART is one device call of at most 10 minutes (several PARTs may share a call).
#   PART=flat (nvidia-h200) issue 7: does FLATTEN (the persistent grid's tile loop and key loop fused by Triton's
#             tl.range(flatten=True), so that its pipeliner loads the next tile's first K/V blocks during this tile's
#             last ones) close the short full-mask cells' gap? Run 18's per-tile fit: a 128 x 64 tile at D=128 costs
#             about 4 key blocks' time beyond its key blocks, which is a third of an S=512 cell's time.
#             kernel_ab.py on run 18's bf16 winners of the full-mask cells (S 512, 1024, 4096, 16384; D 64, 128,
#             256) with FLATTEN, with it and 3 stages, without the split key loop (what FLATTEN needs) on the plain
#             and the persistent grid; the short configs alike; SDPA flash and cuDNN in the same run; the TTGIR of
#             each head dim's winner and its FLATTEN variant (is the loop fused?). Then the CUDA suite's FLATTEN test.
#   PART=land256 (nvidia-h200) issue 7: every config of docs/benchmarks/d256_short_space.yaml (228) on the D=256
#             cells that stay below 1.3x SDPA flash (full S=512, causal S=512 and S=1024): the search or the space?
# Calls: 1 PART=flat then PART=land256 (one command) at ff75f2b. FLATTEN was removed after it (Triton 3.6 miscompiles
# the fused loop: docs/kernel.md, "Tried and dropped"), so PART=flat runs only from that commit.
# Run from the repository root of the commit (the device copies the working tree):
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run19.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz and .gpu-bundle/pytest-site, pytest for the CUDA tests)
RUN=run19 PART=${PART:-flat}
source docs/benchmarks/gpu_lib.sh

case $PART in
  flat)
    TRITON_CACHE_DIR=/tmp/triton-ab timeout 300 python3 docs/benchmarks/kernel_ab.py --masks full \
      --winners docs/benchmarks/h200/run18/grid-bf16_best_configs.json \
      --variants flat,flat+s3,nosplit,pers+nosplit --ir-dir "$OUT/ir" --out "$OUT/flat_bf16.json" --workers 15 2>&1 \
      | tee "$OUT/flat_bf16.log" | grep -v "TFLOP/s" | tail -60
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 150 python3 -m pytest -q \
      -p no:cacheprovider tests/test_flash_attn.py -k "hopper_knobs or flatten" > "$OUT/cuda_flatten.log" 2>&1
    echo "cuda tests rc=$?"; tail -5 "$OUT/cuda_flatten.log" ;;
  land256)
    landscape d256_short 280 dense-b32-hq8-hkv8-sq512-sk512-d256-full-bfloat16 \
      dense-b32-hq8-hkv8-sq512-sk512-d256-causal-bfloat16 dense-b16-hq8-hkv8-sq1024-sk1024-d256-causal-bfloat16 ;;
  *) echo "unknown PART=$PART"; exit 2 ;;
esac
