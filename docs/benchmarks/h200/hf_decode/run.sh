mkdir -p /tmp/site && tar -xJf .gpu-bundle/devenv-py312.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD RAY_AUTH_MODE=disabled PYTHONUNBUFFERED=1
python3 -c 'import torch, triton, transformers; print(torch.__version__, triton.__version__, transformers.__version__)' > $OUT/env.txt
nvidia-smi --query-gpu=name,driver_version --format=csv >> $OUT/env.txt
timeout 560 python3 -m benchmarks.hf_decode_configs --out $OUT/hf_decode > $OUT/hf_decode.log 2>&1; echo "rc=$?"
tail -20 $OUT/hf_decode.log
