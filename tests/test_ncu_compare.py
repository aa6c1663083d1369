"""benchmarks/ncu_compare.py (an Nsight Compute raw export read into one table) and profile_cell.py's input checks."""

import json

import pytest

from benchmarks.ncu_compare import counters, read_raw, table
from benchmarks.profile_cell import winner
from raytune_attn.problem import Problem

_HEADER = ["ID", "Process ID", "Kernel Name", "gpu__time_duration.sum", "launch__registers_per_thread",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active", "sm__pipe_alu_cycles_active.sum",
           "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "l1tex__t_bytes.sum"]
_UNITS = ["", "", "", "ms", "register/thread", "%", "cycle", "", "byte"]


def _raw(tmp_path, kernels, banner=True):
    lines = ['==PROF== Connected to process 1'] if banner else []
    for row in [_HEADER, _UNITS, *kernels]:
        lines.append(",".join(f'"{v}"' for v in row))
    path = tmp_path / "raw.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _kernel(i, name, ms):
    return [str(i), "7", name, ms, "168", "71.5", "1000", "0.4", "12"]


def test_three_launches_are_labelled_in_profile_cell_order_and_values_stay_with_their_kernel(tmp_path):
    path = _raw(tmp_path, [_kernel(0, "_attn_fwd_persistent", "1.80"), _kernel(1, "cudnn_fprop", "1.55"),
                           _kernel(2, "flash_fwd_kernel", "2.90")])
    labels, values, units = read_raw(path)
    assert labels == ["tuned", "sdpa-cudnn", "sdpa-flash"]
    assert values["gpu__time_duration.sum"] == {"tuned": "1.80", "sdpa-cudnn": "1.55", "sdpa-flash": "2.90"}
    assert units["gpu__time_duration.sum"] == "ms"


def test_two_launches_each_get_numbered_labels(tmp_path):
    rows = [_kernel(i, n, str(i)) for i, n in enumerate(["a", "a", "b", "b", "c", "c"])]
    labels, values, _ = read_raw(_raw(tmp_path, rows))
    assert labels == ["tuned #1", "tuned #2", "sdpa-cudnn #1", "sdpa-cudnn #2", "sdpa-flash #1", "sdpa-flash #2"]
    assert values["gpu__time_duration.sum"]["sdpa-cudnn #2"] == "3"


def test_an_uneven_count_falls_back_to_kernel_names(tmp_path):
    labels, _, _ = read_raw(_raw(tmp_path, [_kernel(0, "_attn_fwd", "1"), _kernel(1, "cudnn_fprop", "2")]))
    assert labels == ["0: _attn_fwd", "1: cudnn_fprop"]


def test_counters_keep_the_listed_and_matching_ones_in_order(tmp_path):
    _, values, _ = read_raw(_raw(tmp_path, [_kernel(0, "k", "1")] * 3))
    assert counters(values) == ["gpu__time_duration.sum", "launch__registers_per_thread",
                                "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                                "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"]


def test_table_has_a_row_per_counter_with_each_kernels_value(tmp_path):
    md = table(*read_raw(_raw(tmp_path, [_kernel(0, "a", "1.80"), _kernel(1, "b", "1.55"), _kernel(2, "c", "2.9")])))
    assert "| gpu__time_duration.sum | ms | 1.80 | 1.55 | 2.9 |" in md
    assert md.splitlines()[0] == "| counter | unit | tuned | sdpa-cudnn | sdpa-flash |"
    assert "l1tex__t_bytes" not in md and "pipe_alu_cycles_active.sum" not in md


def test_a_file_that_is_not_a_raw_export_is_refused_by_name(tmp_path):
    bad = tmp_path / "details.csv"
    bad.write_text('"ID","Section Name","Metric Name"\n"0","SpeedOfLight","Duration"\n')
    with pytest.raises(SystemExit, match="details.csv: not an `ncu --page raw --csv` export"):
        read_raw(bad)


def test_profile_cell_names_a_missing_key_or_a_bad_artifact(tmp_path):
    have = Problem(batch=1, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=64, causal=True, dtype="bfloat16")
    lack = Problem(batch=2, hq=2, hkv=2, seqlen_q=64, seqlen_k=64, head_dim=64, causal=True, dtype="bfloat16")
    art = tmp_path / "best.json"
    art.write_text(json.dumps({"entries": [{"problem_key": have.key, "config": {"BLOCK_M": 64}}]}))
    assert winner(art, have) == {"BLOCK_M": 64}
    with pytest.raises(SystemExit, match=f"no entry for {lack.key}"):
        winner(art, lack)
    (tmp_path / "x.json").write_text("[1]")
    with pytest.raises(SystemExit, match="x.json: not a best-configs artifact"):
        winner(tmp_path / "x.json", have)


def test_a_cut_export_is_refused(tmp_path):
    path = _raw(tmp_path, [_kernel(0, "a", "1"), _kernel(1, "b", "2")[:4]])
    with pytest.raises(SystemExit, match="rows of unequal length"):
        read_raw(path)
