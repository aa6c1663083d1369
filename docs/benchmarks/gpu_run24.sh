#!/usr/bin/env bash
# Twenty-fourth run. PART is one or more parts, space-separated, run in one device call of at most 10 minutes.
#   PART=desc (nvidia-h200) issue 7: the persistent grid builds its TMA descriptors once a program, over whole dense
#             tensors, instead of three a tile (writing one costs a release and an acquire fence), and every tile
#             issues its Q load before it builds the K and V descriptors. First one launch of each persistent form of
#             the new build in its own process under a 60 s timeout (launch_probe.py: run 23's host-side descriptors
#             hung the GPU); then kernel_ab.py on the D=128 and D=256 cells of the bf16 grid (full and causal, S
#             512-16384; run 23's merged winners, the warp-specialized persistent heavy-first form and the split-loop
#             persistent TMA form), first on a copy of the tree with the kernel of 1b67902
#             (.gpu-bundle/ab-base/flash_attn.py), then on the tree, the ratios printed by --baseline. Then the CUDA
#             tests.
#   PART=again (nvidia-h200) PART=desc's A/B once more on the causal cells, the new build first this time (so
#             --baseline prints old / new), the winners only, 200 ms of runs a config: PART=desc had the D=128 causal
#             winner at 1.08x on S=512 and 0.94x on S=4096, where run 23 had measured 477-501 TFLOP/s across calls.
#   PART=grid (nvidia-h200) the D=128 and D=256 cells of issue 7's bf16 grid, full and causal, tuned as run 23's
#             PART=causal (GP, budget 24, cold cache, SDPA after the sweep) with this kernel; PART=grid16 the same on
#             the fp16 grid; TAG: a suffix of the sweep's name; LIMIT: its time limit (280 s); RESUME=1: finish the
#             sweep of that name that the same machine left unfinished. (The D=64 winners use no TMA: sm90_offline.py
#             compiles them to run 22's PTX instructions.)
#   PART=llama (nvidia-h200) issue 7's Llama-3-8B prefill set as run 23 tuned it (GP, budget 30, cold cache, the
#             Hopper space, SDPA after the sweep), with this kernel and searcher; TAG: a suffix of the sweep's name.
#   PART=final (nvidia-h200) the CUDA tests, then kernel_ab.py on the D=128 cells (the tuned winners only), with the
#             ratios to call 1's new build (--baseline): the whole-tensor descriptors now take HEAD_DIM as their row
#             stride (a contiguous tensor's rows are that far apart, whatever stride a dimension of size 1 reports).
#   PART=abfinal (nvidia-h200) PART=desc's A/B again on the D=128 cells (the tuned winners only), the old kernel
#             against the tree's: PART=final ran the D=128 causal S=4096 winner at 497.6 TFLOP/s, where calls 1-2 had
#             the new build at 469-473 and the old one at 499-501.
#   PART=tests (nvidia-h200) the CUDA tests.
# Calls: 1 PART=desc and 2 PART="again grid" with gp.py of 1b67902 (the warp-specialized layout screened without V
# preload); 3 PART="grid grid16" TAG=-preV with it (gp.WARP_SPECIALIZED): the fp16 sweep ran past 280 s (559 of 576
# trials, no SDPA); 4 PART=grid16 TAG=-preV LIMIT=450 on the same machine, refused (the sweep's folder was there),
# and 5 the same with RESUME=1, which finished it; 6 PART=llama; 7 PART=final and 8 PART=abfinal at 3bdd786, with
# docs/benchmarks/h200/run13 and run16 moved out of the tree for the call (the device takes at most 64 MiB).
# Run from the repository root of the commit (the device copies the working tree), with the old kernel beside it:
#   mkdir -p .gpu-bundle/ab-base && git show 1b67902:raytune_attn/kernels/flash_attn.py \
#     > .gpu-bundle/ab-base/flash_attn.py
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run24.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz, .gpu-bundle/pytest-site (pytest for the CUDA tests) and
# .gpu-bundle/ab-base)
RUN=run24 PART=${PART:-desc}
source docs/benchmarks/gpu_lib.sh
WINNERS=docs/benchmarks/h200/run24/winners_bf16_d128_d256.json

