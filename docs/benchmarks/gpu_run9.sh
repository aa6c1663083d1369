#!/usr/bin/env bash
# Ninth run. Each PART is one device call of at most 10 minutes.
#   PART=two    (nvidia-h200-x2, 32 cores) the Llama-3-8B prefill GP sweep (study space, budget 30, ASHA, 31 compile
#               processes, cold Triton cache) on GPU 0, then on both GPUs, then on both with 15 compile processes;
#               nvidia-smi records every 2 s which processes hold a context on which GPU and each GPU's utilization.
#   PART=scale  (nvidia-h200-x2) after the change to graphed timing: tests/test_timing.py on the GPU; the cold one-GPU
#               sweep as in PART=two; then, each from a copy of that sweep's Triton cache (warm: compiles are cache
#               loads), the same sweep on one GPU and on two with the same trials in flight per search (48 per GPU
#               on one, 24 per GPU on two: 4 per search), so that only the GPUs differ.
#   PART=scale2 (nvidia-h200-x2) the kernel's CUDA suite (tests/test_flash_attn.py on 16 pytest processes, at most
#               90 s); then every config the GP could propose for the Llama set compiled into one Triton cache
#               (docs/benchmarks/warm_cache.py), and on copies of it the sweep without baselines on one GPU and on
#               two, at equal per-search concurrency: the GPUs' scaling with compilation out of the way.
#   PART=suite  (nvidia-h200) the kernel's CUDA test suite: tests/test_flash_attn.py on 12 pytest processes (every
#               knob, compile-bound), then tests/test_timing.py alone (it times).
#   PART=kernel (nvidia-h200) a GP sweep of issue 7's bf16 grid (pipelines/problems/grid_bf16.yaml) over the Hopper
#               space (search_spaces/nvidia/sm90.yaml), SDPA's backends measured in the same sweep.
# Run from a snapshot of the commit (git archive HEAD), so that the code measured is the committed one:
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PYTEST_SITE=$PWD/../../.gpu-bundle/pytest-site \
#     PART=... bash docs/benchmarks/gpu_run9.sh
# PYTEST_SITE: pytest, pytest-xdist and their pure-Python dependencies (the GPU host has no pytest).
set -u
mkdir -p /tmp/site && tar -xJf "${BUNDLE:-.gpu-bundle/devenv-py312.tar.xz}" -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/pack
PART=${PART:-two}
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'cpus', __import__('os').cpu_count())"
  nvidia-smi topo -m; lscpu | grep -E "Model name|Socket|NUMA node"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

sweep() {  # sweep NAME TIMEOUT PROBLEMS [extra flags]
  local name=$1 limit=$2 problems=$3; shift 3
  [ "${KEEP_CACHE:-0}" = 1 ] || rm -rf /tmp/triton-$name
  TRITON_CACHE_DIR=/tmp/triton-$name timeout "$limit" python3 -m raytune_attn tune --problems "$problems" \
    --name "$name" --out "/tmp/$name" --tracking-uri "sqlite:////tmp/$name.db" "$@" > "/tmp/$name.log" 2>&1
  echo "sweep $name rc=$?"; grep -A40 "^sweep " "/tmp/$name.log" | cut -c1-400
  mkdir -p "/tmp/pack/$name"; cp "/tmp/$name.log" "/tmp/$name/summary.json" "/tmp/$name/trials.parquet" \
    "/tmp/$name/best_configs.json" "/tmp/pack/$name/" 2>/dev/null
  (cd /tmp/pack && tar -czf "$OUT/run9_$name.tar.gz" "$name")  # each sweep's files as soon as it ends
}
llama() {  # llama NAME TIMEOUT [extra flags]
  local name=$1 limit=$2; shift 2
  sweep "$name" "$limit" llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 \
    --space search_spaces/nvidia/sm90_study.yaml "$@"
}

case $PART in
  two)
    mkdir -p /tmp/pack/smi
    nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv -l 2 > /tmp/pack/smi/apps.csv 2>&1 &
    nvidia-smi dmon -s u -d 2 -o T > /tmp/pack/smi/dmon.txt 2>&1 &
    CUDA_VISIBLE_DEVICES=0 llama llama-1gpu 185 --compile-workers 31
    CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu 150 --compile-workers 31
    CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-15w 170 --compile-workers 15
    kill %1 %2; (cd /tmp/pack && tar -czf "$OUT/run9_smi.tar.gz" smi) ;;
  scale)
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-} timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py \
      > "$OUT/cuda_suite_timing.log" 2>&1; echo "timing suite rc=$?"; tail -3 "$OUT/cuda_suite_timing.log"
    CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-cold 220 --compile-workers 31
    for n in 1gpu 2gpu; do rm -rf /tmp/triton-llama-$n-warm; cp -r /tmp/triton-llama-1gpu-cold /tmp/triton-llama-$n-warm; done
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-warm 150 --compile-workers 31 --trials-per-gpu 48
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-warm 140 --compile-workers 31 ;;
  scale2)
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-} CUDA_VISIBLE_DEVICES=1 timeout 90 python3 -m pytest -q -p no:cacheprovider \
      -n 16 tests/test_flash_attn.py tests/test_timing.py > "$OUT/cuda_suite.log" 2>&1; echo "cuda suite rc=$?"
    tail -4 "$OUT/cuda_suite.log"
    rm -rf /tmp/triton-full; TRITON_CACHE_DIR=/tmp/triton-full CUDA_VISIBLE_DEVICES=0 timeout 170 python3 \
      docs/benchmarks/warm_cache.py llama3_8b_prefill search_spaces/nvidia/sm90_study.yaml --workers 31 \
      | tee "$OUT/warm_cache.log"
    for n in 1gpu 2gpu; do rm -rf /tmp/triton-llama-$n-full; cp -r /tmp/triton-full /tmp/triton-llama-$n-full; done
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-full 115 --compile-workers 31 --trials-per-gpu 48 --no-baselines
    KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu-full 105 --compile-workers 31 --no-baselines ;;
  suite)
    export PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-}
    timeout 420 python3 -m pytest -q -p no:cacheprovider -n 12 tests/test_flash_attn.py > "$OUT/cuda_suite_flash_attn.log" 2>&1
    echo "flash_attn suite rc=$?"; tail -8 "$OUT/cuda_suite_flash_attn.log"
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_timing.py > "$OUT/cuda_suite_timing.log" 2>&1
    echo "timing suite rc=$?"; tail -5 "$OUT/cuda_suite_timing.log" ;;
  kernel)
    sweep grid-bf16 560 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
esac
