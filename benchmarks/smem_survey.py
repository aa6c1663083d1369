"""Shared memory (LDS) of a space's configs for a GPU target, read at Triton's allocation pass: no code generation,
so about half a second a config instead of the 5-60 s of a full compile. For calibrating the pre-filter's bound
(`raytune_attn.kernels.resources`) on whole spaces and every head dim; `raytune-attn space compile` is the full
compile (registers, spills, the compiler's errors) and the check that this figure is the binary's (`shared_bytes`
of the compiled kernel is the same pass's attribute).

    python -m benchmarks.smem_survey nvidia/sm80 --target cuda:80 --head-dims 64,128,256 --out sm80.parquet \
        [--sample N --seed S] [--full-mask]

A row a (config, head dim, mask): the knobs, `shared_bytes` (None and `error` where the compiler raised before
allocating), the pre-filter's `smem_estimate` and the validation's `validation_need`, and `seconds`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.pop("TRITON_INTERPRET", None)  # before Triton loads: the interpreter compiles nothing


def _allocation_passes(pm, target, options) -> None:
    """The backend's make_llir passes up to and including shared-memory allocation (Triton 3.9's order)."""
    from triton._C.libtriton import passes

    if target.backend == "cuda":
        from triton._C.libtriton import nvidia
        from triton.backends.nvidia.compiler import get_ptx_version_from_options

        passes.ttgpuir.add_combine_tensor_select_and_if(pm)
        passes.ttgpuir.add_allocate_warp_groups(pm, False)
        passes.convert.add_scf_to_cf(pm)
        passes.gluon.add_inliner(pm)
        nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, target.arch,
                                                            get_ptx_version_from_options(options, target.arch))
    else:
        from triton._C.libtriton import amd

        amd.passes.ttgpuir.add_update_async_wait_count(pm, options.arch)
        amd.passes.ttgpuir.add_warp_pipeline_conversion(pm, options.arch)
        passes.convert.add_scf_to_cf(pm)
        passes.gluon.add_inliner(pm)
        passes.convert.add_index_to_llvmir(pm)
        amd.passes.ttgpuir.add_allocate_shared_memory(pm, options.arch)


def shared_bytes(target, problem, config: dict) -> int:
    """Bytes of shared memory Triton allots `config` (validated) on `problem` for `target` (a targets
    Target): the launch specialized as `target_build` does, lowered to TTGIR, then allocated."""
    from triton._C.libtriton import ir
    from triton.compiler import ASTSource, make_backend

    from raytune_attn.tune.measure.target_build import launch_spec, specialize

    kernel, args, kwargs = launch_spec(problem, config, target.backend)
    signature, constexprs, attrs, opts = specialize(kernel, args, kwargs, target)
    src = ASTSource(kernel, signature, constexprs, attrs)
    backend = make_backend(target.gpu_target())
    options = backend.parse_options(dict(opts, **src.parse_options()))
    ctx = ir.context()
    ir.load_dialects(ctx)
    backend.load_dialects(ctx)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    mod = src.make_ir(target.gpu_target(), options, backend.get_codegen_implementation(options),
                      backend.get_module_map(), ctx)
    metadata = {"target": target.gpu_target(), **options.__dict__}
    mod = stages["ttgir"](stages["ttir"](mod, metadata), metadata)
    pm = ir.pass_manager(mod.context)
    _allocation_passes(pm, target, options)
    pm.run(mod, "smem_survey")
    return int(mod.get_int_attr("ttg.shared"))


def survey(space, target, head_dims, masks, sample=None, seed=0, progress=None) -> list[dict]:
    from raytune_attn import validation
    from raytune_attn.config import InvalidConfig, validate_config
    from raytune_attn.kernels.resources import ARCHS, smem_lower_bound
    from raytune_attn.problem import Problem
    from raytune_attn.tune.measure.cross_compile import select_configs

    rows = []
    configs = select_configs(space, sample, seed)
    for d in head_dims:
        for causal in masks:
            p = Problem(batch=4, hq=2048 // d, hkv=2048 // d, seqlen_q=4096, seqlen_k=4096, head_dim=d, causal=causal)
            for knobs in configs:
                row = {"target": target.name, "head_dim": d, "causal": causal, **knobs, "shared_bytes": None,
                       "error": ""}
                try:
                    cfg = validate_config(knobs, head_dim=d, vendor=target.vendor)
                except InvalidConfig as e:
                    rows.append({**row, "error": f"refused: {e}"})
                    continue
                arch = ARCHS.get(target.prefilter_arch or "")
                row["smem_estimate"] = smem_lower_bound(cfg, arch, head_dim=d) if arch else None
                row["validation_need"] = validation.shared_memory_need(cfg, target.prefilter_arch or "", head_dim=d)
                t0 = time.perf_counter()
                try:
                    row["shared_bytes"] = shared_bytes(target, p, cfg)
                except Exception as e:  # noqa: BLE001 - the compiler's refusal is this config's answer
                    row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1:]}"[:300]
                row["seconds"] = time.perf_counter() - t0
                rows.append(row)
                if progress:
                    progress(len(rows))
    return rows


def main(argv: list[str] | None = None) -> int:
    import warnings

    import pandas as pd

    from raytune_attn.tune.measure.targets import parse_target
    from raytune_attn.tune.search.space import load_space

    warnings.filterwarnings("ignore", message=".*TRITON_DEFAULT_FP_FUSION.*")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("space")
    ap.add_argument("--target", required=True)
    ap.add_argument("--head-dims", default="64,128,256")
    ap.add_argument("--full-mask", action="store_true", help="the full (non-causal) mask too")
    ap.add_argument("--sample", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    target, space = parse_target(a.target), load_space(a.space)
    masks = (True, False) if a.full_mask else (True,)
    head_dims = [int(d) for d in a.head_dims.split(",")]
    rows = survey(space, target, head_dims, masks, a.sample, a.seed,
                  progress=lambda n: n % 50 == 0 and print(f"{n} configs", file=sys.stderr, flush=True))
    pd.DataFrame(rows).to_parquet(a.out, index=False)
    ok = sum(r["shared_bytes"] is not None for r in rows)
    print(f"{a.space} {target.name}: {ok} of {len(rows)} allocated; rows in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
