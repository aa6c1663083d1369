"""Config validation: defaults, and a clear InvalidConfig naming the knob for every bad value."""

import pytest

from raytune_attn.config import CONSTEXPR_KNOBS, KNOBS, InvalidConfig, default_config, validate_config


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


HOPPER_KNOBS = ("WARP_SPECIALIZE", "PERSISTENT", "REVERSE_M", "maxnreg", "ONE_Q_BUFFER")


def test_hopper_knobs_are_off_by_default():
    for d in (64, 128, 256):
        cfg = default_config(d)
        assert (cfg["WARP_SPECIALIZE"], cfg["PERSISTENT"], cfg["REVERSE_M"], cfg["maxnreg"], cfg["ONE_Q_BUFFER"]) == (
            False, False, False, 0, False)
    assert set(HOPPER_KNOBS) <= set(KNOBS)
    # Listed after the older knobs: their positions (result columns, the ops' encoded configs) do not move.
    assert list(KNOBS)[:10] == ["BLOCK_M", "BLOCK_N", "num_warps", "num_stages", "PRE_LOAD_V", "SPLIT_MASK",
                                "USE_TMA", "waves_per_eu", "matrix_instr_nonkdim", "kpack"]  # fmt: skip
    assert set(HOPPER_KNOBS) - {"maxnreg"} <= set(CONSTEXPR_KNOBS)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"WARP_SPECIALIZE": 1}, "WARP_SPECIALIZE must be true or false"),
        ({"PERSISTENT": "yes"}, "PERSISTENT must be true or false"),
        ({"REVERSE_M": 0}, "REVERSE_M must be true or false"),
        ({"maxnreg": True}, "maxnreg must be an integer"),
        ({"maxnreg": 16}, "maxnreg=16"),
        ({"maxnreg": 256}, "maxnreg=256"),
        ({"maxnreg": 232, "num_warps": 16}, "65536 registers"),
        ({"WARP_SPECIALIZE": True, "num_warps": 2}, "WARP_SPECIALIZE needs num_warps a multiple of 4"),
        ({"WARP_SPECIALIZE": True, "SPLIT_MASK": False}, "WARP_SPECIALIZE needs USE_TMA"),
        ({"WARP_SPECIALIZE": True, "USE_TMA": True}, "and SPLIT_MASK off"),
        ({"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_stages": 3}, "num_stages=2 only"),
        ({"ONE_Q_BUFFER": 1}, "ONE_Q_BUFFER must be true or false"),
        ({"ONE_Q_BUFFER": True, "PERSISTENT": True}, "ONE_Q_BUFFER applies to the persistent grid under warp"),
        ({"ONE_Q_BUFFER": True, "WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False},
         "needs PERSISTENT and WARP_SPECIALIZE"),
    ],
)
def test_bad_hopper_knobs_name_the_knob(config, match):
    with pytest.raises(InvalidConfig, match=match):
        validate_config(config)


def test_maxnreg_refused_on_amd_only():
    with pytest.raises(InvalidConfig, match="only on NVIDIA"):
        validate_config({"maxnreg": 128}, vendor="amd")
    assert validate_config({"maxnreg": 0}, vendor="amd")["maxnreg"] == 0  # 0 = unset, fine anywhere
    assert validate_config({"maxnreg": 168, "num_warps": 8}, vendor="nvidia")["maxnreg"] == 168
    assert validate_config({"maxnreg": 232, "WARP_SPECIALIZE": True, "PERSISTENT": True, "REVERSE_M": True,
                            "USE_TMA": True, "SPLIT_MASK": False, "num_stages": 2},
                           vendor="cpu")["PERSISTENT"] is True  # fmt: skip


def test_one_q_buffer_on_the_warp_specialized_persistent_grid():
    ws = {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_warps": 4, "num_stages": 2}
    cfg = validate_config({**ws, "PERSISTENT": True, "ONE_Q_BUFFER": True}, head_dim=256, vendor="nvidia")
    assert cfg["ONE_Q_BUFFER"] is True and cfg["PERSISTENT"] is True
    assert validate_config({**ws, "ONE_Q_BUFFER": False}, vendor="amd")["ONE_Q_BUFFER"] is False


def test_default_tiles_follow_short_sequences_and_only_those():
    assert default_config(128, 4096, 4096) == default_config(128)  # long sequences: the plain default
    short = default_config(128, 16, 16)
    assert (short["BLOCK_M"], short["BLOCK_N"], short["num_warps"], short["num_stages"]) == (16, 16, 2, 1)
    mid = default_config(128, 50, 50)  # rounded up to a power of two; one 64-key block: one stage
    assert (mid["BLOCK_M"], mid["BLOCK_N"], mid["num_warps"], mid["num_stages"]) == (64, 64, 4, 1)
    assert default_config(256, 100, 3000) == default_config(256)  # head dim 256's tiles are already 64 x 32
    wide = default_config(256, 30, 3000)
    assert (wide["BLOCK_M"], wide["BLOCK_N"], wide["num_warps"], wide["num_stages"]) == (32, 32, 2, 2)
    for d in (64, 128, 256):  # every length-aware default is a valid config for its head dim
        for sq, sk in ((1, 1), (16, 4096), (4096, 16), (100, 100)):
            assert validate_config(default_config(d, sq, sk), head_dim=d, vendor="nvidia")
