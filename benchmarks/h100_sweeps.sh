#!/usr/bin/env bash
# Sweeps on this GPU with the project's own `raytune-attn tune` (GP over search_spaces/nvidia/sm90.yaml, budget 24,
# 24 trials a GPU, 15 compile processes, cold Triton cache, SDPA flash and cuDNN in the same sweep), then the
# per-cell table of each. Run from the repository root on a GPU host:
#   bash benchmarks/h100_sweeps.sh CELLS...      CELL = DTYPE:HEAD_DIM (e.g. bf16:128) or llama
# The files land in $OUT (default raytune-results/h100-sweeps): each sweep's summary, trials and artifact (tarred), and a markdown
# table grid_DTYPE_dD.md / llama.md.
RUN=${RUN:-h100}
OUT=${OUT:-$PWD/raytune-results/h100-sweeps}
source benchmarks/gpu_lib.sh
LIMIT=${LIMIT:-330}
for cell in "$@"; do
  if [ "$cell" = llama ]; then
    sweep llama-sm90 "$LIMIT" llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 --compile-workers 15
    python3 benchmarks/grid_table.py /tmp/llama-sm90/summary.json > "$OUT/llama.md" 2>&1
    continue
  fi
  dtype=${cell%%:*} d=${cell##*:}
  head_dim_cells "grid_$dtype" "$d"
  sweep "grid-$dtype-d$d" "$LIMIT" "/tmp/grid_${dtype}_d$d.yaml" --searcher gp --budget 24 --trials-per-gpu 24 \
    --compile-workers 15
  python3 benchmarks/grid_table.py "/tmp/grid-$dtype-d$d/summary.json" > "$OUT/grid_${dtype}_d$d.md" 2>&1
  cat "$OUT/grid_${dtype}_d$d.md"
done
