set -x
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/env.txt
python3 -c 'import torch, triton, ray; print(torch.__version__, triton.__version__, ray.__version__)' >> $OUT/env.txt
printf 'schema_version: 1\nproblems:\n  - {batch: 2, hq: 16, hkv: 4, seqlen: 2048, head_dim: 128, causal: true, dtype: bfloat16}\n  - {batch: 4, hq: 32, hkv: 8, seqlen: 1024, head_dim: 64, causal: false, dtype: float16}\n' > /tmp/p.yaml
timeout 300 python3 -m raytune_attn tune --problems /tmp/p.yaml --budget 10 --out $OUT/sweep --name gpu-model --no-mlflow --no-baselines > $OUT/tune.log 2>&1; echo "tune rc=$?"
grep -v "^20..-\|INFO\|WARNING" $OUT/tune.log | tail -5
rm -rf $OUT/sweep/ray
timeout 120 python3 - > $OUT/load.txt 2>&1 <<'PY'
import json, warnings
import raytune_attn
from raytune_attn import runtime
from raytune_attn.device import detect
from raytune_attn.problem import Problem
warnings.simplefilter("error")  # an entry that does not apply here would warn: make it fail
import os, pathlib
path = os.environ["OUT"] + "/sweep/best_configs.json"
t = raytune_attn.load_configs(path)
d = detect()
print("device", d.name, d.arch, "model", d.accelerator_type)
print("usable", t.n_usable, "ignored", t.ignored)
for e in json.loads(pathlib.Path(path).read_text())["entries"]:
    p = Problem.from_key(e["problem_key"])
    cfg, how = runtime.lookup(**p.to_dict())
    print(e["accelerator_type"], e["gpu"], e["arch"], how, cfg == e["config"] or {k: cfg.get(k) for k in e["config"]} == e["config"])
PY
echo "load rc=$?"; cat $OUT/load.txt
timeout 90 python3 -m raytune_attn doctor > $OUT/doctor.txt 2>&1; grep -n "gpu 0" $OUT/doctor.txt
timeout 400 python3 -m pytest -q -p no:cacheprovider tests/test_runtime.py tests/test_api.py tests/test_transformers_integration.py tests/test_paged_runtime.py tests/test_entry.py > $OUT/gpu_tests.log 2>&1; echo "pytest rc=$?"
tail -3 $OUT/gpu_tests.log
