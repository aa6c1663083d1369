# Shared by the GPU scripts (benchmarks/reproduce_*.sh; source it from the repository root, with RUN set): records
# the machine in $OUT/env.txt and defines
#   sweep NAME TIMEOUT PROBLEMS [flags]  a `raytune-attn tune` into /tmp/NAME (emptied first unless the flags say
#                                        --resume) with its own cold Triton cache (KEEP_CACHE=1: the cache at
#                                        /tmp/triton-NAME as it is), its files tarred to $OUT at its end
#                                        (PROFILE=FILE: the driver under cProfile, written to FILE), MLflow in
#                                        /tmp/NAME.db unless the flags say --no-mlflow;
#   keep NAME                            sweep NAME's summary.json, trials.parquet and best_configs.json copied to
#                                        $OUT as NAME_<file>;
#   warm_cache DIR LOG TIMEOUT PROBLEMS SPACE  every config of SPACE a search of PROBLEMS may propose built into the
#                                        Triton cache DIR (warm_cache.py, 31 processes), its output in $OUT/LOG;
#   llama NAME TIMEOUT [flags]           the Llama-3-8B prefill GP sweep (study space, budget 30, 24 trials per GPU);
#   precompile TIMEOUT NAME...           every config a Llama search may propose built into one Triton cache
#                                        (warm_cache.py, 31 processes), copied to each sweep NAME's cache
#                                        (run those with KEEP_CACHE=1);
#   paired NAME TIMEOUT GPUS PER_GPU     a Llama sweep (31 compile processes, no baselines) on CUDA_VISIBLE_DEVICES=GPUS
#                                        with PER_GPU trials per GPU, on a copy of precompile's cache, the host
#                                        cleared first, `vmstat -t 1` beside it in $OUT/vmstat_NAME.txt;
#   clear_host                           stops what a sweep cut by its time limit leaves behind;
#   cells GRID NAME CONDITION            the cells p of pipelines/problems/GRID.yaml for which the Python expression
#                                        CONDITION holds, written to /tmp/NAME.yaml (a problem set named NAME);
#   table_md SWEEP FILE                  sweep SWEEP's per-cell table (benchmarks/grid_table.py) in $OUT/FILE;
#   tune_phases NAME                     where sweep NAME's time went, from its summary;
#   issue7_grid DTYPE [TIMEOUT]          the 36-cell grid of DTYPE (bf16 or fp16) over the Hopper space (GP, budget 24,
#                                        cold cache, 15 compile processes, SDPA after the sweep; 540 s by default);
#   cuda_tests LOG                       the CUDA tests of warp specialization, whole key blocks, the softmax
#                                        scale, the Hopper knobs, varlen and the workload checks, appended to LOG;
#   old_tree PATTERN                     a copy of the tree in /tmp/old with the kernel of
#                                        .gpu-bundle/ab-base/flash_attn.py (an A/B's old build), printing how many of
#                                        its lines match PATTERN (which tells the builds apart);
#   landscape NAME TIMEOUT KEY...        every config of benchmarks/NAME_space.yaml (SPACE=FILE: that file) timed on
#                                        each problem KEY (benchmarks.exhaustive, cold cache, 15 compile processes,
#                                        20 ms of runs), written to $OUT/NAME_landscape.parquet;
#   grid_cells DTYPE D TIMEOUT [MASK]    the project's sweep of the bf16/fp16 grid's cells with head dim D (GP over
#                                        search_spaces/nvidia/sm90.yaml, budget 24, 24 trials a GPU, 15 compile
#                                        processes, cold cache, SDPA flash and cuDNN in the same sweep), its per-cell
#                                        table in $OUT/grid_DTYPE_dD.md (MASK full or causal: those cells only,
#                                        $OUT/grid_DTYPE_dD_MASK.md);
#   grid_cell DTYPE D S MASK BUDGET TIMEOUT  one cell of that grid (MASK full or causal) with BUDGET trials, table in
#                                        $OUT/cell-DTYPE-dD-sS-MASK.md;
#   llama_sm90 TIMEOUT                   the same for the Llama-3-8B prefill set (budget 30), table in $OUT/llama.md;
#   ncu_cell NAME WINNERS KEY            Nsight Compute's full set on problem KEY's tuned config (from the artifact
#                                        WINNERS), SDPA cuDNN and SDPA flash (benchmarks/profile_cell.py): raw counters
#                                        in $OUT/ncu_NAME.csv, the details page in $OUT/ncu_NAME_details.csv, the
#                                        side-by-side table (benchmarks/ncu_compare.py) in $OUT/ncu_NAME.md.
# The Python environment is the active one (the package installed with its [tune] extra). BUNDLE, or
# .gpu-bundle/devenv-py312.tar.xz where it exists, is a packed site-packages unpacked first for a bare machine.
set -u
BUNDLE=${BUNDLE:-.gpu-bundle/devenv-py312.tar.xz}
if [ -f "$BUNDLE" ]; then
  # Unpacked once per machine: scripts that source this file in parallel (on_each_gpu.sh) share it.
  [ -f /tmp/site/.unpacked ] || { mkdir -p /tmp/site && tar -xJf "$BUNDLE" -C /tmp/site && touch /tmp/site/.unpacked; }
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
fi
export RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/pack
{ nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch, triton, ray; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'cpus', __import__('os').cpu_count())"
  nvidia-smi topo -m; lscpu | grep -E "Model name|Socket|NUMA node"; } > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

