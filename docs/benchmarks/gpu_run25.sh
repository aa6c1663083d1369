#!/usr/bin/env bash
# Twenty-fifth run. PART is one or more parts, space-separated, run in one device call of at most 10 minutes.
#   PART=n32 (nvidia-h200) issue 7: the D=256 cells of both grids (full and causal, S 512-16384), run 24's tuned
#            winners (warp-specialized 128x64 on the plain grid) against 128x32 tiles of the same layout, on the plain
#            and on the persistent grid. At D=256 the persistent grid fits in shared memory only with 32-key tiles
#            (sm90_offline.py: 229672 bytes; 295208 with 64 keys), and runs 22-24's sweeps never proposed a 32-key
#            warp-specialized config there. kernel_ab.py, bf16 then fp16, winners from run 24's sweeps.
#   PART=qbuf (nvidia-h200) the persistent kernel's tile loop as `tl.range(..., num_stages=1)`: Triton's
#            warp-specialization pass then keeps one Q buffer, not two (sm90_offline.py: the D=128 128x128 form 213288
#            -> 180512 bytes of shared memory; D=256 128x64 295208 -> 229664, which fits; the other persistent forms
#            compile to the same PTX). kernel_ab.py on the D=128 and D=256 cells of the bf16 grid, run 24's winners and
#            the warp-specialized forms on the persistent grid, first on a copy of the tree with the kernel of 275e01b
#            (.gpu-bundle/ab-base/flash_attn.py), then on the tree, the ratios printed by --baseline.
#   PART=grid (nvidia-h200) the D=256 cells of issue 7's bf16 grid, full and causal, tuned as run 24's PART=grid
#            (GP, budget 24, cold cache, SDPA after the sweep) with the ONE_Q_BUFFER knob in the space and its form
#            screened at D=256; PART=grid16 the same on the fp16 grid. TAG: a suffix of the sweep's name; HD: the head
#            dim of the cells (256; with 128 the GP screens the two-buffer persistent form, and the knob is a one-knob
#            step from it).
#   PART=confirm (nvidia-h200) kernel_ab.py on the D=256 cells of both grids, run 24's tuned winners, then run 25's,
#            in the same call (--baseline prints run 25's / run 24's, cell by cell).
#   PART=tests (nvidia-h200) the CUDA tests.
# Calls: 1 PART=n32 and 2 PART=qbuf on 275e01b with this run's kernel_ab.py and script, call 2 with the tile loop as
# `tl.range(..., num_stages=1)` for every persistent form, the edit 707ef6d made a knob (its ONE_Q_BUFFER=true binary;
# sm90_offline.py's PTX differs only in debug line numbers). To run call 2 again, on a checkout of 275e01b with those
# two files: sed -i 's/num_tiles, num_programs):/num_tiles, num_programs, num_stages=1):/' \
#   raytune_attn/kernels/flash_attn.py
# 3 PART="tests grid", 4 PART=grid16, 5 HD=128 PART="grid grid16" and 6 PART=confirm at 707ef6d, call 3 with
# docs/benchmarks/h200/run13 and run16 moved out of the tree (the device takes at most 64 MiB with pytest-site).
# Run from the repository root (the device copies the working tree), with the old kernel beside it for PART=qbuf:
#   mkdir -p .gpu-bundle/ab-base && git show 275e01b:raytune_attn/kernels/flash_attn.py \
#     > .gpu-bundle/ab-base/flash_attn.py
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run25.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz, .gpu-bundle/ab-base, and .gpu-bundle/pytest-site for the CUDA tests)
RUN=run25 PART=${PART:-n32}
source docs/benchmarks/gpu_lib.sh
R24=docs/benchmarks/h200/run24

ab() {  # ab TAG DTYPE WINNERS [flags]: kernel_ab.py on the D=256 cells (a later --dims wins), from the tree at $ROOT
  (cd "${ROOT:-.}" && TRITON_CACHE_DIR=/tmp/triton-ab-$1 timeout 240 python3 docs/benchmarks/kernel_ab.py --short 0 \
    --seqs 512,1024,2048,4096,8192,16384 --dims 256 --dtype "$2" --winners "$OLDPWD/$3" \
    --variants "$VARIANTS" --out "$OUT/$PART_DIR/$1.json" --workers 15 --masks full,causal "${@:4}" 2>&1 \
    | tee "$OUT/$PART_DIR/$1.log" | grep -v "TFLOP/s" | tail -50)
}

for part in $PART; do
  case $part in
    n32)
      PART_DIR=n32 VARIANTS=n32,n32+pers,n32+pers+rev,n32+pers+rev+nopreV
      mkdir -p "$OUT/n32"
      ab bf16 bfloat16 "$R24/grid-bf16-d128-d256-preV_best_configs.json"
      ab fp16 float16 "$R24/grid-fp16-d128-d256-preV_best_configs.json"
      (cd "$OUT" && tar -czf n32.tar.gz n32 && rm -r n32) ;;
    qbuf)
      PART_DIR=qbuf VARIANTS=pers,pers+rev,pers+nopreV
      mkdir -p "$OUT/qbuf"; old_tree "num_programs, num_stages=1"
      for d in 128 256; do
        ROOT=/tmp/old ab "old_d$d" bfloat16 "$R24/grid-bf16-d128-d256-preV_best_configs.json" --dims $d
        ab "new_d$d" bfloat16 "$R24/grid-bf16-d128-d256-preV_best_configs.json" --dims $d \
          --baseline "$OUT/qbuf/old_d$d.json"
      done
      (cd "$OUT" && tar -czf qbuf.tar.gz qbuf && rm -r qbuf) ;;
    grid|grid16)
      d=$( [ "$part" = grid16 ] && echo fp16 || echo bf16 )
      head_dim_cells "grid_$d" "${HD:-256}"
      sweep "grid-$d-d${HD:-256}${TAG:-}" "${LIMIT:-280}" "/tmp/grid_${d}_d${HD:-256}.yaml" --searcher gp --budget 24 \
        --trials-per-gpu 24 --compile-workers 15 ${RESUME:+--resume} ;;
    confirm)
      PART_DIR=confirm VARIANTS=""
      mkdir -p "$OUT/confirm"
      for d in bf16 fp16; do
        t=$( [ $d = fp16 ] && echo float16 || echo bfloat16 )
        ab "run24_$d" $t "$R24/grid-$d-d128-d256-preV_best_configs.json"
        ab "run25_$d" $t "docs/benchmarks/h200/run25/grid-$d-d256_best_configs.json" \
          --baseline "$OUT/confirm/run24_$d.json"
      done
      (cd "$OUT" && tar -czf confirm.tar.gz confirm && rm -r confirm) ;;
    tests)
      cuda_tests "$OUT/cuda_tests.log" ;;
    *) echo "unknown PART=$part"; exit 2 ;;
  esac
done
