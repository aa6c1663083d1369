#!/usr/bin/env bash
# Eighteenth run. Each PART is one device call of at most 10 minutes.
#   PART=qreg (nvidia-h200) issue 7: does Q_IN_REGS (q.k's first operand, Q, held in registers: wgmma's register form,
#             so q.k no longer re-reads Q from shared memory at every key block) pay? kernel_ab.py on run 13's
#             winners of 24 bf16 grid cells (S 512, 1024, 4096, 16384) with Q_IN_REGS, with it and no register cap,
#             and with it, no cap and 128-key blocks; the short-sequence configs alike; SDPA flash and cuDNN in the
#             same run; the TTGIR of each head dim's winner and its first variant (is Q a register operand, and is
#             it loaded once or at every key block?). Then the CUDA suite's Hopper-knob tests.
#   PART=landshort (nvidia-h200) issue 7: the landscape of the short causal cells, where run 13's searches missed the
#             64 x 32 tiles with 4 warps that runs 17-18 measured up to 10% faster: every config of
#             docs/benchmarks/short_space.yaml (456: tiles, warps, stages, V preload, TMA, register cap) on the bf16
#             grid's causal S=512 and S=1024 cells at head dims 64 and 128, for replaying the searcher on them.
#   PART=grid (nvidia-h200) issue 7's bf16 grid (36 cells) as run 13 call 3 ran it (GP, budget 24, Hopper space, cold
#             cache, 15 compile processes, sibling winners in the final re-measure, SDPA's backends after the sweep),
#             now with the short causal move in the GP's design (gp.py SHORT_CAUSAL_MOVE).
#   PART=grid16 the same on the fp16 grid.
#   PART=idle (nvidia-h200) why a compile-bound sweep capped good configs at rung 2 (4 rungs at 1-4% of their rung-1
#             speed in call 4): idle_first_run.py times a 0.2 ms kernel's first runs after the GPU idled 0-3 s, as a
#             rung times them, and after a 20 ms spin; nvidia-smi's clocks beside it.
#   PART=load (nvidia-h200) the same with 15 compile processes busy the whole time (a compile-bound sweep's host).
#   PART=timing (nvidia-h200) the CUDA timing tests with the confirming run's long spin (timing.CONFIRM_SPIN_CYCLES),
#             and the new host-stall test once more with the spin as it was (it should fail there).
#   PART=chain (nvidia-h200) does a sweep leave something behind that slows the next one? Call 4's fp16 grid, run
#             right after call 3's bf16 grid on the same machine, was compile-bound (Tune 274 s, 69.9 s of GPU idle
#             waiting on compiles) where call 8's, after no sweep, was not (82 s, 0.0 s). Sweep A (the fp16 grid's
#             D=64 cells, cold cache), the processes left, sweep B (the bf16 D=64 cells), the processes left, then A
#             again on a fresh cold cache: A's two compile rates side by side.
#   PART=landfull (nvidia-h200) issue 7: the same space on the full-mask S=512 and S=1024 cells at D=64 and D=128,
#             whose tuned winners stay at 1.23-1.32x SDPA flash: does the space hold a config at 1.3x?
#   PART=recheck (nvidia-h200) after the review moved the timed run into timing.queue_run (shared with
#             idle_first_run.py): the CUDA timing tests, and a short idle_first_run.py --load 4.
# Calls: 1 PART=qreg at 47da09e, 2 landshort at c4e63e5, 3 grid and 4 grid16 at f57c879, 5 idle at 7bcc47f, 6 load,
# 7 timing and 8 grid16 at 62c43aa, 9 chain at 0a6b874, 10 landfull at 1128203, 11 recheck at 2607942.
# Call 1 ran PART=qreg at 47da09e. Q_IN_REGS was removed after it (it lost: Triton re-loads Q from shared memory into
# registers at every key block; docs/kernel.md, "Tried and dropped"), so the part runs only from that commit.
# Run from the repository root of the commit (the device copies the working tree):
#   BUNDLE=.gpu-bundle/devenv-py312.tar.xz PART=... bash docs/benchmarks/gpu_run18.sh
# (carrying .gpu-bundle/devenv-py312.tar.xz and .gpu-bundle/pytest-site, pytest for the CUDA tests)
RUN=run18 PART=${PART:-qreg}
source docs/benchmarks/gpu_lib.sh

