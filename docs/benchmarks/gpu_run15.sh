#!/usr/bin/env bash
# Fifteenth run. Each PART is one device call of at most 10 minutes.
#   PART=deferred (nvidia-h200-x2) issue 4's two-GPU speed-up with trials handed out deferred when no search has a
#                 config ready (sweep/searcher.py): Tune keeps its trial processes, and its end no longer waits up to
#                 5 s for processes it started and did not need. The Llama sweep on copies of one precompiled Triton
#                 cache, 31 compile processes, no baselines, the host cleared between sweeps, vmstat beside each:
#                 one GPU then two with 16 trials per GPU (run 14's pair16), then two GPUs with 24 (run 14's collapse).
#   PART=deferred2 (nvidia-h200-x2) the same after deferred trials go to the search asked longest ago (call 1's
#                 two-GPU sweep ran 18.3 configs/s mid-sweep against run 14's 20.7-21.5), with `top` every 5 s beside
#                 the 24-per-GPU sweep: call 1's collapsed again with 44 trial processes for 48 in flight, so not
#                 from Tune starting new ones.
# Call 1 (at 630d821) ran PART=deferred, call 2 (at 0a91fb5) PART=deferred2.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run15.sh
RUN=run15 PART=${PART:-deferred}
source docs/benchmarks/gpu_lib.sh

tune_phases() {  # tune_phases NAME: where Tune's time went, from the sweep's summary
  python3 -c "import json; s = json.load(open('/tmp/$1/summary.json')); print('$1', {k: s.get(k) for k in \
('tune_wall_s', 'configs_per_s', 'tune_phases_s', 'trial_processes', 'trials_deferred')})"
}

topped() {  # topped NAME TIMEOUT GPUS PER_GPU: paired, with the 30 busiest processes (and the host's thread count)
            # every 5 s in $OUT/top_NAME.txt
  (top -b -d 5 -c -w 200 -o %CPU | awk '/^top -/{n=0; "ps -eLf | wc -l" | getline t; close("ps -eLf | wc -l");
    print "threads " t} n++ < 37' > "$OUT/top_$1.txt") &
  paired "$@"
  pkill -f "top -b -d 5" || true
}

case $PART in
  deferred)
    precompile 150
    paired llama-1gpu-16 150 0 16; tune_phases llama-1gpu-16
    paired llama-2gpu-16 120 0,1 16; tune_phases llama-2gpu-16
    paired llama-2gpu-24 120 0,1 24; tune_phases llama-2gpu-24 ;;
  deferred2)
    precompile 150
    paired llama-1gpu-16 150 0 16; tune_phases llama-1gpu-16
    paired llama-2gpu-16 120 0,1 16; tune_phases llama-2gpu-16
    topped llama-2gpu-24 120 0,1 24; tune_phases llama-2gpu-24 ;;
esac
