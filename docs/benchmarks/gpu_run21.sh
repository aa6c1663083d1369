#!/usr/bin/env bash
# Twenty-first run. Each PART is one device call of at most 10 minutes (several PARTs may share a call).
#   PART=even (nvidia-h200) issue 7: dense keys in whole key blocks (EVEN_K, set at launch) drop the sequence-end
#             mask, so a full mask masks no block, in particular in the one key loop that warp specialization
#             needs. Same call, two builds: kernel_ab.py on run 20's bf16 winners of 24 cells (S 512, 1024, 4096,
#             16384; D 64, 128, 256; full and causal) and warp-specialized and one-loop variants, first on a copy
#             of the tree with EVEN_K forced off (the kernel as it was), then on the tree; the ratios printed by
#             --baseline. Then the CUDA tests.
#   PART=tests (nvidia-h200) the CUDA tests alone.
#   PART=grid (nvidia-h200) issue 7's bf16 grid as in run 20 (GP, budget 24, cold cache, SDPA after the sweep).
#   PART=grid16 the same on the fp16 grid.
#   PART=screen (nvidia-h200) the fp16 grid's D=128 cells again (as grid16, 200 s limit), with the GP screening the
#             warp-specialized layout on the persistent grid (128x128): call 3's search reached that form only from
#             S=2048 on. Not run yet: no machine was lent when it was written.
#   PART=llama (nvidia-h200) issue 7's Llama-3-8B prefill set (GQA 4:1, D 128, causal, varlen) tuned over the Hopper
#             space (GP, budget 30, cold cache, 15 compile processes), SDPA after the sweep.
# Calls: 1 PART=even at b4720de; 2 grid, 3 grid16 and 4 llama at 650c996 (call 4 with the 450 s limit now below; the
# commit said 540).
# Run from the repository root of the commit (the device copies the working tree):
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run21.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz and .gpu-bundle/pytest-site, pytest for the CUDA tests)
RUN=run21 PART=${PART:-even}
source docs/benchmarks/gpu_lib.sh

ab() {  # ab TAG ROOT [--baseline JSON]: kernel_ab.py from the tree at ROOT
  (cd "$2" && TRITON_CACHE_DIR=/tmp/triton-ab-$1 timeout 240 python3 docs/benchmarks/kernel_ab.py --short 0 \
    --winners docs/benchmarks/h200/run20/grid-bf16_best_configs.json \
    --variants ws4+m128+n64+s2,ws4+m128+n128+s2,ws4+m128+n64+s2+pers,tma+nosplit \
    --out "/tmp/even/$1.json" --workers 15 "${@:3}" 2>&1 | tee "/tmp/even/$1.log" | grep -v "TFLOP/s" | tail -45)
}

case $PART in
  even)
    mkdir -p /tmp/even /tmp/old
    cp -r raytune_attn docs /tmp/old/
    sed -i 's/EVEN_K=not varlen and sk/EVEN_K=False and sk/' /tmp/old/raytune_attn/kernels/flash_attn.py
    grep -c "EVEN_K=False and sk" /tmp/old/raytune_attn/kernels/flash_attn.py
    ab masked_every_block /tmp/old
    ab whole_key_blocks "$PWD" --baseline /tmp/even/masked_every_block.json
    cuda_tests /tmp/even/cuda_tests.log
    (cd /tmp && tar -czf "$OUT/${RUN}_even.tar.gz" even) ;;
  tests)
    cuda_tests "$OUT/cuda_tests.log" ;;
  grid)
    issue7_grid bf16 ;;
  grid16)
    issue7_grid fp16 ;;
  screen)
    head_dim_cells grid_fp16 128
    sweep grid-fp16-d128 200 /tmp/grid_fp16_d128.yaml --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  llama)
    sweep llama-sm90 450 llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 --compile-workers 15 ;;
  *) echo "unknown PART=$PART"; exit 2 ;;
esac
