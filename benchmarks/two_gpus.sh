#!/usr/bin/env bash
# One GPU against two of the same host (issue #35), with `raytune-attn tune` and the same flags on both: each sweep
# on a copy of one precompiled Triton cache, so compiles are cache loads and the comparison measures the GPUs and
# the sweep's pipeline, not the host's compile capacity. Then the same two-GPU sweep with one GPU's benchmark actor
# killed (kill -9) in the middle. Run from the repository root on a host with two GPUs:
#   RUN=x2 OUT=$OUT bash benchmarks/two_gpus.sh grid        # the bf16 grid's 12 D=128 cells (study space, budget 24)
#   RUN=x2 OUT=$OUT bash benchmarks/two_gpus.sh decode      # the Llama-3-8B decode set (paged space, budget 10)
# Parts: grid, decode (one GPU, then two) and grid-kill (two GPUs; the benchmark actor of the second killed
# KILL_AFTER seconds after it appeared, 10 by default). REPEAT=SUFFIX names a repeat's grid sweeps. Each sweep leaves
# <name>_{summary.json,trials.parquet,best_configs.json} in $OUT; benchmarks/two_gpu_table.py reads them.
RUN=${RUN:-x2}
OUT=${OUT:-$PWD/raytune-results/two-gpus}
source benchmarks/gpu_lib.sh

on() {  # on NAME CACHE GPUS PROBLEMS [flags]: a sweep on CUDA_VISIBLE_DEVICES=GPUS on a copy of cache CACHE
  local name=$1 cache=$2 gpus=$3 problems=$4; shift 4
  rm -rf "/tmp/triton-$name"; cp -r "/tmp/triton-full-$cache" "/tmp/triton-$name"
  clear_host
  KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=$gpus sweep "$name" 280 "$problems" --compile-workers 31 --no-baselines "$@"
  keep "$name"
}
kill_second_actor() {  # kill_second_actor AFTER: kill -9 the benchmark actor holding the second GPU, AFTER
  # seconds after it appeared (it starts with Tune, after the sweep's plan)
  local pid found="" i
  for i in $(seq 240); do
    for pid in $(nvidia-smi -i 1 --query-compute-apps=pid --format=csv,noheader 2>/dev/null); do
      tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q BenchActor && found=$pid
    done
    [ -n "$found" ] && break; sleep 0.5
  done
  [ -n "$found" ] || { echo "no benchmark actor on GPU 1" | tee "$OUT/kill.txt"; return; }
  sleep "$1"
  echo "$(date +%T.%N) kill -9 $found ($(tr '\0' ' ' < "/proc/$found/cmdline" | cut -c1-60))" | tee "$OUT/kill.txt"
  kill -9 "$found"
}

GRID=(--searcher gp --budget 24 --trials-per-gpu 16 --space search_spaces/nvidia/sm90_study.yaml)
for part in ${*:-grid}; do
  case $part in
    grid|grid-kill)
      [ -d /tmp/triton-full-grid ] || { cells grid_bf16 grid-d128 "p['head_dim'] == 128"
        warm_cache /tmp/triton-full-grid warm_cache_grid.log 240 /tmp/grid-d128.yaml \
          search_spaces/nvidia/sm90_study.yaml; }
      if [ "$part" = grid ]; then
        on "grid-1gpu${REPEAT:-}" grid 0 /tmp/grid-d128.yaml "${GRID[@]}"
        on "grid-2gpu${REPEAT:-}" grid 0,1 /tmp/grid-d128.yaml "${GRID[@]}"
      else
        kill_second_actor "${KILL_AFTER:-10}" &
        on "grid-kill${REPEAT:-}" grid 0,1 /tmp/grid-d128.yaml "${GRID[@]}"
        wait
      fi ;;
    decode)
      mkdir -p /tmp/triton-full-decode  # no precompile: the paged space's builds are the sweep's own (cold)
      on decode-1gpu decode 0 llama3_8b_decode --searcher gp --budget 10 --trials-per-gpu 8 --final-rep-ms 60
      on decode-2gpu decode 0,1 llama3_8b_decode --searcher gp --budget 10 --trials-per-gpu 8 --final-rep-ms 60 ;;
    *) echo "unknown part '$part' (grid, grid-kill, decode)"; exit 2 ;;
  esac
done
