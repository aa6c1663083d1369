"""raytune-attn: a Triton flash-attention forward kernel family and the Ray Tune autotuner that tunes it."""

from raytune_attn.api import attention, varlen_attention
from raytune_attn.config import InvalidConfig, default_config
from raytune_attn.runtime import load_configs

__version__ = "0.1.0"
__all__ = ["attention", "varlen_attention", "load_configs", "InvalidConfig", "default_config", "__version__"]
