#!/usr/bin/env bash
# Sixteenth run. Each PART is one device call of at most 10 minutes.
#   PART=profile (nvidia-h200-x2) issue 4's two-GPU speed-up: where the driver's Tune loop spends its time. The Llama
#                sweep on copies of one precompiled Triton cache, 31 compile processes, no baselines, the host cleared
#                between sweeps, vmstat beside each: one GPU then two with 16 trials per GPU (the summary now lists
#                how long each of Tune's state saves held its loop, state_saves_s), then the two-GPU sweep again
#                with the driver under cProfile (Tune's loop is the driver's main thread).
#   PART=actor   (nvidia-h200-x2) the same pair twice after call 1: MLflow logging moved from a thread of the driver
#                to its own process (sweep/tracking_host.py: the profile showed it busy all sweep long, 0.13 s a
#                trial, beside Tune's loop), and a rung-1 check far over the cap stops the rung (actors.py: a 2-second
#                config cost two runs, 4 s of its GPU).
#   PART=keep    (nvidia-h200-x2) the same two pairs after call 2's first two-GPU sweep collapsed (49.0 s, one GPU
#                48.8 s) with Ray warning of 160 worker processes started for 32 trials in flight: the scheduler
#                lets Tune keep a finished trial's process for each trial in flight (searcher.keep_trial_processes).
# Call 1 (at 075bccd) ran PART=profile, call 2 (at 53f7840) PART=actor, call 3 PART=keep.
# Run from a snapshot of the commit (git archive HEAD):
#   cd .out/head && BUNDLE=../../.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run16.sh
RUN=run16 PART=${PART:-profile}
source docs/benchmarks/gpu_lib.sh

loop_profile() {  # loop_profile FILE: the driver's profile, by cumulative and own time
  python3 -c "import pstats; p = pstats.Stats('$1'); p.sort_stats('cumulative').print_stats(60); \
p.sort_stats('tottime').print_stats(30)" | cut -c1-220 > "$1.txt"; head -80 "$1.txt"
}

case $PART in
  profile)
    precompile 150
    paired llama-1gpu-16 150 0 16; tune_phases llama-1gpu-16
    paired llama-2gpu-16 120 0,1 16; tune_phases llama-2gpu-16
    PROFILE=$OUT/prof_llama-2gpu-16p.out paired llama-2gpu-16p 120 0,1 16; tune_phases llama-2gpu-16p
    loop_profile "$OUT/prof_llama-2gpu-16p.out" ;;
  actor|keep)
    precompile 150
    for r in a b; do
      paired llama-1gpu-16$r 150 0 16; tune_phases llama-1gpu-16$r
      paired llama-2gpu-16$r 120 0,1 16; tune_phases llama-2gpu-16$r
    done ;;
esac
