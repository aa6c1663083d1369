#!/usr/bin/env bash
# The H200 results of docs/benchmarks/README.md, measured again with this tree. Run from the repository root on a
# host with an H200 and the package installed with its [tune] extra (the environment active):
#   bash benchmarks/reproduce_h200.sh                  # grids and llama on one H200 (about 25 minutes)
#   bash benchmarks/reproduce_h200.sh pooling          # one GPU against two, on a host with two H200s
# Parts (any of them, space-separated):
#   grids    the bf16 and fp16 grids (36 cells each: D 64/128/256, full and causal, S 512-16384, B*S = 16384,
#            H*D = 2048), GP over the Hopper space, budget 24 a cell, SDPA measured after the sweep in the same run;
#   llama    the Llama-3-8B prefill set (15 varlen keys), GP over the Hopper space, budget 30, SDPA after the sweep;
#   pooling  the Llama set with the study space on one GPU, then on two, both on copies of one precompiled Triton
#            cache, no baselines; prints Tune's wall time of each and their ratio, and scores both sweeps' winners
#            against the recorded exhaustive landscapes (tests/data/h200/).
# Each sweep leaves <name>_{summary.json,trials.parquet,best_configs.json} in OUT (default
# raytune-results/reproduce-h200), and grid_table.py writes the tables beside them (<name>.md, <name>.csv).
# The recorded grids are one sweep per dtype and head dim, side by side on a 4-GPU host (benchmarks/on_each_gpu.sh,
# docs/benchmarks/README.md), the D=256 causal and D=64 full-mask cells swept again after the space file gained a
# move for each; here each grid is one sweep of all 36 cells.
RUN=reproduce-h200
OUT=${OUT:-$PWD/raytune-results/reproduce-h200}
PARTS=${*:-grids llama}
source benchmarks/gpu_lib.sh

table() {  # table NAME: the sweep's cells against SDPA (same run)
  python3 benchmarks/grid_table.py "$OUT/$1_summary.json" --csv "$OUT/$1.csv" | tee "$OUT/$1.md" | tail -4
}

for part in $PARTS; do
  case $part in
    grids)
      for d in bf16 fp16; do issue7_grid "$d" 1200; keep "grid-$d"; table "grid-$d"; done ;;
    llama)
      sweep llama-prefill 900 llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 --compile-workers 15
      keep llama-prefill; table llama-prefill ;;
    pooling)
      precompile 300 llama-1gpu llama-2gpu
      paired llama-1gpu 300 0 16; keep llama-1gpu
      paired llama-2gpu 300 0,1 16; keep llama-2gpu
      python3 -c "import json; w = [json.load(open('$OUT/llama-%s_summary.json' % g))['tune_wall_s'] \
for g in ('1gpu', '2gpu')]; print(f'Tune wall: one GPU {w[0]:.1f} s, two {w[1]:.1f} s, {w[0] / w[1]:.2f}x')"
      python3 -m benchmarks.score_vs_exhaustive --landscape tests/data/h200/llama_exhaustive_x4_nosync.parquet \
        --landscape tests/data/h200/llama_exhaustive_b64_s16_spin.parquet \
        --sweep "1gpu=$OUT/llama-1gpu_trials.parquet" --sweep "2gpu=$OUT/llama-2gpu_trials.parquet" \
        --out "$OUT/pooling_vs_exhaustive.csv" ;;
    *) echo "unknown part '$part' (grids, llama, pooling)"; exit 2 ;;
  esac
done
