# The README's user path on one GPU at this tree: doctor, the whole test suite, a sweep logged to MLflow, report,
# export, the examples with the sweep's artifact. Run from the repository root with the bundle in .gpu-bundle/.
set -u
mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
for w in .gpu-bundle/wheels/*.whl; do python3 -m zipfile -e "$w" /tmp/site; done
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
  python3 -c "import torch, triton, ray, skopt, mlflow, optuna, numpy, scipy, sklearn; print('torch', torch.__version__, 'triton', triton.__version__, 'ray', ray.__version__, 'skopt', skopt.__version__, 'mlflow', mlflow.__version__, 'optuna', optuna.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'sklearn', sklearn.__version__)"
  nproc; git rev-parse HEAD 2>/dev/null; } > $OUT/env.txt 2>&1; cat $OUT/env.txt
t0=$(date +%s)
timeout 90 python3 -m raytune_attn doctor > $OUT/doctor.txt 2>&1; echo "doctor rc=$?"; tail -12 $OUT/doctor.txt
TRITON_CACHE_DIR=$(mktemp -d) timeout 330 python3 -m pytest -q -p no:cacheprovider -n 16 --dist loadgroup --timeout 150 tests > $OUT/gpu_full_suite.log 2>&1
echo "suite rc=$? wall=$(( $(date +%s) - t0 )) s"; tail -4 $OUT/gpu_full_suite.log; grep -E "^(FAILED|ERROR)" $OUT/gpu_full_suite.log | head -20
mkdir -p /tmp/u && cd /tmp/u
printf 'schema_version: 1\nname: user_path\ndefaults: {hq: 32, hkv: 8, head_dim: 128, causal: true, dtype: bfloat16}\nproblems:\n  - {batch: 4, seqlen: 2048}\n  - {batch: 16, seqlen: 512, varlen: true}\n  - {batch: 2, hq: 16, hkv: 16, seqlen: 4096, head_dim: 64, causal: false, dtype: float16}\n' > my_model.yaml
R=$OLDPWD
t0=$(date +%s)
timeout 200 python3 -m raytune_attn tune --problems my_model.yaml --budget 12 --name my-model --tracking-uri sqlite:////tmp/u/mlflow.db > $OUT/tune.log 2>&1
echo "tune rc=$? wall=$(( $(date +%s) - t0 )) s"; grep -v "^20..-\|INFO\|WARNING\|^(" $OUT/tune.log | tail -25
timeout 60 python3 -m raytune_attn report raytune-results/my-model/trials.parquet --plots-dir $OUT/plots > $OUT/report.txt 2>&1; echo "report rc=$?"; cat $OUT/report.txt | head -40
timeout 60 python3 -m raytune_attn export raytune-results/my-model/trials.parquet -o /tmp/u/exported.json > $OUT/export.txt 2>&1; echo "export rc=$?"; cat $OUT/export.txt
cp raytune-results/my-model/{summary.json,trials.parquet,best_configs.json} $OUT/; cp exported.json $OUT/
python3 - <<'PY' > $OUT/mlflow_runs.txt 2>&1
import mlflow
c = mlflow.tracking.MlflowClient("sqlite:////tmp/u/mlflow.db")
for e in c.search_experiments():
    runs = c.search_runs([e.experiment_id], max_results=1000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    print("experiment", e.name, "runs", len(runs), "parents", len(parents))
    for p in parents:
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == p.info.run_id]
        print(" parent", p.info.run_name, "children", len(kids), "best_tflops", p.data.metrics.get("best_tflops"),
              "artifacts", [a.path for a in c.list_artifacts(p.info.run_id)])
        for k in kids[:3]:
            print("   child", k.info.run_name, sorted(k.data.metrics)[:6])
PY
echo "mlflow rc=$?"; cat $OUT/mlflow_runs.txt | head -30
cd $R
timeout 120 python3 examples/inference.py /tmp/u/raytune-results/my-model/best_configs.json --out $OUT/inference.json > $OUT/inference.txt 2>&1; echo "inference rc=$?"; cat $OUT/inference.txt
timeout 60 python3 examples/quickstart.py /tmp/u/raytune-results/my-model/best_configs.json > $OUT/quickstart.txt 2>&1; echo "quickstart rc=$?"; tail -5 $OUT/quickstart.txt
timeout 60 python3 examples/paged_decode.py > $OUT/paged_decode.txt 2>&1; echo "paged_decode rc=$?"; tail -5 $OUT/paged_decode.txt
