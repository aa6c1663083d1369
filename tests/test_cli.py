"""The `raytune-attn` command line: every command has --help, and a user's mistake (bad flag, value or file) is one
line naming it on stderr with exit code 2, never a traceback.

Most cases call `cli.main(argv)` in-process (the same function the console script runs); a few run the real
console entry point in a subprocess to check what a shell sees (each costs a Python start with torch)."""

import subprocess
import sys

import pytest
import typer

from raytune_attn.tune import cli

COMMANDS = [["tune"], ["replay"], ["export"], ["bench"], ["report"], ["space", "show"], ["doctor"]]


def registered(path):
    cmd = typer.main.get_command(cli.app)
    for name in path:
        cmd = getattr(cmd, "commands", {}).get(name)
        if cmd is None:
            return False
    return True


def need(path):
    if not registered(path):
        pytest.skip(f"`raytune-attn {' '.join(path)}` is not registered yet (another engineer's command)")


def run_main(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *names):
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for n in names:
        assert n in lines[0], (n, lines[0])


def run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "raytune_attn", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p))
def test_help_for_each_command(path, capsys):
    need(path)
    code, out, err = run_main([*path, "--help"], capsys)
    assert code == 0, err
    assert "usage:" in out.lower() and " ".join(path) in out and "--help" in out


def test_top_level_help_lists_all_commands(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0
    for path in COMMANDS:
        if registered(path):
            assert path[0] in out
    code, out, _ = run_main([], capsys)  # no command: help, as `ray` and `mlflow` do
    assert code == 0 and "Usage:" in out


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p))
def test_unknown_flag_is_one_line_exit_2(path, capsys):
    need(path)
    code, _, err = run_main([*path, "--no-such-flag"], capsys)
    one_line_error(code, err, "--no-such-flag", " ".join(path))


@pytest.mark.parametrize("argv,names", [
    (["bench", "--rep-ms", "abc"], ["--rep-ms"]),
    (["bench", "--grid", "huge"], ["--grid", "huge"]),
    (["bench", "--rep-ms", "0"], ["--rep-ms"]),
    (["replay", "--landscape", "x.parquet", "--concurrency", "0"], ["--concurrency"]),
    (["bench", "--config", "{not json"], ["--config"]),
    (["replay", "--landscape", "x.parquet", "--budget", "many"], ["--budget"]),
    (["tune", "--budget", "many"], ["--budget"]),
    (["tune", "--rungs", "10,x"], ["--rungs"]),
    (["tune", "--searcher", "bayes"], ["--searcher", "bayes"]),
    (["tune", "--tracking-uri", "sqlite:/x.db"], ["sqlite:/x.db"]),
    (["tune", "--no-priors", "--searcher", "random"], ["--no-priors", "random"]),
    (["tune", "--share-results", "--searcher", "tpe"], ["--share-results", "tpe"]),
    (["replay", "--landscape", "x.parquet", "--warm-as", "both"], ["--warm-as", "both"]),
    (["doctor", "--timeout", "soon"], ["--timeout"]),
    (["doctor", "--timeout", "0"], ["--timeout"]),
    (["report", "x.parquet", "--format", "html"], ["--format", "html"]),
    (["report"], ["RESULTS"]),
    (["export"], ["RESULTS"]),
    (["nosuchcommand"], ["nosuchcommand"]),
    (["space", "nosuch"], ["nosuch"]),
    # refused before Ray starts: a negative seed, infinite times (a timing's repetitions are computed from them),
    # a name too long for a directory
    (["tune", "--seed", "-1"], ["--seed"]),
    (["tune", "--rungs", "10,30,inf"], ["--rungs"]),
    (["tune", "--final-rep-ms", "inf"], ["--final-rep-ms"]),
    (["tune", "--reduction-factor", "inf"], ["--reduction-factor"]),
    (["tune", "--compile-timeout", "inf"], ["--compile-timeout"]),
    (["tune", "--compile-timeout-x", "nan"], ["--compile-timeout-x"]),
    (["tune", "--name", "a" * 300], ["--name", "at most 128"]),
    (["bench", "--rep-ms", "inf"], ["--rep-ms"]),
    (["bench", "--out", "res.md"], ["--out", "res.md", "Parquet"]),  # its markdown beside it would replace it
    (["doctor", "--timeout", "inf"], ["--timeout"]),
    (["doctor", "--timeout", "nan"], ["--timeout"]),
    (["replay", "--landscape", "x.parquet", "--gp-option", "n_initial=abc"], ["n_initial"]),
    (["replay", "--landscape", "x.parquet", "--gp-option", "n_initial=-5"], ["n_initial"]),
    (["replay", "--landscape", "x.parquet", "--params", "BLOCK_M", "--params", "BLOCK_M"], ["--params", "BLOCK_M"]),
])
def test_bad_values_are_one_line_exit_2(argv, names, capsys, tmp_path, monkeypatch):
    if [argv[0]] in COMMANDS:
        need(argv[:1])
    monkeypatch.chdir(tmp_path)
    if argv[0] == "report" and len(argv) > 1:
        from test_report import make_rows

        from raytune_attn.tune import results

        results.write_file(make_rows(), tmp_path / "x.parquet")
    code, _, err = run_main(argv, capsys)
    one_line_error(code, err, *names)


