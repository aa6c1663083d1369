"""benchmarks/two_gpu_table: rates, per-GPU counts and busy fractions of a sweep, and the winners of a pair."""

import json

import pandas as pd
import pytest

from benchmarks.two_gpu_table import sweep_row, winning_tflops


def _trials(n: int, gpus: list[str]) -> pd.DataFrame:
    t0 = pd.Timestamp("2026-11-27 20:00:00", tz="UTC")
    rows = [{"trial_id": f"t{i}", "kind": "trial", "accelerator_type": "H100", "problem_key": "p", "status": "ok",
             "tflops": float(i), "latency_ms": 1.0, "BLOCK_M": 64,
             "timestamp": str(t0 + pd.Timedelta(seconds=i)), "extra": json.dumps({"gpu": gpus[i % len(gpus)]})}
            for i in range(n)]
    rows.append({**rows[-1], "trial_id": f"t{n - 1}-final", "tflops": 100.0})  # the final re-measure, not a trial
    rows.append({**rows[0], "trial_id": "t0-final", "tflops": 90.0})
    return pd.DataFrame(rows)


def test_sweep_row_counts_trials_per_gpu_and_the_mid_sweep_rate():
    df = _trials(8, ["aaaaaaaa-1", "bbbbbbbb-2"])
    summary = {"trials": 8, "trials_expected": 8, "tune_wall_s": 10.0, "configs_per_s": 0.8,
               "actors": {"H100": [{"busy_s": 5.0}, {"busy_s": 2.5}]},
               "actor_info": {"H100": [{"gpu_uuid": "aaaaaaaa-1"}, {"gpu_uuid": "bbbbbbbb-2"}]}}
    r = sweep_row(summary, df)
    assert r["per_gpu"] == {"aaaaaaaa": 4, "bbbbbbbb": 4} and r["errors"] == 0
    assert r["busy"] == {"aaaaaaaa": 0.5, "bbbbbbbb": 0.25}
    # Trials 2..6 ended 1 s apart: between the 2nd and the 6th end (25% and 75% of 8), 4 trials in 4 s.
    assert r["mid_per_s"] == pytest.approx(1.0)


def test_winners_are_the_best_final_remeasure_of_each_problem():
    assert winning_tflops(_trials(4, ["g"])) == {"p": 100.0}
    no_finals = _trials(4, ["g"])
    no_finals = no_finals[~no_finals.trial_id.str.endswith("-final")]
    assert winning_tflops(no_finals) == {"p": 3.0}  # a search without re-measures: its best rung, as the sweep names
