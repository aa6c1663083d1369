#!/usr/bin/env bash
# The H100 results of docs/benchmarks/README.md, measured again with this tree. Run from the repository root on a
# host with an H100 and the package installed with its [tune] extra (the environment active):
#   bash benchmarks/reproduce_h100.sh
# It runs, in OUT (default raytune-results/reproduce-h100):
#   1. the GP sweep (study space, budget 20) of the two problems with recorded exhaustive landscapes
#      (pipelines/problems/h100_landscapes.yaml, tests/data/landscape_h100_*.parquet), with early stopping (ASHA)
#      and without (FIFO);
#   2. examples/inference.py on the ASHA sweep's artifact: `raytune_attn.attention` with no config against SDPA
#      flash and cuDNN in the same run (inference.json);
#   3. `raytune-attn bench` of the untuned default config on the standard grid against SDPA (bench_default.*);
#   4. the dispatch overhead of `attention()` over a direct kernel launch (dispatch_bench.json).
RUN=reproduce-h100
OUT=${OUT:-$PWD/raytune-results/reproduce-h100}
source benchmarks/gpu_lib.sh

for mode in asha fifo; do
  sweep "land-$mode" 600 h100_landscapes --searcher gp --budget 20 --space search_spaces/nvidia/sm90_study.yaml \
    $([ $mode = fifo ] && echo --no-early-stop)
  for f in summary.json trials.parquet; do cp "/tmp/land-$mode/$f" "$OUT/sweep_${mode}_$f"; done
done
cp /tmp/land-asha/best_configs.json "$OUT/best_configs.json"
timeout 300 python3 examples/inference.py "$OUT/best_configs.json" --out "$OUT/inference.json"
timeout 900 python3 -m raytune_attn bench --grid standard --rep-ms 50 --out "$OUT/bench_default.parquet" \
  | tail -3
timeout 120 python3 -m benchmarks.dispatch_bench --out "$OUT/dispatch_bench.json"
