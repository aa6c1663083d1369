#!/usr/bin/env bash
# Every H200 sweep of the Llama-3-8B prefill set over the study space committed under docs/benchmarks/h200/, scored
# against the table recorded again with the sweeps' timing (llama_exhaustive_spin.parquet beside this file). A run is
# named GROUP/SWEEP; the groups are the searcher, its priors and its budget. Run from the repository root:
#   bash docs/benchmarks/h200/llama_landscape_spin/score.sh
set -eu
H=docs/benchmarks/h200
s=()
add() { local group=$1; shift; for d in "$@"; do s+=(--sweep "$group/$(basename "$d")=$H/$d/trials.parquet"); done; }
add gp-nopriors-b50 llama_search/nopriors-b50-s{0,1,2,3} sweep_tail/ab-gp-s0 sweep_tail/ab-gp-nospec-s{0,1} \
  sweep_tail/bs-old-s{0,1} compile_limit/ct-new-s{0,1,2,3,4,5} compile_limit/ct-old-s{0,1} \
  compile_limit/rs-new-s{4,5} compile_limit/rs-old-s4
add tpe-b50 llama_search/tpe-b50-s{0,1,2,3} sweep_tail/ab-tpe-s0 compile_limit/ct-tpe-s{0,1,2} \
  compile_limit/ct-tpe-old-s0 compile_limit/rs-tpe-s1
add gp-priors-b30 llama_search/priors compile_limit/cp-new-s{0,1} compile_limit/cp-old-s{0,1}
add gp-nopriors-b30 llama_search/nopriors llama_search/nopriors-s{1,2}
add gp-nopriors-share-b30 llama_search/nopriors-share llama_search/nopriors-share-s{1,2}
add gp-nopriors-cold-b10 llama_search/nopriors-cold10 llama_search/nopriors-cold10-s1
add gp-nopriors-share-b10 llama_search/nopriors-share10 llama_search/nopriors-share10-s1 \
  share_compile_ahead/{pre,old,old2,new,new2,now}
add gp-nopriors-warm-b10 llama_search/nopriors-warm10
python3 -m benchmarks.score_vs_exhaustive --landscape $H/llama_landscape_spin/llama_exhaustive_spin.parquet "${s[@]}" \
  --ratio gp-nopriors-b50:tpe-b50 --out $H/llama_landscape_spin/scores.csv