case $PART in
  qreg)
    TRITON_CACHE_DIR=/tmp/triton-ab timeout 400 python3 docs/benchmarks/kernel_ab.py \
      --variants qreg,qreg+nocap,qreg+nocap+n128 --ir-dir "$OUT/ir" --out "$OUT/qreg_bf16.json" --workers 15 2>&1 \
      | tee "$OUT/qreg_bf16.log" | grep -v "TFLOP/s" | tail -70
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 150 python3 -m pytest -q \
      -p no:cacheprovider tests/test_flash_attn.py -k "hopper_knobs or q_in_regs" > "$OUT/cuda_hopper_knobs.log" 2>&1
    echo "cuda tests rc=$?"; tail -5 "$OUT/cuda_hopper_knobs.log" ;;
  grid)
    sweep grid-bf16 560 grid_bf16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  grid16)
    sweep grid-fp16 560 grid_fp16 --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15 ;;
  idle)
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,pstate,power.draw --format=csv -lms 50 > "$OUT/idle_clocks.csv" &
    smi=$!
    timeout 200 python3 docs/benchmarks/idle_first_run.py --out "$OUT/idle_first_run.json"
    kill $smi ;;
  load)  # the same under 15 busy compile processes, on a cold cache
    TRITON_CACHE_DIR=/tmp/triton-load timeout 300 python3 docs/benchmarks/idle_first_run.py --load 15 --repeats 10 \
      --idle 0 0.05 0.2 1 --out "$OUT/load_first_run.json" ;;
  timing)
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 200 python3 -m pytest -q \
      -p no:cacheprovider tests/test_timing.py > "$OUT/cuda_timing.log" 2>&1
    echo "cuda timing tests rc=$?"; tail -3 "$OUT/cuda_timing.log"
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 60 python3 -c "
import importlib.util, raytune_attn.timing as t
spec = importlib.util.spec_from_file_location('tt', 'tests/test_timing.py'); tt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tt); t.CONFIRM_SPIN_CYCLES = t.SPIN_CYCLES
try:
    tt.test_a_host_stall_before_the_launch_does_not_cap_the_rung(); print('old spin: the host-stall test passes')
except AssertionError as e:
    print('old spin: the host-stall test fails, as it should:', e)" 2>&1 | tail -3 ;;
  chain)
    snap() { ps -eo pid,ppid,pcpu,rss,etimes,comm,args --sort=-pcpu | cut -c1-200 | head -40 > "$OUT/ps_$1.txt"
             echo "after $1: $(pgrep -c python3) python3 processes, $(pgrep -cf multiprocessing.spawn) spawned, $(pgrep -cf raylet) raylet"; }
    head_dim_cells grid_fp16 64; head_dim_cells grid_bf16 64
    snap start
    sweep chainA 200 /tmp/grid_fp16_d64.yaml --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15; snap A
    sweep chainB 200 /tmp/grid_bf16_d64.yaml --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15; snap B
    sleep 20; snap B20
    sweep chainA2 200 /tmp/grid_fp16_d64.yaml --searcher gp --budget 24 --trials-per-gpu 24 --compile-workers 15; snap A2
    for n in chainA chainB chainA2; do tune_phases $n; done ;;
  landfull)
    landscape short 540 dense-b32-hq32-hkv32-sq512-sk512-d64-full-bfloat16 \
      dense-b16-hq32-hkv32-sq1024-sk1024-d64-full-bfloat16 dense-b32-hq16-hkv16-sq512-sk512-d128-full-bfloat16 \
      dense-b16-hq16-hkv16-sq1024-sk1024-d128-full-bfloat16 ;;
  recheck)
    PYTHONPATH=$PYTHONPATH:${PYTEST_SITE:-$PWD/.gpu-bundle/pytest-site} timeout 200 python3 -m pytest -q \
      -p no:cacheprovider tests/test_timing.py > "$OUT/cuda_timing.log" 2>&1
    echo "cuda timing tests rc=$?"; tail -3 "$OUT/cuda_timing.log"
    TRITON_CACHE_DIR=/tmp/triton-load timeout 200 python3 docs/benchmarks/idle_first_run.py --load 4 --repeats 3 \
      --idle 0 0.2 --out "$OUT/recheck_first_run.json" 2>&1 | tail -6; echo "idle_first_run rc=${PIPESTATUS[0]}" ;;
  landshort)
    landscape short 540 dense-b32-hq32-hkv32-sq512-sk512-d64-causal-bfloat16 \
      dense-b16-hq32-hkv32-sq1024-sk1024-d64-causal-bfloat16 dense-b32-hq16-hkv16-sq512-sk512-d128-causal-bfloat16 \
      dense-b16-hq16-hkv16-sq1024-sk1024-d128-causal-bfloat16 ;;
esac
