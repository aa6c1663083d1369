"""raytune-attn: Triton attention kernels (dense, varlen and paged-KV) launched with tuned configs; the autotuner that
tunes them is the `raytune_attn.tune` subpackage (`pip install 'raytune-attn[tune]'`).

The public names load on first use, so that `raytune-attn --help` and the command line do not pay for
importing torch and Triton until a command needs them.
"""

import importlib

__version__ = "0.1.0"
__all__ = [
    "attention", "varlen_attention", "paged_attention", "load_configs", "InvalidConfig", "default_config",
    "__version__",
]

_LAZY = {
    "attention": "raytune_attn.api",
    "varlen_attention": "raytune_attn.api",
    "paged_attention": "raytune_attn.paged",
    "load_configs": "raytune_attn.runtime",
    "InvalidConfig": "raytune_attn.config",
    "default_config": "raytune_attn.config",
}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'raytune_attn' has no attribute {name!r}")