ab() {  # ab TAG ROOT [flags]: kernel_ab.py from the tree at ROOT on the D=128 and D=256 cells (last --masks wins)
  (cd "$2" && TRITON_CACHE_DIR=/tmp/triton-ab-$1 timeout 200 python3 docs/benchmarks/kernel_ab.py --short 0 \
    --seqs 512,1024,2048,4096,8192,16384 --dims 128,256 --winners "$PWD/$WINNERS" \
    --variants "$VARIANTS" --out "$OUT/$PART_DIR/$1.json" --workers 15 --masks full,causal "${@:3}" 2>&1 \
    | tee "$OUT/$PART_DIR/$1.log" | grep -v "TFLOP/s" | tail -70)
}
probe() {  # probe D S MASK CONFIG: one launch in its own process (the new build's Triton cache, shared with ab)
  TRITON_CACHE_DIR=/tmp/triton-ab-whole timeout 60 python3 docs/benchmarks/launch_probe.py --dim "$1" --seq "$2" \
    $([ "$3" = causal ] && echo --causal) "$4" 2>&1 | tail -2 | tee -a "$OUT/$PART_DIR/probe.log"
  echo "D$1 S$2 $3 rc=${PIPESTATUS[0]}" | tee -a "$OUT/$PART_DIR/probe.log"
}

for part in $PART; do
  case $part in
    desc)
      PART_DIR=desc VARIANTS=ws4+m128+n128+s2+pers+rev+preV,split8+m128+n64+s2+pers+tma
      mkdir -p "$OUT/desc"
      tma='"USE_TMA": true, "num_stages": 2, "maxnreg": 0, "PERSISTENT": true'
      ws='"WARP_SPECIALIZE": true, "SPLIT_MASK": false, "num_warps": 4, "BLOCK_M": 128, "BLOCK_N": 128'
      probe 128 4096 full "{\"BLOCK_M\": 128, \"BLOCK_N\": 64, \"num_warps\": 8, $tma}"
      probe 128 4096 full "{$ws, \"PRE_LOAD_V\": true, $tma}"
      probe 128 512 causal "{$ws, \"PRE_LOAD_V\": true, \"REVERSE_M\": true, $tma}"
      if [ "$(grep -c ' rc=0' "$OUT/desc/probe.log")" = 3 ]; then
        old_tree WHOLE_DESC
        ab per_tile /tmp/old
        ab whole "$PWD" --baseline "$OUT/desc/per_tile.json"
        cuda_tests "$OUT/desc/cuda_tests.log"
      else
        echo "a persistent form failed or hung: no A/B"
      fi
      (cd "$OUT" && tar -czf desc.tar.gz desc && rm -r desc) ;;
    again)
      PART_DIR=again VARIANTS=""
      mkdir -p "$OUT/again"; old_tree WHOLE_DESC
      ab whole "$PWD" --masks causal --rep-ms 200
      ab per_tile /tmp/old --masks causal --rep-ms 200 --baseline "$OUT/again/whole.json"
      (cd "$OUT" && tar -czf again.tar.gz again && rm -r again) ;;
    grid|grid16)
      d=$( [ "$part" = grid16 ] && echo fp16 || echo bf16 )
      python3 -c "import yaml; d = yaml.safe_load(open('pipelines/problems/grid_$d.yaml')); \
d['problems'] = [p for p in d['problems'] if p['head_dim'] > 64]; d['name'] = 'grid_${d}_d128_d256'; \
yaml.safe_dump(d, open('/tmp/grid_${d}_d128_d256.yaml', 'w'))"
      sweep "grid-$d-d128-d256${TAG:-}" "${LIMIT:-280}" "/tmp/grid_${d}_d128_d256.yaml" --searcher gp --budget 24 \
        --trials-per-gpu 24 --compile-workers 15 ${RESUME:+--resume} ;;
    llama)
      sweep "llama-sm90${TAG:-}" 330 llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 \
        --compile-workers 15 ;;
    final)
      PART_DIR=final VARIANTS=""
      mkdir -p "$OUT/final"
      cuda_tests "$OUT/final/cuda_tests.log"
      ab final "$PWD" --dims 128 --baseline "$PWD/docs/benchmarks/h200/run24/call1_desc/whole.json"
      (cd "$OUT" && tar -czf final.tar.gz final && rm -r final) ;;
    abfinal)
      PART_DIR=abfinal VARIANTS=""
      mkdir -p "$OUT/abfinal"; old_tree WHOLE_DESC
      ab old /tmp/old --dims 128
      ab new "$PWD" --dims 128 --baseline "$OUT/abfinal/old.json"
      (cd "$OUT" && tar -czf abfinal.tar.gz abfinal && rm -r abfinal) ;;
    tests)
      cuda_tests "$OUT/cuda_tests.log" ;;
    *) echo "unknown PART=$part"; exit 2 ;;
  esac
done
