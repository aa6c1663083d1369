#!/usr/bin/env bash
# Eighth run. Each PART is one device call of at most 10 minutes.
#   PART=two    (nvidia-h200-x2, 32 cores) the Llama-3-8B prefill GP sweep (study space, budget 30, ASHA) on one
#               GPU, then on both, each with 31 compile processes and a cold Triton cache: the two-GPU speed-up;
#               with FIFO=1 then the one-GPU sweep without early stopping: what early stopping saves; with
#               SUITE_S=N then the kernel's CUDA suite for at most N seconds.
#   PART=fifo   (nvidia-h200) the same sweep with ASHA, then without early stopping (FIFO), each with 15 compile
#               processes and a cold cache: what early stopping saves in GPU time and what it costs in quality.
#   PART=kernel (nvidia-h200) the CUDA test suite of the kernel (every knob, tests/test_flash_attn.py), then a GP
#               sweep of issue 7's bf16 grid (D 64/128/256, pipelines/problems/grid_bf16.yaml) over the Hopper
#               space (search_spaces/nvidia/sm90.yaml) with SDPA's backends measured in the same sweep.
# Run from a snapshot of the commit (git archive HEAD), so that the code measured is the committed one:
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PYTEST_SITE=$PWD/../../.gpu-bundle/pytest-site \
#     PART=... bash docs/benchmarks/gpu_run8.sh
set -u
mkdir -p /tmp/site && tar -xJf "${BUNDLE:-.gpu-bundle/devenv-py312.tar.xz}" -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/pack
PART=${PART:-two}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'cpus', __import__('os').cpu_count())" | tee -a "$OUT/env.txt"

sweep() {  # sweep NAME TIMEOUT PROBLEMS [extra flags]
  local name=$1 limit=$2 problems=$3; shift 3
  rm -rf /tmp/triton-$name
  TRITON_CACHE_DIR=/tmp/triton-$name timeout "$limit" python3 -m raytune_attn tune --problems "$problems" \
    --name "$name" --out "/tmp/$name" --tracking-uri "sqlite:////tmp/$name.db" "$@" > "/tmp/$name.log" 2>&1
  echo "sweep $name rc=$?"; grep -A40 "^sweep " "/tmp/$name.log" | cut -c1-400
  mkdir -p "/tmp/pack/$name"; cp "/tmp/$name.log" "/tmp/$name/summary.json" "/tmp/$name/trials.parquet" \
    "/tmp/$name/best_configs.json" "/tmp/pack/$name/" 2>/dev/null
  (cd /tmp/pack && tar -czf "$OUT/run8_$name.tar.gz" "$name")  # each sweep's files as soon as it ends
}
llama() {  # llama NAME TIMEOUT [extra flags]
  local name=$1 limit=$2; shift 2
  sweep "$name" "$limit" llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 \
    --space search_spaces/nvidia/sm90_study.yaml "$@"
}

case $PART in
  two)  # and, when FIFO=1, the one-GPU sweep without early stopping (GPU 0, 31 compile processes)
    CUDA_VISIBLE_DEVICES=0 llama llama-1gpu 185 --compile-workers 31
    CUDA_VISIBLE_DEVICES=0,1 llama llama-2gpu 150 --compile-workers 31
    [ "${FIFO:-0}" = 1 ] && CUDA_VISIBLE_DEVICES=0 llama llama-1gpu-fifo 255 --compile-workers 31 --no-early-stop
    if [ -n "${SUITE_S:-}" ]; then  # then the kernel's CUDA suite for at most SUITE_S seconds
      PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-} timeout "$SUITE_S" python3 -m pytest -q -p no:cacheprovider \
        tests/test_timing.py tests/test_flash_attn.py > "$OUT/cuda_suite.log" 2>&1; echo "cuda suite rc=$?"
      tail -5 "$OUT/cuda_suite.log"
    fi ;;
  fifo)
    llama llama-asha 260 --compile-workers 15
    llama llama-fifo 320 --compile-workers 15 --no-early-stop ;;
  kernel)
    # pytest is not on the GPU host: PYTEST_SITE is a folder with pytest and its pure-Python dependencies.
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-} timeout 240 python3 -m pytest -q -p no:cacheprovider \
      tests/test_flash_attn.py tests/test_timing.py > "$OUT/cuda_suite.log" 2>&1; echo "cuda suite rc=$?"
    tail -5 "$OUT/cuda_suite.log"
    sweep grid-bf16 330 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
esac
