"""benchmarks/ei_zero: the probe counts the GP's global steps without changing its runs, and puts skopt's
gaussian_ei back."""

from pathlib import Path

import numpy as np

from benchmarks.ei_zero import main, probed
from benchmarks.miss_rate import SETS
from benchmarks.search_table import landscapes
from raytune_attn.tune.search import gp as gp_module
from raytune_attn.tune.search.landscape import load_landscape
from raytune_attn.tune.search.replay import run_seeds

TABLE = Path("tests/data/heldout/h200_fp16_d128_full_short.parquet")


def test_probe_only_reads_and_is_removed_after():
    ei = gp_module.gaussian_ei
    counts, runs = probed(TABLE, None, seeds=2, seed_start=1, budget=40)
    assert gp_module.gaussian_ei is ei
    plain = run_seeds(load_landscape(TABLE), "gp", budget=40, seeds=2, seed_start=1, options={"priors": False})
    assert [r.configs for r in runs] == [r.configs for r in plain]
    np.testing.assert_array_equal([r.trace for r in runs], [r.trace for r in plain])  # NaN until a first success
    assert 0 < counts["steps"] < 2 * 40 and 0 <= counts["all_zero"] <= counts["steps"]
    assert counts["candidates"] >= counts["steps"]


def test_command_table_sums_its_rows(tmp_path, capsys):
    out = tmp_path / "ei.md"
    assert main(["--seeds", "1", "--budget", "12", "--out", str(out)]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    body, total = rows[1:-1], rows[-1]
    n = sum(len(landscapes(files, per)) for files, per in SETS.values())
    assert len(body) == n and total[0] == f"| all {n}"
    assert int(total[1]) == sum(int(r[1]) for r in body)
    assert out.read_text().endswith(capsys.readouterr().out.rstrip("\n") + "\n")
