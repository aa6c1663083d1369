"""benchmarks/search_table: the table lands between its markers, a named section's apart from the default one's."""

from pathlib import Path

import pytest
from conftest import needs_optuna

from benchmarks.search_table import BEGIN, END, main, measure, measure_warm, write

DATA = Path(__file__).parent / "data"


def test_write_replaces_only_its_own_section(tmp_path):
    doc = tmp_path / "search.md"
    doc.write_text("# Search\n\nintro\n")
    write(doc, "default table v1")
    write(doc, "held-out table v1", "heldout")
    write(doc, "default table v2")
    write(doc, "held-out table v2", "heldout")
    text = doc.read_text()
    assert text.startswith("# Search\n\nintro\n")
    assert f"{BEGIN}\ndefault table v2\n{END}" in text
    assert "<!-- search_table heldout: begin -->\nheld-out table v2\n<!-- search_table heldout: end -->" in text
    assert "v1" not in text
    assert text.count("search_table: begin") == 1 and text.count("search_table heldout: begin") == 1


def test_section_without_write_is_refused_before_any_replay(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--section", "heldout", "--seeds", "1", "--budget", "1", "--no-warm"])
    assert e.value.code == 2
    assert "--section names where --write puts the table" in capsys.readouterr().err


@needs_optuna  # the warm table's TPE columns
def test_warm_from_writes_only_the_warm_table_of_each_landscape(tmp_path):
    """`--warm-from FILE`: each landscape started from FILE, the cells those of measure_warm for that pair."""
    target, source = DATA / "landscape_h100_d128_causal_s4096.parquet", DATA / "h200" / "w16_landscape.parquet"
    doc = tmp_path / "search.md"
    doc.write_text("# Search\n")
    main(["--landscape", str(target), "--warm-from", str(source), "--seeds", "2", "--budget", "12", "--noise", "0.02",
          "--write", str(doc), "--section", "warm"])  # fmt: skip
    text = doc.read_text()
    want = measure_warm(target, None, source, seeds=2, budget=12, noise=0.02)
    row = next(line for line in text.splitlines() if line.startswith(f"| {target.stem} "))
    cells = [c.strip() for c in row.strip("|").split("|")][2:]
    assert cells == [f"{m:g} / {w} ({n}/2)" for m, w, n in want.values()]
    geo = next(line for line in text.splitlines() if line.startswith("| geometric mean"))
    got = [c.strip() for c in geo.strip("|").split("|")][2:]
    assert got == [f"{m:.1f}, {int(n == 2)}" for m, _, n in want.values()]  # one row: its own medians
    assert "| landscape | noise |" not in text  # no main table
    assert "with a 2% run-to-run spread" in text and f"--warm-from {source}" in text


def test_warm_from_takes_one_noise_level(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--warm-from", str(DATA / "h200" / "w16_landscape.parquet"), "--noise", "0", "--noise", "0.02"])
    assert e.value.code == 2
    assert "--warm-from measures one warm table" in capsys.readouterr().err


@needs_optuna
def test_warm_from_without_noise_gives_each_landscape_one_row(tmp_path):
    """Without --noise the warm table runs at no spread, one row a landscape (not one per default noise level)."""
    target, source = DATA / "landscape_h100_d128_causal_s4096.parquet", DATA / "h200" / "w16_landscape.parquet"
    doc = tmp_path / "search.md"
    doc.write_text("# Search\n")
    main(["--landscape", str(target), "--warm-from", str(source), "--seeds", "1", "--budget", "3", "--write", str(doc)])
    rows = [line for line in doc.read_text().splitlines() if line.startswith(f"| {target.stem} ")]
    assert len(rows) == 1 and "spread" not in doc.read_text()


@needs_optuna  # the main table's TPE column
def test_screen_replays_each_searcher_on_the_sweeps_candidates(tmp_path, monkeypatch):
    """--screen: every cell's replay screens the candidates, the table's cells are those, and its command says so."""
    import benchmarks.search_table as st

    path = DATA / "landscape_h100_d64_full_s1024.parquet"
    doc = tmp_path / "search.md"
    doc.write_text("# Search\n")
    main(["--landscape", str(path), "--seeds", "1", "--budget", "8", "--noise", "0", "--no-warm", "--screen",
          "--write", str(doc)])  # fmt: skip
    screens, real = [], st.replay
    monkeypatch.setattr(st, "replay", lambda *a, **kw: screens.append(kw["screen"]) or real(*a, **kw))
    got = measure(path, None, seeds=1, budget=8, noise=0.0, screen=True)
    assert screens == [True] * len(st.VARIANTS)
    row = next(line for line in doc.read_text().splitlines() if line.startswith(f"| {path.stem} "))
    assert [c.strip() for c in row.strip("|").split("|")][2:] == [f"{m:g} / {w} ({n}/1)" for m, w, n in got.values()]
    assert "--no-warm --screen" in doc.read_text()
