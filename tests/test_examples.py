"""examples/quickstart.py: its results against SDPA, and a bad artifact path as one line (exit 2)."""

import pytest


def test_quickstart_matches_sdpa(capsys):
    from examples.quickstart import main

    assert main([]) == 0
    diffs = [float(line.rsplit(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()]
    assert len(diffs) == 3 and max(diffs) < 1e-2  # bf16 on a GPU; float32 (about 1e-6) in the interpreter


@pytest.mark.parametrize("content", [None, "{}"], ids=["missing", "not-an-artifact"])
def test_quickstart_names_a_bad_artifact_in_one_line(content, tmp_path, capsys):
    from examples.quickstart import main

    path = tmp_path / "best_configs.json"
    if content is not None:
        path.write_text(content)
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "best_configs.json" in err
