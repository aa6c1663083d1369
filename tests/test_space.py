"""Search-space files: the shipped spaces, the loader's errors, constraints and `raytune-attn space show`."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import yaml

from raytune_attn.config import validate_config
from raytune_attn.tune.cli import main
from raytune_attn.tune.search.space import SPACES_DIR, SpaceError, load_space

SHIPPED = ["nvidia/sm80", "nvidia/sm90", "amd/gfx90a", "amd/gfx942", "cpu/interpreter"]
STUDY = {"BLOCK_M": {16, 32, 64, 128, 256}, "BLOCK_N": {16, 32, 64, 128, 256}, "PRE_LOAD_V": {False, True},
         "num_warps": {2, 4, 8}, "num_stages": {1, 2, 4, 6, 8}}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_spaces_load(name):
    space = load_space(name)
    assert (SPACES_DIR / f"{name}.yaml").exists()
    assert 0 < space.size < space.size_unconstrained
    assert all(c["BLOCK_M"] >= c["BLOCK_N"] for c in space.configs())


@pytest.mark.parametrize("name", ["nvidia/sm80", "nvidia/sm90", "amd/gfx90a", "amd/gfx942"])
def test_gpu_spaces_contain_the_study_space(name):
    space = load_space(name)
    values = {p.name: set(p.values) for p in space.params}
    for knob, vals in STUDY.items():
        assert vals <= values[knob]
    study = {tuple(c[k] for k in STUDY) for c in space.configs() if all(c[k] in STUDY[k] for k in STUDY)}
    assert len(study) == 450  # 15 (BLOCK_M >= BLOCK_N) * 2 * 3 * 5
    assert "SPLIT_MASK" in values
    if name.startswith("amd"):
        assert {"waves_per_eu", "matrix_instr_nonkdim", "kpack"} <= set(values)
    assert ("USE_TMA" in values) == (name == "nvidia/sm90")
    # The Hopper knobs of issue #7 (docs/kernel.md) are searched on Hopper only; maxnreg never on AMD.
    for knob in ("WARP_SPECIALIZE", "PERSISTENT", "REVERSE_M", "maxnreg"):
        assert (knob in values) == (name == "nvidia/sm90")


def test_sizes_and_constraints():
    sm80 = load_space("nvidia/sm80")
    assert (sm80.size_unconstrained, sm80.size) == (1500, 900)
    ok = {"BLOCK_M": 128, "BLOCK_N": 64, "PRE_LOAD_V": True, "num_warps": 4, "num_stages": 2, "SPLIT_MASK": True}
    assert sm80.contains(ok)
    assert not sm80.contains({**ok, "BLOCK_N": 256})  # violates BLOCK_M >= BLOCK_N
    assert not sm80.contains({**ok, "num_stages": 3})  # not a listed value
    assert not sm80.contains({**ok, "PRE_LOAD_V": 1})  # 1 is not a boolean
    gfx = load_space("amd/gfx942")
    assert not any(c["matrix_instr_nonkdim"] == 32 and c["BLOCK_N"] < 32 for c in gfx.configs())


def test_sm90_hopper_knobs():
    space = load_space("nvidia/sm90")
    configs = space.configs()
    # BAND_LAUNCH (the causal band by a second launch) doubles only the warp-specialized configs.
    banded = [c for c in configs if c["BAND_LAUNCH"]]
    configs = [c for c in configs if not c["BAND_LAUNCH"]]
    assert banded and all(c["WARP_SPECIALIZE"] for c in banded)
    assert len(banded) == sum(c["WARP_SPECIALIZE"] for c in configs)
    # LPT_GROUP (groups of heads) multiplies only the persistent heavy-first configs, one copy per listed group.
    lpt = space.values["LPT_GROUP"]
    grouped = [c for c in configs if c["LPT_GROUP"]]
    assert lpt[0] == 0 and all(c["PERSISTENT"] and c["REVERSE_M"] for c in grouped)
    configs = [c for c in configs if not c["LPT_GROUP"]]
    assert len(grouped) == (len(lpt) - 1) * sum(c["PERSISTENT"] and c["REVERSE_M"] for c in configs)
    assert len(configs) == 5484
    # Every config is one the kernel accepts on NVIDIA (warp groups for warp specialization, register budget).
    for c in configs:
        validate_config(c, head_dim=128, vendor="nvidia")
    new = [c for c in configs if c["WARP_SPECIALIZE"] or c["maxnreg"] or c["PERSISTENT"] or c["REVERSE_M"]]
    assert new and all(c["BLOCK_M"] >= 64 and c["BLOCK_N"] >= 32 and c["num_warps"] >= 4
                       and (c["SPLIT_MASK"] or c["WARP_SPECIALIZE"]) and 2 <= c["num_stages"] <= 4
                       for c in new)  # fmt: skip
    # Warp specialization as Triton's Hopper pass takes it: one warp group written, TMA, one key loop, 2 stages.
    ws = [c for c in configs if c["WARP_SPECIALIZE"]]
    assert len(ws) == 84 and all(c["num_warps"] == 4 and c["num_stages"] == 2 and c["USE_TMA"]
                                 and not c["SPLIT_MASK"] and c["BLOCK_M"] >= 128 for c in ws)  # fmt: skip
    # One Q buffer: the 28 warp-specialized configs on the persistent grid, once more.
    one_q = [c for c in configs if c["ONE_Q_BUFFER"]]
    assert len(one_q) == 28 and all(c["PERSISTENT"] and c["WARP_SPECIALIZE"] for c in one_q)
    # Without the new knobs the space is the earlier one plus num_stages 3: 1800 + 360 configs.
    assert len(configs) - len(new) == 2160
    assert {p.name: p.encoding for p in space.params}["maxnreg"] == "index"  # 0 means "no cap"


def _write(tmp_path, doc, name="bad.yaml"):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return p


GOOD = {"schema_version": 1, "vendor": "nvidia", "arch": "sm90",
        "parameters": {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64], "PRE_LOAD_V": [False, True]},
        "constraints": ["BLOCK_M >= BLOCK_N"]}  # fmt: skip


def _with(**changes):
    doc = yaml.safe_load(yaml.safe_dump(GOOD))
    for k, v in changes.items():
        if v is None:
            doc.pop(k)
        else:
            doc[k] = v
    return doc


@pytest.mark.parametrize(
    ("doc", "key", "words"),
    [
        (_with(schema_version=None), "schema_version", "missing"),
        (_with(schema_version=2), "schema_version", "reads 1"),
        # True and 1.0 equal 1 in Python: the version must be the integer itself
        (_with(schema_version=True), "schema_version", "is True; this loader reads 1 (an integer)"),
        (_with(schema_version=1.0), "schema_version", "is 1.0; this loader reads 1 (an integer)"),
        # the arch picks the pre-filter's limits: it must be one of the vendor's (resources.ARCHS, else the naming)
        (_with(arch="gfx942"), "arch", "'gfx942' is an architecture of vendor amd, not of this space's vendor nvidia"),
        (_with(vendor="amd", arch="sm90"), "arch", "'sm90' is an architecture of vendor nvidia, not of this space's"),
        (_with(vendor="cpu", arch="sm80"), "arch", "of vendor nvidia, not of this space's vendor cpu"),
        (_with(arch="gfx1100"), "arch", "'gfx1100' is an architecture of vendor amd"),
        # a constraint is a condition: a number (always truthy, or falsy) would allow or refuse configs silently
        (_with(constraints=["BLOCK_M >= BLOCK_N", "BLOCK_M"]), "constraints[1]",
         "'BLOCK_M' is 64 (not true or false) at {'BLOCK_M': 64, 'BLOCK_N': 32}: a constraint must be a condition"),
        (_with(constraints=["BLOCK_M > 64 if PRE_LOAD_V else 0"]), "constraints[0]",
         "'BLOCK_M > 64 if PRE_LOAD_V else 0' is 0 (not true or false) at {'BLOCK_M': 64, 'BLOCK_N': 32, "
         "'PRE_LOAD_V': False}"),
        (_with(constraints=["PRE_LOAD_V or None"]), "constraints[0]", "is None (not true or false)"),
        (_with(vendor="intel"), "vendor", "must be one of"),
        (_with(parameters={"BLOCK_Q": [16]}), "parameters.BLOCK_Q", "not a kernel knob"),
        (_with(parameters={"kpack": [1, 2]}), "parameters.kpack", "only on AMD"),
        (_with(parameters={"PRE_LOAD_V": [0, 1]}), "parameters.PRE_LOAD_V", "not a boolean"),
        (_with(parameters={"BLOCK_M": [128, 64]}), "parameters.BLOCK_M", "increasing order"),
        (_with(parameters={"BLOCK_M": []}), "parameters.BLOCK_M", "non-empty list"),
        (_with(parameters={"BLOCK_M": {"values": [16], "encoding": "cubic"}}), "parameters.BLOCK_M.encoding", "one of"),
        (_with(constraints=["BLOCK_M >="]), "constraints[0]", "cannot parse"),
        (_with(constraints=["BLOCK_K > 1"]), "constraints[0]", "'BLOCK_K'"),
        (_with(constraints=["__import__('os').system('true')"]), "constraints[0]", "not allowed"),
        (_with(constraints=["BLOCK_M < 16"]), "constraints", "no config satisfies"),
        (_with(extra=1), "extra", "unknown key"),
        # every value must be one some config of the space can run with (config.validate_config judges)
        (_with(parameters={"BLOCK_M": [24, 48], "num_warps": [3]}, constraints=None), "parameters",
         "every config is an invalid kernel config, e.g.: BLOCK_M=24"),
        (_with(parameters={"BLOCK_M": [16, 24, 32]}, constraints=None), "parameters.BLOCK_M",
         "value 24 is in no valid kernel config"),
        (_with(parameters={"BLOCK_M": [64], "num_warps": [3, 4]}, constraints=None), "parameters.num_warps",
         "value 3 is in no valid kernel config"),
        (_with(parameters={"WARP_SPECIALIZE": [False, True], "USE_TMA": [False, True], "num_warps": [4],
                           "num_stages": [2]}, constraints=None), "parameters.WARP_SPECIALIZE",
         "value true is in no valid kernel config of this space (WARP_SPECIALIZE needs USE_TMA"),
        # constraints are bounded expressions
        (_with(constraints=["BLOCK_M ** 10**9 > 0"]), "constraints[0]",
         "'BLOCK_M ** 10**9 > 0' raises to the power 10 ** 9: an exponent must be an integer literal of at most 64"),
        (_with(constraints=["BLOCK_M ** BLOCK_N > 0"]), "constraints[0]", "an exponent must be an integer literal"),
        (_with(constraints=["((BLOCK_M ** 64) ** 64) ** 64 > 0"]), "constraints[0]", "is beyond 4096 bits"),
        (_with(constraints=["'x' * BLOCK_M != ''"]), "constraints[0]", "arithmetic on str 'x'"),
        (_with(constraints=["[0] * BLOCK_M != []"]), "constraints[0]", "arithmetic on list"),
        (_with(constraints=["'%0999999999d' % BLOCK_M != ''"]), "constraints[0]", "arithmetic on str"),
        (_with(constraints=["BLOCK_M" + " + 1" * 300 + " > 0"]), "constraints[0]", "more than 1000"),
        (_with(constraints=["BLOCK_M // (BLOCK_N - 64) < 0 or True"]), "constraints", "ZeroDivisionError"),
        (_with(constraints=["BLOCK_N < 64 or (BLOCK_M * 2 ** 64) ** 64 > 0"]), "constraints",
         "ExpressionBoundError: 'BLOCK_N < 64 or (BLOCK_M * 2 ** 64) ** 64 > 0': a 71-bit integer ** 64 is beyond"),
        # priors: every knob, value and name is checked at load
        (_with(start=[{"set": {"BLOCK_K": 16}}]), "start[0].set.BLOCK_K", "not a parameter"),
        (_with(start=[{"set": {"BLOCK_M": 32}}]), "start[0].set.BLOCK_M", "not one of its values"),
        (_with(start=[{"when": "BLOCK_M > 1", "set": {"BLOCK_M": 64}}]), "start[0].when", "'BLOCK_M'"),
        (_with(start=[{"when": "head_dim > 1"}]), "start[0].set", "missing"),
        (_with(moves=[{"step": {"BLOCK_M": 1}}]), "moves[0].name", "needs a name"),
        (_with(moves=[{"name": "up", "step": {"BLOCK_M": 0}}]), "moves[0].step.BLOCK_M", "non-zero integer"),
        (_with(moves=[{"name": "up", "step": {"num_warps": 1}}]), "moves[0].step.num_warps", "not a parameter"),
        (_with(moves=[{"name": "v", "set": {"PRE_LOAD_V": 1}}]), "moves[0].set.PRE_LOAD_V", "not one of its values"),
        (_with(moves=[{"name": "up", "when": "seqlen > 1", "step": {"BLOCK_M": 1}}]), "moves[0].when", "'seqlen'"),
        (_with(moves=[{"name": "up", "when": "dtype + 1", "step": {"BLOCK_M": 1}}]), "moves[0].when",
         "fails to evaluate"),
        (_with(moves=[{"name": "up", "step": {"BLOCK_M": 1}}, {"name": "up", "step": {"BLOCK_N": 1}}]),
         "moves[1].name", "earlier move"),
        (_with(moves=[{"name": "up", "step": {"BLOCK_M": 1}, "prefer": {"set": {"BLOCK_N": 16}}}]),
         "moves[0].prefer.set.BLOCK_N", "not one of its values"),
        (_with(moves=[{"name": "up", "step": {"BLOCK_M": 1}, "set": {"BLOCK_M": 64}}]), "moves[0]",
         "both stepped and set"),
        (_with(coupled=[{"knobs": ["BLOCK_M"], "keep": "BLOCK_M"}]), "coupled[0].knobs", "two different knobs"),
        (_with(coupled=[{"knobs": ["BLOCK_M", "BLOCK_N"], "keep": "BLOCK_M - BLOCK_N"}]), "coupled[0].keep",
         "not a positive number"),
    ],
)
def test_loader_errors_name_file_key_and_problem(tmp_path, doc, key, words):
    path = _write(tmp_path, doc)
    with pytest.raises(SpaceError) as e:
        load_space(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: {key}: "), msg
    assert words in msg


def test_bounded_expressions_still_compute_small_arithmetic(tmp_path):
    doc = _with(parameters={"BLOCK_M": [64, 128], "BLOCK_N": [32, 64], "num_stages": [1, 2, 3]},
                constraints=["BLOCK_M ** 2 >= BLOCK_N ** 2 * num_stages ** -1 * 2 ** 2",
                             "(BLOCK_M * 2 ** 60) ** 8 > 0", "BLOCK_M % 3 != 5 // 2 or -BLOCK_N / 2 < 0"])
    space = load_space(_write(tmp_path, doc, "ok.yaml"))
    want = [c for c in (dict(zip(("BLOCK_M", "BLOCK_N", "num_stages"), v, strict=True))
                        for v in itertools.product([64, 128], [32, 64], [1, 2, 3]))
            if c["BLOCK_M"] ** 2 >= c["BLOCK_N"] ** 2 / c["num_stages"] * 4]
    assert space.configs() == want and 0 < len(want) < 12


def _product_filtered(space):
    """Every config of the full product that passes the constraints in order: what `configs()` must list."""
    combos = itertools.product(*(p.values for p in space.params))
    return [c for c in (space.to_config(v) for v in combos) if all(k(c) for k in space.constraints)]


@pytest.mark.parametrize("name", ["cpu/interpreter", "nvidia/sm80", "nvidia/sm90_study", "amd/gfx942_paged"])
def test_pruned_enumeration_lists_the_full_products_configs_in_its_order(name):
    space = load_space(name)
    assert space.configs() == _product_filtered(space)


def test_a_constraint_guarded_by_an_earlier_one_runs_only_where_that_one_held(tmp_path):
    # The first constraint reads the last knob; the second reads only the first two and divides by zero at
    # BLOCK_M=32, BLOCK_N=16, which the first one rules out: listed after it, it must never run there.
    doc = _with(parameters={"BLOCK_M": [16, 32], "BLOCK_N": [16, 32], "num_stages": [1, 2]},
                constraints=["BLOCK_M == 16 or BLOCK_N == 32 or num_stages > 99", "64 // (BLOCK_M - 2 * BLOCK_N) < 0"])
    space = load_space(_write(tmp_path, doc, "guarded.yaml"))
    tiles = [(c["BLOCK_M"], c["BLOCK_N"]) for c in space.configs()]
    assert space.configs() == _product_filtered(space) and tiles == [(16, 16)] * 2 + [(16, 32)] * 2 + [(32, 32)] * 2
    doc["constraints"].reverse()  # unguarded, the division fails at load time, naming the file
    with pytest.raises(SpaceError, match=r"unguarded\.yaml: constraints: ZeroDivisionError"):
        load_space(_write(tmp_path, doc, "unguarded.yaml"))


def test_a_value_usable_only_with_another_knob_loads(tmp_path):
    # WARP_SPECIALIZE=True alone is refused by validate_config; with USE_TMA, SPLIT_MASK off, 4 warps it runs.
    doc = _with(parameters={"WARP_SPECIALIZE": [False, True], "USE_TMA": [False, True], "SPLIT_MASK": [False],
                            "num_warps": [4], "num_stages": [2]}, constraints=None)
    space = load_space(_write(tmp_path, doc, "ok.yaml"))
    assert space.size == 4


def test_not_yaml_and_missing_file(tmp_path):
    with pytest.raises(SpaceError, match=r"bad\.yaml: <file>: not valid YAML"):
        load_space(_write(tmp_path, "parameters: [unclosed"))
    with pytest.raises(FileNotFoundError):
        load_space(tmp_path / "nope.yaml")


def test_a_key_given_twice_is_refused_naming_it_and_its_lines(tmp_path):
    text = ("schema_version: 1\nvendor: nvidia\narch: sm90\nparameters:\n  BLOCK_M: [64, 128]\n  BLOCK_N: [32, 64]\n"
            "  BLOCK_M: [64]\n")
    path = _write(tmp_path, text)
    with pytest.raises(SpaceError) as e:
        load_space(path)
    assert str(e.value) == (f"{path}: <file>: line 7, column 3: duplicate key 'BLOCK_M' (first at line 5, column 3); "
                            "give each key once")
    path = _write(tmp_path, text.replace("  BLOCK_M: [64]\n", "").replace("arch: sm90\n", "arch: sm90\narch: sm80\n"))
    with pytest.raises(SpaceError, match=r"bad\.yaml: <file>: line 4, column 1: duplicate key 'arch' \(first at line"):
        load_space(path)


@pytest.mark.parametrize(("content", "problem"), [
    (b"schema_version: 1\nvendor: nvidia # \xff\xfe\n", "not UTF-8 text (byte 0xff on line 2); expected a "
                                                         "search-space YAML file, saved as UTF-8"),
    (None, "is a directory; expected a search-space YAML file"),
])
def test_unreadable_files_are_named(tmp_path, content, problem):
    path = tmp_path / "bad.yaml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(SpaceError) as e:
        load_space(path)
    assert str(e.value) == f"{path}: <file>: {problem}"


@pytest.mark.parametrize("content", [b"\xff\xfe", None, b"schema_version: 1\nschema_version: 1\n"])
def test_cli_unreadable_space_file_is_one_line_naming_it(tmp_path, capsys, monkeypatch, content):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "bad.yaml"
    path.mkdir() if content is None else path.write_bytes(content)
    for argv in (["space", "show", "bad.yaml"], ["tune", "--space", "bad.yaml", "--out", "out", "--name", "n"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("raytune-attn: error: bad.yaml: <file>: "), err
        assert "codec" not in err and "Errno" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_an_arch_the_model_does_not_know_loads_under_its_vendor(tmp_path):
    assert load_space(_write(tmp_path, _with(arch="sm100"), "ok.yaml")).arch == "sm100"  # the sweep takes the device's


@pytest.mark.parametrize("path", sorted(SPACES_DIR.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_committed_space_file_loads(path):
    space = load_space(path)
    assert space.size > 0 and space.vendor == path.parent.name


def test_good_file_and_long_form(tmp_path):
    doc = _with(
        parameters={"BLOCK_M": [64, 128], "BLOCK_N": [32, 64], "num_warps": {"values": [4, 8], "encoding": "index"}}
    )
    space = load_space(_write(tmp_path, doc, "ok.yaml"))
    assert space.size_unconstrained == 8 and space.size == 8
    assert [p.encoding for p in space.params] == ["log2", "log2", "index"]


@pytest.mark.slow
def test_cli_space_show(capsys):
    assert main(["space", "show", str(SPACES_DIR / "nvidia" / "sm90.yaml")]) == 0
    out = capsys.readouterr().out
    assert "BLOCK_M" in out and "USE_TMA" in out
    doc = yaml.safe_load((SPACES_DIR / "nvidia" / "sm90.yaml").read_text())
    product = math.prod(len(v["values"] if isinstance(v, dict) else v) for v in doc["parameters"].values())
    before, after = map(int, re.search(r"size: (\d+) before constraints, (\d+) after", out).groups())
    assert before == product and 0 < after < before
    assert "moves: scale up; fewer warps with TMA; short causal" in out


@pytest.mark.slow
def test_shipped_priors():
    """Each GPU file starts from the kernel's default (tests/test_search_start.py checks the values) and has the
    coupled pairs; the moves that need Hopper's knobs are in the Hopper file only; the interpreter has no start."""
    moves = {name: [m.name for m in load_space(name).priors.moves] for name in [*SHIPPED, "nvidia/sm90_study"]}
    assert moves["nvidia/sm90"][:4] == ["scale up", "fewer warps with TMA", "short causal",
                                        "more warps, deeper pipeline"]  # fmt: skip
    assert [m for m in moves["nvidia/sm90"] if m.startswith("warp specialized")] == moves["nvidia/sm90"][4:]
    assert moves["nvidia/sm80"] == moves["nvidia/sm90_study"] == ["scale up", "short causal",
                                                                  "more warps, deeper pipeline"]  # fmt: skip
    assert moves["amd/gfx90a"] == moves["amd/gfx942"] == ["scale up"]
    for name in SHIPPED:
        pr = load_space(name).priors
        assert [c.knobs for c in pr.coupled] == [("BLOCK_M", "num_warps"), ("BLOCK_N", "num_stages")]
        assert bool(pr.start) == (name != "cpu/interpreter")


