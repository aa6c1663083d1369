"""out_paths.existing_base: where creating an output path would start."""

from raytune_attn.tune.out_paths import existing_base


def test_the_nearest_existing_folder_or_file_above_a_path(tmp_path):
    assert existing_base(tmp_path / "a" / "b" / "x.json") == tmp_path
    (tmp_path / "afile").write_text("")
    assert existing_base(tmp_path / "afile" / "x.json") == tmp_path / "afile"  # a file: the callers refuse it
    assert existing_base(tmp_path) == tmp_path
