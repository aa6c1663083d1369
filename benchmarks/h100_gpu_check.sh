#!/usr/bin/env bash
# The GPU test suite as docs/gpu-tests.md runs it (cold Triton cache, timed), then the D=128 bf16 kernel table
# (benchmarks/h100_kernel_table.py) and, in what is left of the time, the gpu_slow cases; every log into $OUT.
# Run from the repository root on a GPU machine:
#   bash benchmarks/h100_gpu_check.sh WINNERS.json [SLOW_LIMIT_S]
# WINNERS: the best-configs artifact of the D=128 bf16 grid cells (docs/benchmarks/h200/sweep_bf16_d128/best_configs.json).
set -u
WINNERS=${1:?usage: h100_gpu_check.sh WINNERS.json [SLOW_LIMIT_S]}
SLOW_LIMIT=${2:-0}
[ -f "$WINNERS" ] || { echo "no winners file $WINNERS" >&2; exit 2; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
FILES="tests/test_flash_attn.py tests/test_workload.py tests/test_ops.py tests/test_runtime.py"
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nproc; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# The fast GPU set: a plain run leaves the gpu_slow cases out (tests/conftest.py).
t0=$(date +%s)
TRITON_CACHE_DIR=$(mktemp -d) timeout 300 python3 -m pytest -q -p no:cacheprovider --durations=40 --timeout 120 \
  $FILES > "$OUT/gpu_tests_fast.log" 2>&1
echo "fast GPU tests: rc=$? wall=$(( $(date +%s) - t0 )) s" | tee -a "$OUT/gpu_tests_fast.log"
grep -E "passed|failed" "$OUT/gpu_tests_fast.log" | tail -3

TRITON_CACHE_DIR=$(mktemp -d) timeout 240 python3 -m benchmarks.h100_kernel_table --winners "$WINNERS" \
  --out "$OUT/kernel_d128_bf16.json" --md "$OUT/kernel_d128_bf16.md" > "$OUT/kernel_d128_bf16.log" 2>&1
echo "kernel table rc=$?"; tail -18 "$OUT/kernel_d128_bf16.log"

if [ "$SLOW_LIMIT" -gt 0 ]; then  # the slow cases, in 8 processes when pytest-xdist is there
  n=$(python3 -c "import xdist" 2>/dev/null && echo "-n 8")
  t0=$(date +%s)
  timeout "$SLOW_LIMIT" python3 -m pytest -q -p no:cacheprovider -m gpu_slow --timeout 120 $n $FILES \
    > "$OUT/gpu_tests_slow.log" 2>&1
  echo "gpu_slow tests: rc=$? wall=$(( $(date +%s) - t0 )) s" | tee -a "$OUT/gpu_tests_slow.log"
  grep -E "passed|failed" "$OUT/gpu_tests_slow.log" | tail -3
fi
