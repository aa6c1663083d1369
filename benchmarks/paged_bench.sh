#!/usr/bin/env bash
# The paged-attention benchmark (benchmarks/paged_bench.py) on a GPU machine without network, FlashInfer included:
# installs the FlashInfer wheels carried in $FI_WHL into a target directory, puts FlashInfer's JIT cache in a fresh
# temporary directory (its kernels are built by nvcc at the start of the run, for this GPU's architecture only, while
# the other methods are timed) and writes $OUT/paged/paged_bench.{parquet,json,txt} plus fi_jit.log.
#
#   cd <repository root> && OUT=/tmp/out FI_WHL=../.fi-whl bash benchmarks/paged_bench.sh [paged_bench.py flags]
#
# FI_WHL (default ../.fi-whl): flashinfer_python (its csrc/ subdirectories of unrelated kernels removed, see
# docs/benchmarks/paged.md) and apache_tvm_ffi wheels for CPython 3.12 x86_64; the machine's own torch, numpy, ninja,
# einops, click, tqdm, tabulate, packaging, requests, nvidia-ml-py and cuda-bindings serve its other needs. Without
# the wheels the FlashInfer columns say "n/a (not installed)". BENCH_TIMEOUT (default 330 s) bounds the benchmark;
# the rows measured by then are in the Parquet file (it is rewritten after every row).
set -u
FI_WHL=${FI_WHL:-../.fi-whl}
OUT=${OUT:-/tmp/out}
SITE=${FI_SITE:-$(mktemp -d /tmp/fi-site.XXXXXX)}
mkdir -p "$OUT/paged"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
t0=$(date +%s)
if ls "$FI_WHL"/flashinfer_python-*.whl > /dev/null 2>&1; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
      --find-links "$FI_WHL" flashinfer-python apache-tvm-ffi; then
    export PYTHONPATH=$PYTHONPATH:$SITE
  else
    echo "paged_bench.sh: installing the FlashInfer wheels from $FI_WHL failed: running without FlashInfer"
  fi
else
  echo "paged_bench.sh: no flashinfer_python wheel in $FI_WHL: running without FlashInfer"
fi
export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-$(mktemp -d /tmp/fi-jit.XXXXXX)}
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc > /dev/null; then
  CUDA_HOME=$(dirname "$(dirname "$(command -v nvcc)")"); export CUDA_HOME
fi
echo "paged_bench.sh: wheels installed in $(( $(date +%s) - t0 )) s; nvcc: $(nvcc --version 2>/dev/null | tail -1)"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
python3 -c "import flashinfer; print('flashinfer', flashinfer.__version__)" 2>&1 | tail -1
timeout "${BENCH_TIMEOUT:-330}" python3 benchmarks/paged_bench.py --out "$OUT/paged" --fi-jit-timeout 230 "$@"
rc=$?
echo "paged_bench.sh: rc=$rc after $(( $(date +%s) - t0 )) s"
exit $rc
