"""Config validation: defaults, and a clear InvalidConfig naming the knob for every bad value."""

import pytest

from raytune_attn.config import KNOBS, InvalidConfig, default_config, validate_config


def test_defaults_fill_missing_knobs():
    cfg = validate_config({"BLOCK_M": 32}, head_dim=64)
    assert cfg["BLOCK_M"] == 32
    for name, value in default_config(64).items():
        if name != "BLOCK_M":
            assert cfg[name] == value
    assert set(default_config(256)) <= set(KNOBS)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"BLOCK_Q": 64}, "unknown knob"),
        ({"BLOCK_M": 48}, "BLOCK_M=48"),
        ({"BLOCK_N": 8}, "BLOCK_N=8"),
        ({"BLOCK_M": True}, "BLOCK_M must be an integer"),
        ({"BLOCK_M": 64.0}, "BLOCK_M must be an integer"),
        ({"PRE_LOAD_V": 1}, "PRE_LOAD_V must be true or false"),
        ({"num_warps": 3}, "num_warps=3"),
        ({"num_stages": 0}, "num_stages=0"),
        ({"kpack": 3}, "kpack=3"),
        ({"matrix_instr_nonkdim": 8}, "matrix_instr_nonkdim=8"),
        ({"waves_per_eu": 9}, "waves_per_eu=9"),
    ],
)
def test_bad_configs_name_the_knob(config, match):
    with pytest.raises(InvalidConfig, match=match):
        validate_config(config)


def test_not_a_dict():
    with pytest.raises(InvalidConfig, match="dict"):
        validate_config([("BLOCK_M", 64)])


def test_amd_knobs_refused_on_nvidia_only():
    cfg = {"waves_per_eu": 2, "kpack": 2, "matrix_instr_nonkdim": 16}
    with pytest.raises(InvalidConfig, match="only on AMD"):
        validate_config(cfg, vendor="nvidia")
    assert validate_config(cfg, vendor="amd")["kpack"] == 2
