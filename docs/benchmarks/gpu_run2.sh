#!/usr/bin/env bash
# Second H100 run: the CUDA suite again after the seqlen-specialization fix, the second recorded landscape
# (study space, D=64 non-causal S=1024), and the dispatch-overhead benchmark. Results land in $OUT.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton-cache
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 150 python3 -m pytest tests/test_flash_attn.py -q -n 16 -p no:cacheprovider > "$OUT/cuda_tests.log" 2>&1
echo "cuda tests rc=$?"; tail -3 "$OUT/cuda_tests.log"
timeout 330 python3 -m raytune_attn.exhaustive --space search_spaces/nvidia/sm90.yaml --fix SPLIT_MASK=true \
  --fix USE_TMA=false --workers 15 --out "$OUT/landscape_d64_full_s1024.parquet" \
  --problem dense-b16-hq32-hkv32-sq1024-sk1024-d64-full-bfloat16
echo "landscape rc=$?"
timeout 60 python3 -m raytune_attn.dispatch_bench --out "$OUT/dispatch_bench.json"
