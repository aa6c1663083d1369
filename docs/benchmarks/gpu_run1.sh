#!/usr/bin/env bash
# First H100 run: CUDA correctness suite, the standard-grid benchmark with the default config, and the recorded
# landscape of the study's 450-config space for D=128 causal S=4096. Run from the repo root on the GPU host with
# the GPU bundle in .gpu-bundle/ (see shared/gpu-bundle/README.md); results land in $OUT.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/env.txt"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/env.txt"
# 1. correctness on CUDA, fp16 and bf16, every config of the representative grid
timeout 200 python3 -m pytest tests/test_flash_attn.py -q -n 16 -p no:cacheprovider > "$OUT/cuda_tests.log" 2>&1
echo "cuda tests rc=$?"; tail -3 "$OUT/cuda_tests.log"
# 2. landscape: every config of the study's space (450) for one problem; compiles run ahead on 15 processes
timeout 330 python3 -m raytune_attn.exhaustive --space search_spaces/nvidia/sm90.yaml --fix SPLIT_MASK=true \
  --fix USE_TMA=false --workers 15 --out "$OUT/landscape_d128_causal_s4096.parquet" \
  --problem dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16
echo "landscape rc=$?"
# 3. standard grid, default config, against SDPA flash / cuDNN / efficient
timeout 150 python3 -m raytune_attn bench --out "$OUT/bench_default.parquet" --rep-ms 50 | tail -30