sweep() {  # sweep NAME TIMEOUT PROBLEMS [extra flags]
  local name=$1 limit=$2 problems=$3; shift 3
  [ "${KEEP_CACHE:-0}" = 1 ] || rm -rf /tmp/triton-$name
  # A name run before on this machine: its old files would be refused by tune (no --resume) and then packed again
  # as if they were this run's.
  case " $* " in *" --resume "*) ;; *) rm -rf "/tmp/$name" "/tmp/$name.db" "/tmp/pack/$name" ;; esac
  # MLflow in a SQLite file of its own, unless the flags turn it off (tune refuses both).
  local tracking=(--tracking-uri "sqlite:////tmp/$name.db")
  case " $* " in *" --no-mlflow "*) tracking=() ;; esac
  TRITON_CACHE_DIR=/tmp/triton-$name timeout "$limit" python3 ${PROFILE:+-m cProfile -o "$PROFILE"} -m raytune_attn tune --problems "$problems" \
    --name "$name" --out "/tmp/$name" ${tracking[@]+"${tracking[@]}"} "$@" > "/tmp/$name.log" 2>&1
  echo "sweep $name rc=$?"; grep -A40 "^sweep " "/tmp/$name.log" | cut -c1-400
  mkdir -p "/tmp/pack/$name"; cp "/tmp/$name.log" "/tmp/$name/summary.json" "/tmp/$name/trials.parquet" \
    "/tmp/$name/best_configs.json" "/tmp/pack/$name/" 2>/dev/null
  # Cut short by its time limit: the rows written as trials finished (trials/) are all there is.
  [ -f "/tmp/$name/trials.parquet" ] || cp -r "/tmp/$name/trials" "/tmp/pack/$name/" 2>/dev/null
  (cd /tmp/pack && tar -czf "$OUT/${RUN}_$name.tar.gz" "$name")  # each sweep's files as soon as it ends
}
llama() {  # llama NAME TIMEOUT [extra flags]
  local name=$1 limit=$2; shift 2
  sweep "$name" "$limit" llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 \
    --space search_spaces/nvidia/sm90_study.yaml "$@"
}
keep() {  # keep NAME
  for f in summary.json trials.parquet best_configs.json; do cp "/tmp/$1/$f" "$OUT/$1_$f" 2>/dev/null; done
}
warm_cache() {  # warm_cache DIR LOG TIMEOUT PROBLEMS SPACE
  rm -rf "$1"
  TRITON_CACHE_DIR=$1 CUDA_VISIBLE_DEVICES=0 timeout "$3" python3 benchmarks/warm_cache.py "$4" "$5" --workers 31 \
    | tee "$OUT/$2"
}
precompile() {  # precompile TIMEOUT NAME...
  local limit=$1; shift
  warm_cache /tmp/triton-full warm_cache.log "$limit" llama3_8b_prefill search_spaces/nvidia/sm90_study.yaml
  for n in "$@"; do rm -rf "/tmp/triton-$n"; cp -r /tmp/triton-full "/tmp/triton-$n"; done
}
paired() {  # paired NAME TIMEOUT GPUS PER_GPU
  local name=$1 limit=$2 gpus=$3 per=$4
  rm -rf "/tmp/triton-$name"; cp -r /tmp/triton-full "/tmp/triton-$name"
  clear_host
  vmstat -t 1 > "$OUT/vmstat_$name.txt" & local vm=$!
  KEEP_CACHE=1 CUDA_VISIBLE_DEVICES=$gpus llama "$name" "$limit" --compile-workers 31 --trials-per-gpu "$per" \
    --no-baselines
  kill "$vm"
}
clear_host() {  # what a sweep cut by its time limit leaves: Ray's processes and the compile pool's workers
  python3 -m ray.scripts.scripts stop --force > /dev/null 2>&1; pkill -9 -f multiprocessing.spawn; sleep 2
  echo "python processes left: $(pgrep -c python3)"
}
cells() {  # cells GRID NAME CONDITION: the problems p of pipelines/problems/GRID.yaml for which the Python
  # expression CONDITION holds, as a problem set NAME in /tmp/NAME.yaml
  python3 -c "import yaml; d = yaml.safe_load(open('pipelines/problems/$1.yaml')); \
d['problems'] = [p for p in d['problems'] if $3]; d['name'] = '$2'; yaml.safe_dump(d, open('/tmp/$2.yaml', 'w'))"
}
table_md() {  # table_md SWEEP FILE: sweep SWEEP's per-cell table (grid_table.py) in $OUT/FILE, and printed
  python3 benchmarks/grid_table.py "/tmp/$1/summary.json" > "$OUT/$2" 2>&1
  cat "$OUT/$2"
}
tune_phases() {  # tune_phases NAME
  python3 -c "import json; s = json.load(open('/tmp/$1/summary.json')); print('$1', {k: s.get(k) for k in \
('wall_s', 'tune_wall_s', 'configs_per_s', 'gpu_busy_fraction', 'tune_phases_s', 'trial_processes', \
'trials_deferred', 'state_saves_s')})"
}
landscape() {  # landscape NAME TIMEOUT KEY...: every config of benchmarks/NAME_space.yaml on the KEYs (cold cache)
  local name=$1 limit=$2; shift 2
  TRITON_CACHE_DIR=/tmp/triton-$name timeout "$limit" python3 -m benchmarks.exhaustive --resume \
    --space "${SPACE:-benchmarks/${name}_space.yaml}" --out "$OUT/${name}_landscape.parquet" --rep-ms 20 --timeout-s 60 \
    --workers 15 $(printf -- '--problem %s ' "$@") 2>&1 | tee "$OUT/${name}_landscape.log" | grep '^{' | cut -c1-400
  echo "exhaustive rc=${PIPESTATUS[0]}"
}

