"""The YAML reader of the input files (yaml_input.py): repeated keys, directories, encodings, schema versions."""

import pytest

from raytune_attn.tune.yaml_input import YamlInputError, read_yaml, schema_version_problem


def _file(tmp_path, data: bytes):
    path = tmp_path / "in.yaml"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(("data", "problem"), [
    (b"a: 1\nb: {c: 2, c: 3}\n", "line 2, column 11: duplicate key 'c' (first at line 2, column 5); give each key "
                                 "once"),
    (b"- {x: 1}\n- x: 1\n  y: 2\n  x: 3\n", "line 4, column 3: duplicate key 'x' (first at line 2, column 3)"),
    (b"1: a\ntrue: b\n", "line 2, column 1: duplicate key True (first at line 1"),  # one dict key in Python
    (b"a: \xe9t\xe9\n", "not UTF-8 text (byte 0xe9 on line 1); expected a thing, saved as UTF-8"),
    (b"a: [1\n", "not valid YAML: "),
])
def test_errors_name_the_file_and_the_problem(tmp_path, data, problem):
    path = _file(tmp_path, data)
    with pytest.raises(YamlInputError) as e:
        read_yaml(path, "f.yaml", "a thing")
    assert str(e.value).startswith(f"f.yaml: {problem}") and e.value.source == "f.yaml"
    assert isinstance(e.value, ValueError)  # the CLI's one-line error, exit 2


def test_a_directory_names_what_was_expected(tmp_path):
    with pytest.raises(YamlInputError, match=r"^d: is a directory; expected a problem-set YAML file$"):
        read_yaml(tmp_path, "d", "a problem-set YAML file")


def test_what_still_loads(tmp_path):
    # The same key in different mappings, a merge key (<<) overridden by design, a UTF-8 BOM and text.
    data = "\ufeffbase: &b {x: 1, y: 2}\nm: {<<: *b, x: 3}\nn: {x: 4}\ns: été\n".encode()
    assert read_yaml(_file(tmp_path, data), "f", "x") == {"base": {"x": 1, "y": 2}, "m": {"x": 3, "y": 2},
                                                         "n": {"x": 4}, "s": "été"}
    assert read_yaml(_file(tmp_path, b""), "f", "x") is None


@pytest.mark.parametrize(("doc", "problem"), [
    ({"schema_version": 1}, None),
    ({}, "missing"),
    ({"schema_version": True}, "is True; this loader reads 1 (an integer)"),
    ({"schema_version": 1.0}, "is 1.0; this loader reads 1 (an integer)"),
    ({"schema_version": "1"}, "is '1'; this loader reads 1 (an integer)"),
    ({"schema_version": 2}, "is 2; this loader reads 1 (an integer)"),
])
def test_schema_version(doc, problem):
    assert schema_version_problem(doc, 1) == problem
