#!/usr/bin/env bash
# The H200 Llama table recorded again, replayed as the live sweeps ran: the sweep's candidates (--screen) and two
# trials in flight per search (--concurrency 2: a sweep's least share), GP without priors and TPE, seeds 0-9, budget 50.
# One JSON per key (replay's summary); run from the repository root (about 5 minutes on 2 cores):
#   bash docs/benchmarks/search/llama_spin_screen_c2/run.sh
set -eu
T=docs/benchmarks/h200/llama_landscape_spin/llama_exhaustive_spin.parquet
D=docs/benchmarks/search/llama_spin_screen_c2
python3 -c "import pandas as pd; print('\n'.join(sorted(pd.read_parquet('$T', columns=['problem_key']).problem_key.unique())))" |
  xargs -P 2 -I{} raytune-attn replay --landscape $T --select problem_key={} --searcher gp --searcher tpe --no-priors \
    --screen --concurrency 2 --budget 50 --seeds 10 --json $D/{}.json > /dev/null
