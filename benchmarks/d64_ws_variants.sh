# Warp-specialized forms beside the grid's winners, same run, one GPU (docs/benchmarks/h100/d64_ws/). Source it
# from the repository root after benchmarks/gpu_lib.sh, then:
#   ws_variants DTYPE D SEQS FORM...   the D cells of the bf16/fp16 grid at SEQS (comma-separated), each winner of
#                                      docs/benchmarks/h100/sweep_DTYPE_dD/ beside each FORM (a name below), table
#                                      in $OUT/ws_DTYPE_dD.md and rows in $OUT/ws_DTYPE_dD.json
form() {  # form BLOCK_M BLOCK_N PRE_LOAD_V PERSISTENT ONE_Q_BUFFER REVERSE_M [BAND_LAUNCH]: a warp-specialized config
  printf '{"BLOCK_M":%s,"BLOCK_N":%s,"num_warps":4,"num_stages":2,"USE_TMA":true,"SPLIT_MASK":false,' "$1" "$2"
  printf '"WARP_SPECIALIZE":true,"maxnreg":0,"LPT_GROUP":0,"PRE_LOAD_V":%s,"PERSISTENT":%s,' "$3" "$4"
  printf '"ONE_Q_BUFFER":%s,"REVERSE_M":%s%s}' "$5" "$6" "${7:+,\"BAND_LAUNCH\":$7}"
}
declare -A FORMS=(  # name: rows, keys, V preloaded, persistent grid, one Q buffer, heavy-first
  [tall]="$(form 256 128 true true false false)"
  [tall_rev]="$(form 256 128 true true false true)"
  [tall_grid]="$(form 256 128 true false false false)"
  [tall_1q]="$(form 256 128 true true true false)"
  [tall_lateV]="$(form 256 128 false true false false)"
  [tall_n64]="$(form 256 64 true true false false)"
  [tall_n64_rev]="$(form 256 64 true true false true)"
  [tall_n64_1q]="$(form 256 64 true true true false)"
  [tall_n64_grid]="$(form 256 64 true false false false)"
  [tall_n64_grid_rev]="$(form 256 64 true false false true)"
  [n64]="$(form 128 64 true true false false)"
  # The causal band by a second launch (BAND_LAUNCH): the tall and the 128 x 128 forms heavy-first, and the knob
  # alone over a warp-specialized winner (D=128, D=256).
  [tall_band]="$(form 256 128 true true false true true)"
  [wide_band]="$(form 128 128 true true false true true)"
  [band]='{"BAND_LAUNCH":true}'
)
ws_variants() {  # ws_variants DTYPE D SEQS FORM...
  local dtype=$1 d=$2 seqs=$3; shift 3
  local args=() f
  for f in "$@"; do
    [ -n "${FORMS[$f]:-}" ] || { echo "ws_variants: no form named '$f' (forms: ${!FORMS[*]})" >&2; return 2; }
    args+=(--variant "${FORMS[$f]}")
  done
  timeout "${WS_LIMIT:-200}" python3 -m benchmarks.h100_kernel_table \
    --winners "docs/benchmarks/h100/sweep_${dtype}_d${d}/best_configs.json" --dim "$d" \
    --dtype "$([ "$dtype" = bf16 ] && echo bfloat16 || echo float16)" --seqs "$seqs" "${args[@]}" \
    --out "$OUT/ws_${dtype}_d${d}.json" --md "$OUT/ws_${dtype}_d${d}.md" > "$OUT/ws_${dtype}_d${d}.log" 2>&1
  echo "ws_variants $dtype $d rc=$?"; sed -n '/^Variants/,$p' "$OUT/ws_${dtype}_d${d}.md" | cut -c1-400
}
