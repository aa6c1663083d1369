#!/usr/bin/env bash
# Seventh run (kind nvidia-h200; PART=two on nvidia-h200-x2). Each PART is one device call of at most 10 minutes.
#   PART=sweep      the GP sweep of the 15 Llama-3-8B prefill keys (study space, budget 30, ASHA), cold Triton
#                   cache; then the exhaustive landscape of those keys until the call's time is up (--resume-able).
#   PART=exhaustive finish the exhaustive landscape (PREV=path of the partial parquet from PART=sweep).
#   PART=fifo       the same sweep without early stopping (FIFO), cold cache: what early stopping saves.
#   PART=two        the same ASHA sweep on one GPU and on two (CUDA_VISIBLE_DEVICES), each with a cold cache.
#   PART=x4         (nvidia-h200-x4) the exhaustive landscape on GPUs 2 and 3 (half of the keys each), while GPUs 0
#                   and 1 run the ASHA sweep on one GPU, on two, then on one with 48 trials in flight; every sweep
#                   with 15 compile processes (as on the 16-core one-GPU machine) and a cold cache. All files
#                   come back in one tarball (run7_x4.tar.gz).
#   PART=x4b        (nvidia-h200-x4; after timings stopped measuring the varlen entry point's host sync) the whole
#                   landscape again: the first key with 60 compile processes on GPU 0 (a warm cache and the compile
#                   failures for the rest), then the other 14 keys on the 4 GPUs; then the ASHA sweep on one GPU and
#                   on two, each with 31 compile processes (as on a 32-core two-GPU host) and a cold cache.
#   PART=final      (nvidia-h200; after timings hid the host's launch latency and the final re-measure took stopped
#                   trials too) the ASHA sweep with a cold cache, then, in the cache it left, the exhaustive landscape
#                   of the eight keys whose kernels run under 0.1 ms (the only ones whose timings the change moves).
# Run from a snapshot of the commit (git archive HEAD), so that the code measured is the committed one:
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run7.sh
set -u
mkdir -p /tmp/site && tar -xJf "${BUNDLE:-.gpu-bundle/devenv-py312.tar.xz}" -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
PART=${PART:-sweep}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'cpus', __import__('os').cpu_count())" | tee -a "$OUT/env.txt"
KEYS=$(python3 -c "from raytune_attn.sweep.problems import load_problems
print(' '.join('--problem ' + p.key for p in load_problems('llama3_8b_prefill')))")

sweep() {  # sweep NAME TIMEOUT [extra flags]
  local name=$1 limit=$2; shift 2
  rm -rf /tmp/triton-$name
  TRITON_CACHE_DIR=/tmp/triton-$name timeout "$limit" python3 -m raytune_attn tune --problems llama3_8b_prefill \
    --searcher gp --budget 30 --trials-per-gpu 24 --space search_spaces/nvidia/sm90_study.yaml \
    --name "$name" --out "/tmp/$name" --tracking-uri "sqlite:////tmp/$name.db" "$@" > "$OUT/$name.log" 2>&1
  echo "sweep $name rc=$?"; grep -A16 "^sweep " "$OUT/$name.log" | cut -c1-300
  cp "/tmp/$name/summary.json" "$OUT/${name}_summary.json"; cp "/tmp/$name/trials.parquet" "$OUT/${name}_trials.parquet"
}

exhaustive() {  # exhaustive TIMEOUT [SUFFIX KEYS...]: the landscape of KEYS (default all 15)
  local limit=$1 sfx=${2:-}; shift; [ $# -gt 0 ] && shift
  local keys=${*:-$KEYS}
  TRITON_CACHE_DIR=/tmp/triton-exh timeout "$limit" python3 -m raytune_attn.exhaustive --resume \
    --space search_spaces/nvidia/sm90_study.yaml $keys --out "$OUT/llama_exhaustive$sfx.parquet" --rep-ms 20 \
    --timeout-s 60 --workers 15 >> "$OUT/llama_exhaustive$sfx.log" 2>&1
  echo "exhaustive$sfx rc=$?"; grep '^{' "$OUT/llama_exhaustive$sfx.log" | cut -c1-200
}

case $PART in
  sweep) sweep llama-asha 330; exhaustive 200 ;;
  exhaustive) cp "$PREV" "$OUT/llama_exhaustive.parquet"; exhaustive 540 ;;
  fifo) sweep llama-fifo 400 --no-early-stop ;;
  two) CUDA_VISIBLE_DEVICES=0 sweep llama-1gpu 270; sweep llama-2gpu 270 ;;
  x4)
    # Keys split so that each half holds two of the four long (4096) keys.
    A=$(echo $KEYS | tr ' ' '\n' | grep -v '^--problem$' | awk 'NR % 2 == 1' | sed 's/^/--problem /' | tr '\n' ' ')
    B=$(echo $KEYS | tr ' ' '\n' | grep -v '^--problem$' | awk 'NR % 2 == 0' | sed 's/^/--problem /' | tr '\n' ' ')
    (CUDA_VISIBLE_DEVICES=2 exhaustive 510 _a $A > "$OUT/exh_a.txt" 2>&1 &)
    (CUDA_VISIBLE_DEVICES=3 exhaustive 510 _b $B > "$OUT/exh_b.txt" 2>&1 &)
    CUDA_VISIBLE_DEVICES=0 sweep llama-1gpu 220 --compile-workers 15
    CUDA_VISIBLE_DEVICES=0,1 sweep llama-2gpu 170 --compile-workers 15
    CUDA_VISIBLE_DEVICES=0 sweep llama-1gpu-48 90 --compile-workers 15 --trials-per-gpu 48
    while pgrep -f raytune_attn.exhaustive > /dev/null; do sleep 5; done
    cat "$OUT"/exh_*.txt
    (cd "$OUT" && tar -czf run7_x4.tar.gz --exclude run7_x4.tar.gz ./* && find . -type f ! -name run7_x4.tar.gz ! -name env.txt -delete) ;;
  x4b)
    set -- $(echo $KEYS | tr ' ' '\n' | grep -v '^--problem$')
    first=$1; shift
    CUDA_VISIBLE_DEVICES=0 TRITON_CACHE_DIR=/tmp/triton-exh timeout 200 python3 -m raytune_attn.exhaustive \
      --space search_spaces/nvidia/sm90_study.yaml --problem "$first" --out "$OUT/exh_0.parquet" --rep-ms 20 \
      --timeout-s 60 --workers 60 > "$OUT/exh_0.log" 2>&1; echo "exhaustive first key rc=$?"
    for g in 0 1 2 3; do
      keys=$(i=0; for k in "$@"; do [ $((i % 4)) = $g ] && printf -- '--problem %s ' "$k"; i=$((i + 1)); done)
      cp "$OUT/exh_0.parquet" "/tmp/exh_$g.parquet"  # seeds the compile-failure memo (--resume)
      (CUDA_VISIBLE_DEVICES=$g TRITON_CACHE_DIR=/tmp/triton-exh timeout 200 python3 -m raytune_attn.exhaustive \
        --resume --space search_spaces/nvidia/sm90_study.yaml $keys --out "/tmp/exh_$g.parquet" --rep-ms 20 \
        --timeout-s 60 --workers 15 > "$OUT/exh_$((g + 1)).log" 2>&1 &)
    done
    sleep 5; while pgrep -f raytune_attn.exhaustive > /dev/null; do sleep 2; done
    python3 -c "import pandas as pd, glob; df = pd.concat([pd.read_parquet(f) for f in sorted(glob.glob('/tmp/exh_*.parquet'))]).drop_duplicates(['problem_key', 'BLOCK_M', 'BLOCK_N', 'num_warps', 'num_stages', 'PRE_LOAD_V']); df.to_parquet('$OUT/llama_exhaustive.parquet'); print('exhaustive rows', len(df), df.problem_key.nunique(), 'keys')"
    rm -f "$OUT/exh_0.parquet"
    CUDA_VISIBLE_DEVICES=0 sweep llama-1gpu 200 --compile-workers 31
    CUDA_VISIBLE_DEVICES=0,1 sweep llama-2gpu 170 --compile-workers 31
    (cd "$OUT" && tar -czf run7_x4b.tar.gz --exclude run7_x4b.tar.gz ./* && find . -type f ! -name run7_x4b.tar.gz ! -name env.txt -delete) ;;
  final)
    sweep llama-final 230
    set -- $(echo $KEYS | tr ' ' '\n' | grep -v '^--problem$' | grep -E 'sq(16|64)-|b(4|32)-hq32-hkv8-sq256|b1-hq32-hkv8-sq1024')
    small=$(for k in "$@"; do printf -- '--problem %s ' "$k"; done)
    TRITON_CACHE_DIR=/tmp/triton-llama-final timeout 200 python3 -m raytune_attn.exhaustive \
      --space search_spaces/nvidia/sm90_study.yaml $small --out "$OUT/llama_exhaustive_small.parquet" --rep-ms 20 \
      --timeout-s 30 --workers 15 > "$OUT/llama_exhaustive_small.log" 2>&1
    echo "exhaustive rc=$?"; grep '^{' "$OUT/llama_exhaustive_small.log" | cut -c1-200 ;;
esac
