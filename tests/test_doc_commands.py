"""Every command line the guides and the reproduce scripts show runs a command that exists with flags it takes.

A user copies these lines; a renamed command or flag leaves them failing with "No such command" far from the change
that broke them. The `raytune-attn` lines are checked against the command line itself (its click commands); the
`python -m benchmarks.X` and `python benchmarks/X.py` lines against each script's `--help`, all read in one child
process (the scripts' imports and environment stay out of the test run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from raytune_attn.tune.cli import app

ROOT = Path(__file__).resolve().parents[1]
# Markdown: only code (fenced blocks, indented blocks, inline spans); prose may say "raytune-attn on a cluster".
_GUIDES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_SCRIPTS = [*sorted((ROOT / "benchmarks").glob("*.sh")), *sorted((ROOT / "deploy").rglob("*.yaml")),
            ROOT / ".ci" / "run", ROOT / "Makefile"]
_CLI = re.compile(r"raytune-attn [^`\n|;&]*")
# Where a word starts a command: the line's start, a quote or bracket before it, or one of these words (a shell
# comment's example, a prompt, a colon, `ray job submit ... --`, a list of commands); elsewhere it is prose or an
# argument ("kubectl -n raytune-attn ...").
_COMMAND_START = {"", "#", "$", "--", "&&", "||", "exec", "time", "then", "do"}


def _starts_command(word_before: str) -> bool:
    return word_before in _COMMAND_START or word_before.endswith(":")  # "# or: raytune-attn tune ..."
_PYTHON = re.compile(r"python3? (?:-m (benchmarks\.\w+)|((?:benchmarks|pipelines|examples)/\w+\.py))([^`\n|;&>]*)")

_HELPS = r"""
import contextlib, io, json, re, runpy, sys
out = {}
for name in sys.argv[1:]:
    buf = io.StringIO()
    sys.argv = [name, "--help"]
    code = None
    try:
        with contextlib.redirect_stdout(buf):
            if name.endswith(".py"):
                runpy.run_path(name, run_name="__main__")
            else:
                runpy.run_module(name, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
    out[name] = [code, sorted(set(re.findall(r"--[a-z][a-z0-9-]*", buf.getvalue())))]
print(json.dumps(out))
"""


def _code(text: str) -> str:
    """The code of a Markdown text: fenced and indented blocks and inline spans, one per line."""
    parts, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced or line.startswith("    "):
            parts.append(line)
        else:
            parts.extend(re.findall(r"`([^`]+)`", line))
    return "\n".join(parts)


def _lines() -> list[tuple[str, str]]:
    """(where, command text) for every file, continuation lines joined."""
    out = []
    for path in _GUIDES + _SCRIPTS:
        text = path.read_text().replace("\\\n", " ")
        if path.suffix == ".md":
            text = _code(text)
        out.extend((str(path.relative_to(ROOT)), line) for line in text.splitlines())
    return out


def _flags(rest: str) -> list[str]:
    """The long flags of a command's arguments, up to a shell comment."""
    flags = []
    for token in rest.split():
        if token.startswith("#"):
            break
        if token.startswith("--") and token != "--":
            flags.append(token.split("=")[0].rstrip(",.;:)]'\""))
    return flags


def _cli_uses():
    for where, line in _lines():
        for m in _CLI.finditer(line):
            before = line[:m.start()]
            if before[-1:] in ("`", "(", '"', "'") or _starts_command((before.split() or [""])[-1]):
                yield where, m.group(0)


def _python_uses():
    for where, line in _lines():
        for m in _PYTHON.finditer(line):
            yield where, m.group(1) or m.group(2), m.group(3)


def test_every_raytune_attn_command_line_names_a_command_and_its_flags():
    root = typer.main.get_command(app)
    wrong, seen = [], 0
    for where, text in _cli_uses():
        words = text.split()[1:]
        cmd, used = root, 0
        while used < len(words) and hasattr(cmd, "commands") and words[used] in cmd.commands:
            cmd, used = cmd.commands[words[used]], used + 1
        if hasattr(cmd, "commands"):  # the bare program, its --help, or a group without its subcommand
            if words and re.fullmatch(r"[a-z][a-z-]*", words[0]):
                wrong.append(f"{where}: {text!r}: no command {words[0]!r}")
            continue
        seen += 1
        opts = {o for p in cmd.params for o in [*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())]}
        wrong += [f"{where}: {text!r}: {cmd.name} has no flag {f}" for f in _flags(" ".join(words[used:]))
                  if f not in opts | {"--help"}]
    assert seen > 50  # the check reads the guides' command lines, not nothing
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
def test_every_script_command_line_names_a_script_and_its_flags():
    uses = list(_python_uses())
    names = sorted({name for _, name, _ in uses})
    missing = [n for n in names if not (ROOT / (n if n.endswith(".py") else n.replace(".", "/") + ".py")).is_file()]
    assert not missing, f"command lines name scripts that do not exist: {missing}"
    # the clone first, then whatever the environment's path holds (a host whose Ray comes from PYTHONPATH)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "250", "TRITON_INTERPRET": "1"}
    run = subprocess.run([sys.executable, "-c", _HELPS, *names], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    helps = json.loads(run.stdout.strip().splitlines()[-1])
    assert not [n for n, (code, _) in helps.items() if code not in (0, None)], helps
    wrong = [f"{where}: {name}{rest}: no flag {f}" for where, name, rest in uses for f in _flags(rest)
             if f not in helps[name][1]]
    assert len(uses) > 100
    assert not wrong, "\n".join(wrong)


def test_a_renamed_flag_or_command_is_caught(monkeypatch):
    """The checks above find a wrong line: one guide line with a flag no command has, one with no such command."""
    real = _lines()
    monkeypatch.setattr(sys.modules[__name__], "_lines", lambda: [
        *real, ("guide.md", "raytune-attn tune --budgets 4"), ("guide.md", "raytune-attn sweep --budget 4")])
    with pytest.raises(AssertionError) as err:
        test_every_raytune_attn_command_line_names_a_command_and_its_flags()
    assert "tune has no flag --budgets" in str(err.value)
    assert "no command 'sweep'" in str(err.value)
