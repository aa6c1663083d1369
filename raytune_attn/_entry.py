"""The `raytune-attn` console script: the tuner's command line, or a clear word when the `tune` extra is missing.

The inference core installs without Ray, MLflow or scikit-optimize; the command line is the tuner's, so a core-only
install answers with the install command instead of a traceback.
"""

from __future__ import annotations

import sys

_EXTRA_HINT = "raytune-attn: the command line is the tuner's: pip install 'raytune-attn[tune]' ({missing} is missing)"


def main(argv: list[str] | None = None) -> int:
    try:
        from raytune_attn.tune.cli import main as cli_main
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in {"ray", "mlflow", "skopt", "typer", "pandas", "pyarrow", "yaml"}:
            print(_EXTRA_HINT.format(missing=e.name), file=sys.stderr)
            return 2
        raise
    return cli_main(argv)
