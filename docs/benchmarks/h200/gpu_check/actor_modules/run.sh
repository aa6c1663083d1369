set -x
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/env.txt
python3 -c 'import torch, triton, ray; print(torch.__version__, triton.__version__, ray.__version__)' >> $OUT/env.txt
git log -1 --format=%H >> $OUT/env.txt 2>/dev/null
timeout 120 python3 -m benchmarks.actor_paths_check --out $OUT/actor_paths.json > $OUT/actor_paths.txt 2>&1; echo "actor_paths rc=$?"
tail -15 $OUT/actor_paths.txt
printf 'schema_version: 1\nproblems:\n  - {batch: 2, hq: 16, hkv: 4, seqlen: 2048, head_dim: 128, causal: true, dtype: bfloat16}\n' > /tmp/p.yaml
timeout 240 python3 -m raytune_attn tune --problems /tmp/p.yaml --budget 12 --out $OUT/sweep --name gpu-split --no-mlflow --no-baselines > $OUT/tune.log 2>&1; echo "tune rc=$?"
grep -v "^20..-\|INFO\|WARNING" $OUT/tune.log | tail -6
timeout 60 python3 -m raytune_attn tune --out $OUT/sweep --resume --budget 20 > $OUT/resume_budget.log 2>&1; echo "resume --budget rc=$?"; tail -1 $OUT/resume_budget.log
timeout 180 python3 -m raytune_attn tune --out $OUT/sweep --resume > $OUT/resume.log 2>&1; echo "resume rc=$?"
grep -v "^20..-\|INFO\|WARNING" $OUT/resume.log | grep "sweep gpu-split" 
rm -rf $OUT/sweep/ray
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_flash_attn.py tests/test_workload.py tests/test_ops.py tests/test_runtime.py > $OUT/gpu_tests_fast.log 2>&1; echo "pytest rc=$?"
tail -3 $OUT/gpu_tests_fast.log
