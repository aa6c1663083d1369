#!/usr/bin/env bash
# Sweeps on this GPU with the project's own `raytune-attn tune` (GP over search_spaces/nvidia/sm90.yaml, budget 24,
# 24 trials a GPU, 15 compile processes, cold Triton cache, SDPA flash and cuDNN in the same sweep), then the
# per-cell table of each. Run from the repository root on a GPU host:
#   bash benchmarks/h100_sweeps.sh CELLS...      CELL = DTYPE:HEAD_DIM (e.g. bf16:128) or llama
# The files land in $OUT (default raytune-results/h100-sweeps): each sweep's summary, trials and artifact (tarred),
# and a markdown table grid_DTYPE_dD.md / llama.md. On a host with several GPUs, benchmarks/on_each_gpu.sh runs
# cells side by side, one a GPU.
RUN=${RUN:-h100}
OUT=${OUT:-$PWD/raytune-results/h100-sweeps}
source benchmarks/gpu_lib.sh
LIMIT=${LIMIT:-330}
for cell in "$@"; do
  if [ "$cell" = llama ]; then
    llama_sm90 "$LIMIT"
  else
    grid_cells "${cell%%:*}" "${cell##*:}" "$LIMIT"
  fi
done