old_tree() {  # old_tree PATTERN
  rm -rf /tmp/old; mkdir -p /tmp/old; cp -r raytune_attn benchmarks /tmp/old/
  cp .gpu-bundle/ab-base/flash_attn.py /tmp/old/raytune_attn/kernels/flash_attn.py
  echo "old kernel: lines matching '$1': $(grep -c -- "$1" /tmp/old/raytune_attn/kernels/flash_attn.py)"
}
cuda_tests() {  # cuda_tests LOG: warp specialization, whole key blocks, the softmax scale, the Hopper knobs, varlen
  # and the workload checks, in two processes (a kernel fault is sticky for the CUDA context, and would fail every
  # later test of one)
  local dense="workload or (hopper_knobs and dense) or (warp_specialized and dense) or whole_key_blocks or longest_first \
or whole_tensor_descriptors"
  for sel in "$dense or softmax_scale" \
             "(hopper_knobs and varlen) or (warp_specialized and varlen) or test_varlen"; do
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 150 python3 -m pytest -q -m "gpu_slow or not gpu_slow" \
      -p no:cacheprovider tests/test_flash_attn.py tests/test_workload.py -k "$sel" >> "$1" 2>&1
    echo "cuda tests [$sel] rc=$?"; tail -3 "$1"
  done
}
grid_cells() {  # grid_cells DTYPE D TIMEOUT [MASK]
  local dtype=$1 d=$2 name="grid-$1-d$2${4:+-$4}"
  cells "grid_$dtype" "$name" "p['head_dim'] == $d${4:+ and p['causal'] == ('$4' == 'causal')}"
  sweep "$name" "$3" "/tmp/$name.yaml" --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15
  table_md "$name" "${name//-/_}.md"
}
grid_cell() {  # grid_cell DTYPE D S MASK BUDGET TIMEOUT
  local name="cell-$1-d$2-s$3-$4"
  cells "grid_$1" "$name" "(p['head_dim'], p['seqlen'], p['causal']) == ($2, $3, '$4' == 'causal')"
  sweep "$name" "$6" "/tmp/$name.yaml" --searcher gp --budget "$5" --trials-per-gpu 24 --compile-workers 15
  table_md "$name" "$name.md"
}
llama_sm90() {  # llama_sm90 TIMEOUT
  sweep llama-sm90 "$1" llama3_8b_prefill --searcher gp --budget 30 --trials-per-gpu 24 --compile-workers 15
  table_md llama-sm90 llama.md
}
ncu_cell() {  # ncu_cell NAME WINNERS KEY
  ncu --nvtx --nvtx-include "profile/" --set full -f -o "/tmp/ncu_$1" python3 -m benchmarks.profile_cell \
    --winners "$2" --problem "$3" > "$OUT/ncu_$1.log" 2>&1
  echo "ncu $1 rc=$?"; grep -v "^==PROF==" "$OUT/ncu_$1.log" | tail -6
  ncu --import "/tmp/ncu_$1.ncu-rep" --page raw --csv > "$OUT/ncu_$1.csv"
  ncu --import "/tmp/ncu_$1.ncu-rep" --page details --csv > "$OUT/ncu_$1_details.csv"
  python3 benchmarks/ncu_compare.py "$OUT/ncu_$1.csv" --md "$OUT/ncu_$1.md" | head -60
}
issue7_grid() {  # issue7_grid DTYPE [TIMEOUT]
  sweep "grid-$1" "${2:-540}" "grid_$1" --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15
}
