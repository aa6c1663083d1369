#!/usr/bin/env bash
# Runs each JOB on its own GPU of this host, side by side: JOB i (a command line that may call the functions of
# benchmarks/gpu_lib.sh, e.g. "grid_cells bf16 64 300; landscape study 200 KEY") with CUDA_VISIBLE_DEVICES=i, so
# every sweep or landscape has one GPU to itself and its own local Ray instance. Run from the repository root:
#   RUN=h100 OUT=$OUT bash benchmarks/on_each_gpu.sh "JOB0" "JOB1" ...
# Each job's output goes to $OUT/gpuI.log (its last lines printed at the end); $OUT/env.txt records the machine;
# every other file the jobs leave in $OUT is packed into $OUT/${RUN}_results.tar.gz at the end (one file to carry
# back however many the jobs wrote).
# Timings of jobs on different GPUs of one host do not share a GPU; they share the CPUs (64 on a 4-GPU H100 host,
# 15 compile processes a job).
OUT=${OUT:-/tmp/out} RUN=${RUN:-gpu}
source benchmarks/gpu_lib.sh
ngpu=$(nvidia-smi -L | wc -l)
[ "$#" -le "$ngpu" ] || { echo "on_each_gpu: $# jobs for $ngpu GPUs" >&2; exit 2; }
i=0
for job in "$@"; do
  ( export CUDA_VISIBLE_DEVICES=$i; echo "[gpu $i] $job"; eval "$job" ) > "$OUT/gpu$i.log" 2>&1 &
  i=$((i + 1))
done
wait
for ((j = 0; j < i; j++)); do echo "== gpu $j"; tail -25 "$OUT/gpu$j.log" | cut -c1-300; done
cd "$OUT" && files=$(ls | grep -v -E '^(gpu[0-9]+\.log|env\.txt|.*_results\.tar\.gz)$')
[ -z "$files" ] || { tar -czf "${RUN}_results.tar.gz" $files && rm -f $files; ls -la "$OUT"; }
