"""target_build: the launch it derives for a target is the launcher's own, and a paged problem's compile twin binds
like the real problem."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from raytune_attn.config import validate_config
from raytune_attn.kernels import flash_attn as fa
from raytune_attn.problem import Problem
from raytune_attn.tune.measure import target_build as tb

SMALL = Problem(batch=2, hq=4, hkv=2, seqlen_q=128, seqlen_k=128, head_dim=64, causal=True)


@pytest.mark.parametrize("problem", [SMALL, Problem(batch=3, hq=4, hkv=4, seqlen_q=96, seqlen_k=96, head_dim=48,
                                                    causal=False, dtype="float16", varlen=True)])
@pytest.mark.parametrize("knobs", [{"BLOCK_M": 32, "BLOCK_N": 64}, {"BLOCK_M": 128, "BLOCK_N": 128},
                                   {"BLOCK_M": 64, "BLOCK_N": 32, "PERSISTENT": True, "REVERSE_M": True,
                                    "maxnreg": 128}])
def test_launch_spec_matches_the_launcher(problem, knobs, monkeypatch):
    """The arguments `launch_spec` builds without tensors are those `flash_attn_fwd` launches with."""
    config = validate_config(knobs, head_dim=problem.head_dim, vendor="nvidia")
    seen = {}

    class Recorder:  # stands where the kernel is, to see what the launcher passes it
        def __getitem__(self, grid):
            return lambda *args, **kwargs: seen.update(args=args, kwargs=kwargs)

    kernel_name = "_attn_fwd_persistent" if config["PERSISTENT"] else "_attn_fwd"
    monkeypatch.setattr(fa, kernel_name, Recorder())
    monkeypatch.setattr(fa, "_resident_programs", lambda *a: 1)
    dt = getattr(torch, problem.dtype)
    if problem.varlen:
        lens = problem.seqlens()
        cu = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], dtype=torch.int32)
        q = torch.zeros(int(cu[-1]), problem.hq, problem.head_dim, dtype=dt)
        k = torch.zeros(int(cu[-1]), problem.hkv, problem.head_dim, dtype=dt)
        fa.flash_attn_fwd(q, k, k.clone(), config, causal=problem.causal, cu_seqlens_q=cu, cu_seqlens_k=cu,
                          max_seqlen_q=problem.seqlen_q, max_seqlen_k=problem.seqlen_k)
    else:
        q = torch.zeros(problem.batch, problem.hq, problem.seqlen_q, problem.head_dim, dtype=dt)
        k = torch.zeros(problem.batch, problem.hkv, problem.seqlen_k, problem.head_dim, dtype=dt)
        fa.flash_attn_fwd(q, k, k.clone(), config, causal=problem.causal)
    _, args, kwargs = tb.launch_spec(problem, config, "cuda")

    def plain(a):  # tensors and stand-ins alike: what the binder reads (dtype), None as None, numbers as they are
        return a.dtype if hasattr(a, "data_ptr") else a

    assert [plain(a) for a in args] == [plain(a) for a in seen["args"]]
    assert kwargs == seen["kwargs"]


def test_launch_specs_of_a_band_launch_hold_the_band_kernel_after_the_main_one():
    """A causal problem with BAND_LAUNCH builds two kernels: the main one (unmasked below the band, its lse always
    stored) and the band's, which takes the main one's leading arguments; a full-mask problem builds one."""
    from raytune_attn.kernels import causal_band as cb

    ws = {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_warps": 4, "num_stages": 2}
    config = validate_config({**ws, "BLOCK_M": 128, "BLOCK_N": 128, "PERSISTENT": True, "BAND_LAUNCH": True},
                             head_dim=64, vendor="nvidia")
    causal = Problem(batch=2, hq=4, hkv=2, seqlen_q=512, seqlen_k=512, head_dim=64, causal=True, dtype="bfloat16")
    (main, m_args, m_kw), (band, b_args, b_kw) = tb.launch_specs(causal, config, "cuda")
    assert main is fa._attn_fwd_persistent and band is cb._attn_band
    assert m_kw["BELOW_BAND"] and m_kw["RETURN_LSE"] and m_args[4] is not None  # the lse the band reads
    assert [getattr(a, "dtype", a) for a in b_args] == [getattr(a, "dtype", a) for a in m_args[:len(b_args)]]
    assert (b_kw["BLOCK_M"], b_kw["BLOCK_N"], b_kw["MAIN_M"], b_kw["MAIN_N"]) == (64, 64, 128, 128)
    assert not b_kw["RETURN_LSE"]  # the caller did not ask for it: the main one's is scratch
    full = dataclasses.replace(causal, causal=False)
    [(kernel, _, kwargs)] = tb.launch_specs(full, config, "cuda")
    assert kernel is fa._attn_fwd_persistent and "BELOW_BAND" not in kwargs


_TWIN_CHECK = """
import sys
from unittest import mock
from raytune_attn.paged_problem import PagedProblem
from raytune_attn.tune.measure import paged_workload, target_build as tb
from raytune_attn.tune.measure.targets import parse_target
problem, target = PagedProblem.from_key(sys.argv[1]), parse_target("cuda:90")
config = {"BLOCK_M": 64, "BLOCK_N": 64, "NUM_SEGMENTS": 2, "num_warps": 4, "num_stages": 2}
twin = tb.paged_launch_specs(problem, config)
with mock.patch.object(paged_workload, "compile_twin", lambda p: p):  # the real problem's own (meta) tensors
    real = tb.paged_launch_specs(problem, config)
assert len(twin) == len(real) == 2, (len(twin), len(real))
for (kernel, args, kwargs), (kernel_r, args_r, kwargs_r) in zip(twin, real, strict=True):
    assert kernel is kernel_r
    a, b = tb.specialize(kernel, args, kwargs, target), tb.specialize(kernel_r, args_r, kwargs_r, target)
    assert a == b, (kernel, a, b)
print("same")
"""


@pytest.mark.parametrize("key", ["paged-n32q1k2049~4096-bs16-hq32-hkv8-d128-bfloat16-seed0",
                                 "paged-n2q512~2048k2048~8192+n32q1k1025~8192-bs16-hq32-hkv8-d128-bfloat16-seed0",
                                 "paged-n1q1k16385~32768-bs256-hq32-hkv8-d128-bfloat16-seed0"])
def test_the_paged_compile_twin_binds_like_the_real_problem(key):
    """A compile process builds a paged problem's small twin (paged_workload.compile_twin); its launches must bind
    to the same signature, constexprs, specialization attributes and options as the real problem's, or the binary
    it warms is not the one the trial looks up (a block table of 256 pages is 16-divisible, one of 2 is not).
    Checked by Triton's own binder for an H100, in a process without the interpreter (as compile workers run)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _TWIN_CHECK, key], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]
