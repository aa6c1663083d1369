"""benchmarks/replay_table.py: the replay tables' shared cells."""

import math

import pytest

from benchmarks.replay_table import geomean, runs_cell, summary_cell


def test_a_landscape_s_runs_in_one_cell():
    assert runs_cell((7.5, 51, 9), 10) == "7.5 / 51 (9/10)"
    assert runs_cell((12.0, 20, 10), 10) == "12 / 20 (10/10)"


def test_the_summary_is_the_geometric_mean_of_the_medians_and_the_rows_with_every_seed_within_2_percent():
    rows = [(2.0, 5, 10), (8.0, 51, 9), (4.0, 9, 10)]
    assert geomean([r[0] for r in rows]) == pytest.approx(4.0)  # (2 * 8 * 4) ** (1/3)
    assert summary_cell(rows, 10) == "4.0, 2"
    assert summary_cell(rows[:2], 10, digits=2) == f"{math.sqrt(16):.2f}, 1"