@pytest.mark.parametrize("argv", [["export", "{f}"], ["report", "{f}"], ["replay", "--landscape", "{f}"],
                                  ["space", "show", "{f}"], ["tune", "--space", "{f}"], ["tune", "--problems", "{f}"],
                                  ["tune", "--warm-start", "{f}"]])
def test_missing_or_unreadable_file_is_one_line_naming_it(argv, capsys, tmp_path):
    need(argv[:2] if argv[0] == "space" else argv[:1])
    missing = str(tmp_path / "missing-file.parquet")
    code, _, err = run_main([a.format(f=missing) for a in argv], capsys)
    one_line_error(code, err, "missing-file")
    garbage = tmp_path / "garbage.parquet"
    garbage.write_text("not parquet\n")
    code, _, err = run_main([a.format(f=garbage) for a in argv], capsys)
    one_line_error(code, err, "garbage")


@pytest.mark.parametrize("argv, flag", [
    (["export", "x.parquet", "-o", "{f}/best_configs.json"], "-o/--output"),
    (["bench", "--out", "{f}/bench.parquet"], "--out"),
    (["replay", "--landscape", "x.parquet", "--json", "{f}/replay.json"], "--json"),
    (["space", "compile", "nvidia/sm90", "--target", "cuda:90", "--out", "{f}/c.parquet"], "--out"),
], ids=["export", "bench", "replay", "space-compile"])
def test_an_output_path_that_cannot_be_written_is_named_before_the_work(argv, flag, capsys, tmp_path, monkeypatch):
    """An output under a file (not a folder) is one line naming the flag, before the results are read or anything
    is timed, replayed or compiled (x.parquet does not exist: the output is checked first)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    code, _, err = run_main([a.format(f=tmp_path / "afile") for a in argv], capsys)
    one_line_error(code, err, flag, "afile is a file, not a directory")


def test_a_corrupt_landscape_is_named_whatever_the_reader_says(capsys, tmp_path, monkeypatch):
    """A pandas that opens the file itself hands pyarrow a file object, and the message then says '<Buffer>' where
    the file's name was: replay names the file either way."""
    need(["replay"])
    import pandas as pd

    read = pd.read_parquet

    def through_a_file_object(path, **kw):
        with open(path, "rb") as fh:
            return read(fh, **kw)

    monkeypatch.setattr(pd, "read_parquet", through_a_file_object)
    garbage = tmp_path / "garbage.parquet"
    garbage.write_text("not parquet\n")
    code, _, err = run_main(["replay", "--landscape", str(garbage)], capsys)
    one_line_error(code, err, str(garbage))


def test_console_script_in_a_real_process(tmp_path):
    """What a shell sees: one stderr line and exit 2 for a bad flag and for a missing file."""
    p = run("bench", "--bogus")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "--bogus" in p.stderr
    assert "Traceback" not in p.stderr
    p = run("report", str(tmp_path / "nope.parquet"))
    assert p.returncode == 2 and "nope.parquet" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_space_compile_refuses_an_unknown_target_before_compiling(capsys):
    assert cli.main(["space", "compile", "nvidia/sm90", "--target", "cuda:77"]) == 2
    assert "unknown target 'cuda:77'" in capsys.readouterr().err
