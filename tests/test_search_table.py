"""benchmarks/search_table: the table lands between its markers, a named section's apart from the default one's."""

import pytest

from benchmarks.search_table import BEGIN, END, main, write


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
