#!/usr/bin/env bash
# Twenty-third run. PART is one or more parts, space-separated, run in one device call of at most 10 minutes.
#   PART=order (nvidia-h200) issue 7: the persistent grid's longest-first order deals odd rounds of tiles backwards
#             (a snake; was straight round-robin), and the masked step compares the block-local key index with
#             per-row limits (was: start_n added to every key index first). Same call, two builds: kernel_ab.py on
#             run 22's bf16 winners of the causal cells (S 512-16384; D 64, 128, 256) and the warp-specialized and
#             persistent heavy-first variants, first on a copy of the tree with the kernel of 7f8c269, then on the
#             tree; the ratios printed by --baseline. Then the CUDA tests. The compare with per-row limits was
#             slower on the D=64 split-loop winners and is not in the kernel since: PART=snake measures the order alone.
#   PART=snake (nvidia-h200) the snake alone, as PART=order (same old build), on the D=64 cells (run 22's winners of
#             the re-tuned D=64 sweep) and the D=128 cells, with the warp-specialized and persistent heavy-first
#             variants.
#   PART=llama (nvidia-h200) issue 7's Llama-3-8B prefill set as run 21 tuned it (GP, budget 30, cold cache, the
#             Hopper space, SDPA after the sweep), with this kernel; TAG: a suffix of the sweep name.
#   PART=causal (nvidia-h200) the D=128 and D=256 causal cells of issue 7's bf16 grid as run 22 tuned them (GP, budget
#             24, cold cache, SDPA after the sweep), with the snake and the GP screening the warp-specialized layout
#             heavy-first for causal problems (gp.py); PART=causal16 the same on the fp16 grid. (The D=64 winners do
#             not use the persistent heavy-first order.)
#   PART=hostdesc (nvidia-h200) TMA loads through descriptors the launcher builds once over whole dense tensors
#             (passed by value) instead of descriptors each program writes and fences per tile. Same call, two builds:
#             kernel_ab.py on run 22's bf16 winners of the D=128 and D=256 cells (full and causal, S 512-16384) and
#             the warp-specialized heavy-first forms, first on a copy of the tree with the kernel of PART=causal
#             (.gpu-bundle/ab-base/flash_attn_snake.py), then on the tree. Then the CUDA tests.
#   PART=probe (nvidia-h200) PART=hostdesc's new build hung on its first config and in the CUDA tests: one launch of
#             each form (split loop and warp-specialized, plain and persistent grid) in its own process under a 45 s
#             timeout (launch_probe.py); where the D=256 warp-specialized form runs, the A/B of PART=hostdesc on the
#             D=256 cells with that form.
#   PART=tests (nvidia-h200) the CUDA tests.
# Calls: 1 PART=order at 14e2d1e (the kernel with both changes); 2 PART="snake llama tests" at 73200dc with gp.py of
# 7f8c269 (the warp-specialized screen as in run 22); 3 PART="causal llama" TAG=-hf (llama: the sweep again, with the
# heavy-first screen) and 4 PART=causal16 at 73200dc; 5 PART=hostdesc and 6 PART=probe at 4686e75.
# Run from the repository root of the commit (the device copies the working tree), with the old kernel beside it:
#   mkdir -p .gpu-bundle/ab-base && git show 7f8c269:raytune_attn/kernels/flash_attn.py \
#     > .gpu-bundle/ab-base/flash_attn.py
#   git show 73200dc:raytune_attn/kernels/flash_attn.py > .gpu-bundle/ab-base/flash_attn_snake.py
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run23.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz, .gpu-bundle/pytest-site (pytest for the CUDA tests) and
# .gpu-bundle/ab-base)
RUN=run23 PART=${PART:-order}
source docs/benchmarks/gpu_lib.sh

ab() {  # ab TAG ROOT DIMS WINNERS [--baseline JSON]: kernel_ab.py from the tree at ROOT on the causal cells of DIMS
  (cd "$2" && TRITON_CACHE_DIR=/tmp/triton-ab-$1 timeout 220 python3 docs/benchmarks/kernel_ab.py --short 0 \
    --masks "${ab_masks:-causal}" --seqs 512,1024,2048,4096,8192,16384 --dims "$3" --winners "docs/benchmarks/h200/run22/$4" \
    --variants "$VARIANTS" --out "$OUT/$PART_DIR/$1.json" --workers 15 "${@:5}" 2>&1 | tee "$OUT/$PART_DIR/$1.log" \
    | grep -v "TFLOP/s" | tail -60)
}
old_tree() {  # old_tree [KERNEL]: a copy of the tree with the kernel of 7f8c269 (or ab-base/KERNEL), in /tmp/old
  rm -rf /tmp/old; mkdir -p /tmp/old; cp -r raytune_attn docs /tmp/old/
  cp ".gpu-bundle/ab-base/${1:-flash_attn.py}" /tmp/old/raytune_attn/kernels/flash_attn.py
  grep -c "for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0))" \
    /tmp/old/raytune_attn/kernels/flash_attn.py
}

