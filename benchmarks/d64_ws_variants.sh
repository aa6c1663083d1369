# Warp-specialized forms beside the grid's winners, same run, one GPU (docs/benchmarks/h100/d64_ws/). Source it
# from the repository root after benchmarks/gpu_lib.sh, then:
#   ws_variants DTYPE D SEQS FORM...   the D cells of the bf16/fp16 grid at SEQS (comma-separated), each winner of
#                                      docs/benchmarks/h100/sweep_DTYPE_dD/ beside each FORM (a name below), table
#                                      in $OUT/ws_DTYPE_dD.md and rows in $OUT/ws_DTYPE_dD.json
WS='"num_warps":4,"num_stages":2,"USE_TMA":true,"SPLIT_MASK":false,"WARP_SPECIALIZE":true,"maxnreg":0,"LPT_GROUP":0'
declare -A FORMS=(
  [tall]="{\"BLOCK_M\":256,\"BLOCK_N\":128,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
  [tall_rev]="{\"BLOCK_M\":256,\"BLOCK_N\":128,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":true}"
  [tall_grid]="{\"BLOCK_M\":256,\"BLOCK_N\":128,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":false,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
  [tall_1q]="{\"BLOCK_M\":256,\"BLOCK_N\":128,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":true,\"REVERSE_M\":false}"
  [tall_lateV]="{\"BLOCK_M\":256,\"BLOCK_N\":128,$WS,\"PRE_LOAD_V\":false,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
  [tall_n64]="{\"BLOCK_M\":256,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
  [tall_n64_rev]="{\"BLOCK_M\":256,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":true}"
  [tall_n64_1q]="{\"BLOCK_M\":256,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":true,\"REVERSE_M\":false}"
  [tall_n64_grid]="{\"BLOCK_M\":256,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":false,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
  [tall_n64_grid_rev]="{\"BLOCK_M\":256,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":false,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":true}"
  [n64]="{\"BLOCK_M\":128,\"BLOCK_N\":64,$WS,\"PRE_LOAD_V\":true,\"PERSISTENT\":true,\"ONE_Q_BUFFER\":false,\"REVERSE_M\":false}"
)
ws_variants() {  # ws_variants DTYPE D SEQS FORM...
  local dtype=$1 d=$2 seqs=$3; shift 3
  local args=() f
  for f in "$@"; do args+=(--variant "${FORMS[$f]}"); done
  timeout "${WS_LIMIT:-200}" python3 -m benchmarks.h100_kernel_table \
    --winners "docs/benchmarks/h100/sweep_${dtype}_d${d}/best_configs.json" --dim "$d" \
    --dtype "$([ "$dtype" = bf16 ] && echo bfloat16 || echo float16)" --seqs "$seqs" "${args[@]}" \
    --out "$OUT/ws_${dtype}_d${d}.json" --md "$OUT/ws_${dtype}_d${d}.md" > "$OUT/ws_${dtype}_d${d}.log" 2>&1
  echo "ws_variants $dtype $d rc=$?"; sed -n '/^Variants/,$p' "$OUT/ws_${dtype}_d${d}.md" | cut -c1-400
}