def test_a_space_file_with_priors(tmp_path):
    doc = _with(start=[{"set": {"BLOCK_M": 128, "BLOCK_N": 64}}, {"when": "seqlen_q <= 64", "set": {"BLOCK_M": 64}}],
                moves=[{"name": "down", "when": "BLOCK_M > BLOCK_N", "step": {"BLOCK_M": -1},
                        "set": {"PRE_LOAD_V": "causal"}, "prefer": {"when": "head_dim == 64", "set": {"BLOCK_N": 32}}}],
                coupled=[{"knobs": ["BLOCK_M", "BLOCK_N"], "keep": "BLOCK_M * BLOCK_N"}])  # fmt: skip
    space = load_space(_write(tmp_path, doc, "ok.yaml"))
    from raytune_attn.tune.search.priors import apply_move, problem_fields, start_config

    short = problem_fields({"seqlen_q": 64, "causal": True, "head_dim": 64})
    start = start_config(space.priors, space.values, short)
    assert start == {"BLOCK_M": 64, "BLOCK_N": 64, "PRE_LOAD_V": False}  # PRE_LOAD_V: its first value
    assert apply_move(space.priors.moves[0], start, space.values, short) == []  # BLOCK_M == BLOCK_N
    long = problem_fields({"seqlen_q": 4096, "causal": True, "head_dim": 64})
    start = start_config(space.priors, space.values, long)
    assert apply_move(space.priors.moves[0], start, space.values, long) == [
        {"BLOCK_M": 64, "BLOCK_N": 32, "PRE_LOAD_V": True}, {"BLOCK_M": 64, "BLOCK_N": 64, "PRE_LOAD_V": True}]
    # `causal` unknown: the expression cannot be evaluated, so the move does not apply
    assert apply_move(space.priors.moves[0], start, space.values, problem_fields({"head_dim": 64})) == []


def test_cli_space_show_bad_file_exits_2(tmp_path, capsys):
    path = _write(tmp_path, _with(vendor="intel"))
    assert main(["space", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "vendor" in err
