"""Reading the YAML input files (search spaces, problem sets): errors that name the file and what is wrong with it.

`yaml.safe_load` alone lets a repeated mapping key silently replace the first (BLOCK_M listed twice: the second
list is searched), and reading the file reports a directory or a non-UTF-8 file without naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


class YamlInputError(ValueError):
    """A YAML input file that cannot be read as one; `problem` says why, the message names the file too."""

    def __init__(self, source: str, problem: str):
        super().__init__(f"{source}: {problem}")
        self.source, self.problem = source, problem


class _DuplicateKey(yaml.YAMLError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a mapping that gives one key twice (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, str] = {}
        for key_node, _ in node.value:
            # Only plain keys: merge keys (`<<`) may be overridden by design, and complex keys are refused later.
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key, mark = self.construct_object(key_node), key_node.start_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}"  # the column tells apart keys of one line
            if key in seen:
                raise _DuplicateKey(f"{where}: duplicate key {key!r} (first at {seen[key]}); give each key once")
            seen[key] = where
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path, source: str, what: str) -> Any:
    """The document of the YAML file `path`, which messages call `source`; YamlInputError if it is not `what`
    (e.g. "a search-space YAML file"): a directory, unreadable, not UTF-8, not YAML, or with a repeated key."""
    if path.is_dir():
        raise YamlInputError(source, f"is a directory; expected {what}")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise YamlInputError(source, f"cannot be read ({e.strerror}); expected {what}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise YamlInputError(source, f"not UTF-8 text (byte 0x{data[e.start]:02x} on line {line}); expected {what}, "
                                     f"saved as UTF-8") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader
    except _DuplicateKey as e:
        raise YamlInputError(source, str(e)) from None
    except yaml.YAMLError as e:
        raise YamlInputError(source, f"not valid YAML: {e}") from None


def schema_version_problem(doc: dict, want: int) -> str | None:
    """Why `doc`'s schema_version is not `want`, or None. It must be an integer: True and 1.0 equal 1 in Python,
    and would read as version 1 whatever the file meant."""
    if "schema_version" not in doc:
        return "missing"
    got = doc["schema_version"]
    if type(got) is not int or got != want:
        return f"is {got!r}; this loader reads {want} (an integer)"
    return None
