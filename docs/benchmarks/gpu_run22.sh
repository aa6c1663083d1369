#!/usr/bin/env bash
# Twenty-second run. Each PART is one device call of at most 10 minutes.
#   PART=mask (nvidia-h200) issue 7: the masked step masks the raw score and leaves the scale to the fused
#             multiply-add of the unmasked step, and drops the sequence-end compare under EVEN_K, so a causal block
#             costs one compare and one select a score more than an unmasked one (was two compares, an and, two
#             selects, a multiply and a subtract). Same call, two builds: kernel_ab.py on run 21's bf16 winners of
#             the causal cells (S 512, 1024, 4096, 16384; D 64, 128, 256), warp-specialized and one-loop variants
#             and the short-sequence configs, first on a copy of the tree with the kernel of 05997e6 (the step as
#             it was), then on the tree; the ratios printed by --baseline. Then the CUDA tests.
#   PART=grid (nvidia-h200) issue 7's bf16 grid as in runs 20-21 (GP, budget 24, cold cache, SDPA after the sweep).
#   PART=grid16 the same on the fp16 grid.
#   PART=d64 (nvidia-h200) the D=64 cells of both grids as PART=grid runs them, with the GP screening twice the warps
#             and one stage more (gp.py MORE_WARPS_DEEPER, after PART=gaps); TAG=-rev (a suffix of the sweep names):
#             the same with the short causal move heavy-first (gp.py SHORT_CAUSAL_MOVE).
#   PART=gaps (nvidia-h200) the cells under 1.3x SDPA flash after PART=grid and grid16, one build: kernel_ab.py on
#             run 22's winners of D=256 causal S 512 and 1024 (bf16) with the persistent grid and the heavy-first
#             order, and of D=64 causal S 4096 and 8192 (bf16 and fp16) with 8 warps and 4 stages (bf16's S=4096
#             winner, which the fp16 search did not try).
# Run from the repository root of the commit (the device copies the working tree), with the old kernel beside it:
#   mkdir -p .gpu-bundle/ab-base && git show 05997e6:raytune_attn/kernels/flash_attn.py \
#     > .gpu-bundle/ab-base/flash_attn.py
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run22.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz, .gpu-bundle/pytest-site (pytest for the CUDA tests) and
# .gpu-bundle/ab-base)
RUN=run22 PART=${PART:-mask}
source docs/benchmarks/gpu_lib.sh

ab() {  # ab TAG ROOT [--baseline JSON]: kernel_ab.py from the tree at ROOT
  (cd "$2" && TRITON_CACHE_DIR=/tmp/triton-ab-$1 timeout 240 python3 docs/benchmarks/kernel_ab.py --short 1024 \
    --masks causal --winners docs/benchmarks/h200/run21/grid-bf16_best_configs.json \
    --variants ws4+m128+n128+s2+pers,ws4+m128+n128+s2+pers+rev,ws4+m128+n128+s2,ws4+m128+n64+s2,tma+nosplit \
    --out "$OUT/mask/$1.json" --workers 15 "${@:3}" 2>&1 | tee "$OUT/mask/$1.log" | grep -v "TFLOP/s" | tail -45)
}

case $PART in
  mask)
    mkdir -p "$OUT/mask" /tmp/old
    cp -r raytune_attn docs /tmp/old/
    cp .gpu-bundle/ab-base/flash_attn.py /tmp/old/raytune_attn/kernels/flash_attn.py
    grep -c "qk = tl.where(visible, qk \* qk_scale" /tmp/old/raytune_attn/kernels/flash_attn.py
    ab scale_after_mask /tmp/old
    ab mask_raw_scores "$PWD" --baseline "$OUT/mask/scale_after_mask.json"
    cuda_tests "$OUT/mask/cuda_tests.log" ;;
  gaps)
    mkdir -p "$OUT/gaps"
    gap() {  # gap TAG DTYPE DIM SEQS VARIANTS
      TRITON_CACHE_DIR=/tmp/triton-gap-$1 timeout 150 python3 docs/benchmarks/kernel_ab.py --short 0 --masks causal \
        --dtype "$2" --dims "$3" --seqs "$4" --variants "$5" --workers 15 --out "$OUT/gaps/$1.json" \
        --winners "docs/benchmarks/h200/run22/grid-$( [ "$2" = float16 ] && echo fp16 || echo bf16 )_best_configs.json" \
        2>&1 | tee "$OUT/gaps/$1.log" | grep -v "TFLOP/s" | tail -12
    }
    gap d256_bf16 bfloat16 256 512,1024 pers,rev,pers+rev
    gap d64_bf16 bfloat16 64 4096,8192 w8+s4,s4
    gap d64_fp16 float16 64 4096,8192 w8+s4,s4 ;;
  d64)
    head_dim_cells grid_bf16 64; head_dim_cells grid_fp16 64
    for d in bf16 fp16; do
      sweep "grid-$d-d64${TAG:-}" 280 "/tmp/grid_${d}_d64.yaml" --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15
    done ;;
  tests)
    cuda_tests "$OUT/cuda_tests.log" ;;
  grid)
    issue7_grid bf16 ;;
  grid16)
    issue7_grid fp16 ;;
  *) echo "unknown PART=$PART"; exit 2 ;;
esac
