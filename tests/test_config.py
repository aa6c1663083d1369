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
        ({"BAND_LAUNCH": 1}, "BAND_LAUNCH must be true or false"),
        ({"BAND_LAUNCH": True}, "BAND_LAUNCH takes the causal band out of the warp-specialized one-loop form"),
        ({"BAND_LAUNCH": True, "PERSISTENT": True, "REVERSE_M": True}, "it needs WARP_SPECIALIZE"),
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


def test_band_launch_with_warp_specialization_only():
    ws = {"WARP_SPECIALIZE": True, "USE_TMA": True, "SPLIT_MASK": False, "num_warps": 4, "num_stages": 2}
    assert validate_config({**ws, "BAND_LAUNCH": True}, head_dim=64, vendor="nvidia")["BAND_LAUNCH"] is True
    assert default_config(64)["BAND_LAUNCH"] is False


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


# ------------------------------------------------------------------------------------------ raytune_attn.validation


def test_check_is_validate_config_plus_what_the_architecture_holds():
    from raytune_attn import validation
    from raytune_attn.kernels.resources import ARCHS, Prefilter

    big = {"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3}
    assert validation.check(big, head_dim=256) == validate_config(big, head_dim=256)  # no architecture: the rules
    with pytest.raises(InvalidConfig, match="shared memory, sm80 has 166912"):
        validation.check(big, head_dim=256, arch="sm80")
    assert Prefilter.for_problem("sm80", 256, "bfloat16").reason(validate_config(big, head_dim=256))
    with pytest.raises(InvalidConfig, match="exist only on AMD"):  # the vendor follows the architecture
        validation.check({"kpack": 2}, arch="sm90")
    with pytest.raises(InvalidConfig, match="USE_TMA needs an NVIDIA GPU of compute capability 9.0"):
        validation.check({"USE_TMA": True}, head_dim=64, arch="sm80")
    assert validation.check({"USE_TMA": True}, head_dim=64, arch="sm90")["USE_TMA"] is True
    assert ARCHS["interpreter"].smem_bytes is None and validation.check(big, head_dim=256, arch="interpreter")


@pytest.mark.slow
def test_the_search_screen_is_the_resource_model_and_the_rules():
    from raytune_attn import validation
    from raytune_attn.kernels.resources import Prefilter, block_d
    from raytune_attn.tune.search.space import load_space

    space = list(load_space("nvidia/sm90").configs())
    for head_dim, dtype in ((128, "bfloat16"), (256, "float32")):
        pre = Prefilter.for_problem("sm90", head_dim, dtype)
        screen = validation.Screen.for_problem("sm90", head_dim, dtype)
        nbytes = 4 if dtype == "float32" else 2
        for c in space:  # on Hopper the model counts K and V whenever it counts anything: it decides alone
            kv = 2 * c["BLOCK_N"] * block_d(head_dim) * nbytes
            assert screen.accepts(c) == (pre.accepts(c) and kv <= 232448), c
    amd = validation.Screen.for_problem("gfx942", 128, "bfloat16")
    tile = {"BLOCK_M": 64, "BLOCK_N": 256, "num_warps": 4, "num_stages": 1}
    assert Prefilter.for_problem("gfx942", 128, "bfloat16").accepts(tile)
    # One stage keeps one 256-key tile (64 KB at D=128: the compiler's figure for 256 x 256, see
    # docs/benchmarks/cross-compile/smem/), which fits gfx942's 64 KB; two stages keep a K and a V tile.
    assert amd.reason(tile) is None
    assert "131072 bytes of shared memory" in amd.reason({**tile, "num_stages": 2})
    assert validation.Screen.for_problem("gfx942", 128, "bfloat16").reason({"BLOCK_M": 48}).startswith("BLOCK_M=48")
    with pytest.raises(ValueError, match="unknown arch"):
        validation.Screen.for_problem("sm99", 128, "bfloat16")


def test_prepare_on_host_tensors_is_the_rules_and_the_alignment():
    import torch

    from raytune_attn import validation

    q = torch.zeros(1, 2, 16, 64, dtype=torch.float16)
    assert validation.prepare({"BLOCK_M": 16}, q, q, q) == validate_config({"BLOCK_M": 16}, head_dim=64)
    odd = torch.zeros(1, 2, 16, 12, dtype=torch.float16)
    with pytest.raises(InvalidConfig, match="16-byte aligned rows of k"):
        validation.prepare({"USE_TMA": True, "BLOCK_M": 16, "BLOCK_N": 16}, odd, odd, odd)


def test_prepare_refuses_on_a_device_what_check_refuses_on_its_architecture(monkeypatch):
    import torch

    from raytune_attn import validation

    sm80 = validation._Device("nvidia", "sm80", 166912, (8, 0))  # what _gpu reads off an A100
    monkeypatch.setattr(validation, "_device", lambda t: sm80)
    q = torch.zeros(1, 1, 16, 256, dtype=torch.bfloat16)
    for cfg in ({"BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 4, "num_stages": 3},
                {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}, {"USE_TMA": True}):
        try:
            want = validation.check(cfg, head_dim=256, arch="sm80")
        except InvalidConfig as e:
            with pytest.raises(InvalidConfig, match=str(e).split(":")[-1].strip()[:20]):
                validation.prepare(cfg, q, q, q)
        else:
            assert validation.prepare(cfg, q, q, q) == want
