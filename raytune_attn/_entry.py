"""The `raytune-attn` console script and `pipelines/sweep.py`: the tuner's entry points, or a clear word when the
`tune` extra is missing.

The inference core installs without Ray, MLflow or scikit-optimize; the command line is the tuner's, so a core-only
install answers with the install command instead of a traceback.
"""

from __future__ import annotations

import importlib
import sys

_EXTRA_HINT = "raytune-attn: the tuner needs its extra: pip install 'raytune-attn[tune]' ({missing} is missing)"
# The top-level modules of the tune extra's distributions.
_TUNE_MODULES = {"ray", "mlflow", "skopt", "sklearn", "typer", "click", "pandas", "pyarrow", "yaml"}


def run(module: str, argv: list[str] | None = None) -> int:
    """`module.main(argv)`; exit status 2 and the install command when the tune extra is not installed."""
    try:  # the tuner imports parts of the extra lazily, when a command needs them: the call is inside too
        return importlib.import_module(module).main(argv)
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in _TUNE_MODULES:
            print(_EXTRA_HINT.format(missing=e.name.split(".")[0]), file=sys.stderr)
            return 2
        raise


def main(argv: list[str] | None = None) -> int:
    return run("raytune_attn.tune.cli", argv)