for part in $PART; do
  case $part in
    order)
      PART_DIR=order VARIANTS=ws4+m128+n128+s2+pers+rev,ws4+m128+n128+s2+pers+rev+preV,ws4+m128+n128+s2+pers+preV,\
ws4+m128+n64+s2,pers+rev
      mkdir -p "$OUT/order"; old_tree
      ab straight /tmp/old 64,128,256 grid-bf16_best_configs.json
      ab snake "$PWD" 64,128,256 grid-bf16_best_configs.json --baseline "$OUT/order/straight.json"
      cuda_tests "$OUT/order/cuda_tests.log" ;;
    snake)
      PART_DIR=snake VARIANTS=ws4+m128+n128+s2+pers+rev,ws4+m128+n128+s2+pers+rev+preV,pers+rev
      mkdir -p "$OUT/snake"; old_tree
      ab straight_d64 /tmp/old 64 grid-bf16-d64-rev_best_configs.json
      ab snake_d64 "$PWD" 64 grid-bf16-d64-rev_best_configs.json --baseline "$OUT/snake/straight_d64.json"
      ab straight_d128 /tmp/old 128 grid-bf16_best_configs.json
      ab snake_d128 "$PWD" 128 grid-bf16_best_configs.json --baseline "$OUT/snake/straight_d128.json" ;;
    llama)
      sweep "llama-sm90${TAG:-}" 330 llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 --compile-workers 15 ;;
    causal|causal16)
      d=$( [ "$part" = causal16 ] && echo fp16 || echo bf16 )
      python3 -c "import yaml; d = yaml.safe_load(open('pipelines/problems/grid_$d.yaml')); \
d['problems'] = [p for p in d['problems'] if p['causal'] and p['head_dim'] > 64]; d['name'] = 'grid_${d}_causal'; \
yaml.safe_dump(d, open('/tmp/grid_${d}_causal.yaml', 'w'))"
      sweep "grid-$d-causal" 280 "/tmp/grid_${d}_causal.yaml" --searcher gp --budget 24 --trials-per-gpu 24 \
        --compile-workers 15 ;;
    hostdesc)
      PART_DIR=hostdesc VARIANTS=ws4+m128+n128+s2+pers+rev,ws4+m128+n64+s2+rev
      mkdir -p "$OUT/hostdesc"; old_tree flash_attn_snake.py
      grep -c HOST_DESC /tmp/old/raytune_attn/kernels/flash_attn.py
      ab_masks="full,causal"
      ab device_desc /tmp/old 128,256 grid-bf16_best_configs.json
      ab host_desc "$PWD" 128,256 grid-bf16_best_configs.json --baseline "$OUT/hostdesc/device_desc.json"
      cuda_tests "$OUT/hostdesc/cuda_tests.log"
      (cd "$OUT" && tar -czf hostdesc.tar.gz hostdesc && rm -r hostdesc) ;;
    probe)  # after PART=hostdesc hung: which forms hang with the launcher's descriptors (each in its own process)
      mkdir -p "$OUT/probe"
      probe() {  # probe D S MASK CONFIG
        TRITON_CACHE_DIR=/tmp/triton-probe timeout 45 python3 docs/benchmarks/launch_probe.py --dim "$1" --seq "$2" \
          $([ "$3" = causal ] && echo --causal) "$4" 2>&1 | tail -2 | tee -a "$OUT/probe/probe.log"
        echo "D$1 S$2 $3 rc=${PIPESTATUS[0]}" | tee -a "$OUT/probe/probe.log"
      }
      tma='"USE_TMA": true, "num_stages": 2, "maxnreg": 0'
      ws='"WARP_SPECIALIZE": true, "SPLIT_MASK": false, "num_warps": 4, "BLOCK_M": 128'
      probe 128 4096 full "{\"BLOCK_M\": 128, \"BLOCK_N\": 64, \"num_warps\": 4, $tma}"
      probe 128 4096 full "{\"BLOCK_M\": 128, \"BLOCK_N\": 64, \"num_warps\": 4, \"PERSISTENT\": true, $tma}"
      probe 256 512 causal "{$ws, \"BLOCK_N\": 64, \"REVERSE_M\": true, $tma}"
      probe 128 4096 full "{$ws, \"BLOCK_N\": 128, $tma}"
      probe 128 4096 full "{$ws, \"BLOCK_N\": 128, \"PERSISTENT\": true, $tma}"
      if grep -q "D256 S512 causal rc=0" "$OUT/probe/probe.log"; then  # the D=256 form works: is it faster?
        PART_DIR=probe VARIANTS=ws4+m128+n64+s2+rev,ws4+m128+n64+s2+rev+preV
        old_tree flash_attn_snake.py
        ab device_desc /tmp/old 256 grid-bf16_best_configs.json
        ab host_desc "$PWD" 256 grid-bf16_best_configs.json --baseline "$OUT/probe/device_desc.json"
      fi
      (cd "$OUT" && tar -czf probe.tar.gz probe && rm -r probe) ;;
    tests)
      cuda_tests "$OUT/cuda_tests.log" ;;
    *) echo "unknown PART=$part"; exit 2 ;;
  esac
done
