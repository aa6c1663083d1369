"""Problem-set files (`pipelines/problems/*.yaml`): the attention workloads a sweep tunes, one search each.

Format (schema_version 1)::

    schema_version: 1
    name: llama3_8b_prefill
    description: free text
    defaults: {hq: 32, hkv: 8, head_dim: 128, causal: true, dtype: bfloat16, varlen: true}
    problems:
      - {batch: 1, seqlen: 4096}          # seqlen: shorthand for seqlen_q == seqlen_k
      - {batch: 4, seqlen_q: 128, seqlen_k: 4096, varlen: false}
      - key: dense-b4-hq16-hkv16-sq4096-sk4096-d128-causal-bfloat16
      - {kind: paged, num_seqs: 32, q_len: 1, context: {uniform: [2049, 4096]}, block_size: 16}

Each entry is merged over `defaults` and becomes a `raytune_attn.problem.Problem`; `kind: paged` (in the entry or
the defaults) makes a paged-KV batch, a `raytune_attn.paged_problem.PagedProblem` (fields: its `from_fields`).
Errors name the file and the entry (`pipelines/problems/x.yaml: problems[3]: ...`).
"""

from __future__ import annotations

from pathlib import Path

from raytune_attn import footprint
from raytune_attn.problem import Problem
from raytune_attn.tune.yaml_input import YamlInputError, read_yaml, schema_version_problem

SCHEMA_VERSION = 1
# The package's link to the repository's pipelines/problems/ (a wheel holds the files themselves).
PROBLEMS_DIR = (Path(__file__).resolve().parents[1] / "problem_sets").resolve()
_TOP_KEYS = {"schema_version", "name", "description", "defaults", "problems"}


class ProblemSetError(ValueError):
    """A problem-set file that is not valid; the message names the file and the entry."""


def resolve_path(path: str | Path) -> Path:
    """`path` as given, else a shipped set by name ("standard", "standard.yaml", or the repository's path
    "pipelines/problems/standard.yaml" from anywhere: an installed package holds the sets itself)."""
    p = Path(path)
    if p.exists():
        return p
    if p.is_absolute():  # no shipped set has an absolute name
        raise FileNotFoundError(f"no problem-set file {path}")
    name = str(path).removeprefix("pipelines/problems/")
    name = name if name.endswith((".yaml", ".yml")) else f"{name}.yaml"
    alt = PROBLEMS_DIR / name
    if alt.exists():
        return alt
    raise FileNotFoundError(f"no problem-set file {path} (nor {alt})")


def load_problems(path: str | Path) -> list[Problem]:
    """Load and validate a problem-set file; raise ProblemSetError naming the file and the bad entry."""
    p = resolve_path(path)
    src = str(path)
    try:
        doc = read_yaml(p, src, "a problem-set YAML file")
    except YamlInputError as e:
        raise ProblemSetError(str(e)) from None
    return parse_problems(doc, source=src)


def parse_problems(doc, *, source: str = "<memory>") -> list[Problem]:
    if not isinstance(doc, dict):
        raise ProblemSetError(f"{source}: must be a mapping with schema_version and problems")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise ProblemSetError(f"{source}: {unknown[0]}: unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    version = schema_version_problem(doc, SCHEMA_VERSION)
    if version:
        raise ProblemSetError(f"{source}: schema_version: {version}")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, dict):
        raise ProblemSetError(f"{source}: defaults: must be a mapping of problem fields")
    entries = doc.get("problems")
    if not isinstance(entries, list) or not entries:
        raise ProblemSetError(f"{source}: problems: must be a non-empty list")
    out: list[Problem] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        where = f"{source}: problems[{i}]"
        try:
            prob = _entry(entry, defaults)
            if type(prob) is Problem:  # too large to benchmark (footprint.py): refused before any allocation.
                footprint.check(prob)  # (A paged batch's pages and gathers are not counted there.)
        except (TypeError, ValueError) as e:
            raise ProblemSetError(f"{where}: {e}") from None
        if prob.key in seen:
            raise ProblemSetError(f"{where}: {prob.key} repeats problems[{seen[prob.key]}]")
        seen[prob.key] = i
        out.append(prob)
    return out


def _entry(entry, defaults: dict) -> Problem:
    if isinstance(entry, str):
        return Problem.from_key(entry)
    if not isinstance(entry, dict):
        raise ValueError(f"must be a mapping of problem fields or a problem key, got {entry!r}")
    if "key" in entry:
        if len(entry) != 1:
            raise ValueError("an entry with `key` may have no other field")
        return Problem.from_key(str(entry["key"]))
    d = {**defaults, **entry}
    if "kind" in d:
        if d["kind"] != "paged":
            raise ValueError(f"kind must be paged (dense and varlen problems take no kind), got {d['kind']!r}")
        from raytune_attn.paged_problem import PagedProblem

        return PagedProblem.from_fields(d)
    if "seqlen" in d:
        s = d.pop("seqlen")
        if "seqlen" in entry and ("seqlen_q" in entry or "seqlen_k" in entry):
            raise ValueError("give either seqlen or seqlen_q/seqlen_k, not both")
        for name in ("seqlen_q", "seqlen_k"):
            if name not in entry:
                d[name] = s
    return Problem.from_dict(d)
