"""Prepares the FlashInfer wheels that `benchmarks/paged_bench.sh` installs on a GPU machine without network.

    python3 benchmarks/paged_fi_wheels.py [--dest .fi-whl] [--version 0.7.2.post1]

Downloads flashinfer-python (pure Python plus the CUDA sources its JIT compiles) and apache-tvm-ffi (its one
compiled dependency that the GPU machine lacks) for CPython 3.12 on manylinux x86_64, then rewrites the
flashinfer wheel without the subdirectories of data/csrc/: the sources of MoE, GEMM, MLA, KDA and other kernels,
about 30 MB of its 62 MB. The batch decode and prefill modules the benchmark builds include only top-level csrc
files (tvm_ffi_utils.h) besides include/, cutlass/, cccl/ and spdlog/, which are kept whole. Its other
dependencies are either on the GPU machine already (torch, numpy, ninja, einops, click, tqdm, tabulate, packaging,
requests, nvidia-ml-py, cuda-bindings) or imported only by features the benchmark does not use
(nvidia-cudnn-frontend: the cuDNN backends; nccl4py, nccl-extensions: communication; cuda-tile,
nvidia-cutlass-dsl: CuTe-DSL kernels): they are left out.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64")
CSRC = "flashinfer/data/csrc/"


def download(dest: Path, spec: str) -> None:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
           "--implementation", "cp", "-d", str(dest), spec]
    for p in PLATFORMS:
        cmd[-1:-1] = ["--platform", p]
    subprocess.run(cmd, check=True)


def trim(src: Path, dst: Path) -> int:
    """`src` rewritten to `dst` without files under data/csrc/ subdirectories, RECORD rewritten to match."""
    records = []
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        record_name = None
        for info in zin.infolist():
            name = info.filename
            if name.startswith(CSRC) and "/" in name[len(CSRC):]:
                continue
            if name.endswith(".dist-info/RECORD"):
                record_name = name
                continue
            data = zin.read(info)
            zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{name},sha256={digest},{len(data)}")
        if record_name is None:
            raise ValueError(f"{src} has no .dist-info/RECORD: not a wheel")
        zout.writestr(record_name, "\n".join([*records, f"{record_name},,"]) + "\n")
    return len(records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=Path(".fi-whl"))
    ap.add_argument("--version", default="0.7.2.post1", help="flashinfer-python version")
    a = ap.parse_args(argv)
    a.dest.mkdir(parents=True, exist_ok=True)
    raw = a.dest / "raw"
    raw.mkdir(exist_ok=True)
    download(raw, f"flashinfer-python=={a.version}")
    download(a.dest, "apache-tvm-ffi<0.2,>=0.1.11")  # flashinfer's pin
    for whl in raw.glob("flashinfer_python-*.whl"):
        kept = trim(whl, a.dest / whl.name)
        whl.unlink()
        print(f"{whl.name}: {kept} files kept, {(a.dest / whl.name).stat().st_size / 2**20:.1f} MiB")
    raw.rmdir()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
