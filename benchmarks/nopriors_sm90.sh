#!/usr/bin/env bash
# The GP without priors on the shipped Hopper space (search_spaces/nvidia/sm90.yaml, 9248 configs, not the study
# space's 450 the replays cover), against the GP with the space file's priors, on the Llama-3-8B prefill set (15
# varlen keys). Run from the repository root on a host with one H200 or H100 (the package's [tune] extra, or the
# bundle gpu_lib.sh unpacks):
#   bash benchmarks/nopriors_sm90.sh nopriors   # GP without priors, budget 75 (docs/search.md's advice)
#   bash benchmarks/nopriors_sm90.sh priors     # GP with priors, budget 30 (the README's Llama sweep)
#   bash benchmarks/nopriors_sm90.sh race A B   # the two artifacts' winners timed against each other, key by key, in
#                                               # one process (benchmarks/es_winners.py: 3 rounds, 100 ms a timing)
# Sweeps (gpu_lib.sh's sweep: a cold Triton cache, files tarred to $OUT/<RUN>_<name>.tar.gz): no baselines, no
# MLflow (a bundle without the databricks SDK cannot start it), 24 trials in flight, 15 compile processes; SEED (0)
# the searcher seed, LIMIT the seconds a sweep may take.
RUN=${RUN:-nopriors-sm90}
source benchmarks/gpu_lib.sh
SEED=${SEED:-0}
llama_sweep() {  # llama_sweep NAME LIMIT [flags]
  sweep "$1" "$2" llama3_8b_prefill --seed "$SEED" --trials-per-gpu 24 --compile-workers 15 --no-baselines \
    --no-mlflow "${@:3}"
}
case ${1:-} in
  nopriors) llama_sweep "np75-s$SEED" "${LIMIT:-560}" --searcher gp --no-priors --budget 75 ;;
  priors) llama_sweep "p30-s$SEED" "${LIMIT:-400}" --searcher gp --budget 30 ;;
  race) python3 benchmarks/es_winners.py "$2" "$3" --out "$OUT/race.csv" ;;
  *) echo "usage: $0 nopriors|priors|race A B" >&2; exit 2 ;;
esac
