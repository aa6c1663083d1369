"""The two private Ray functions `raytune-attn doctor` uses, behind a version guard.

Ray has no public call that resolves "auto" to the cluster's GCS address without connecting as a driver, nor one
that turns on token authentication the way its own CLI does when a token exists on the machine. `doctor` probes a
cluster before it connects, so it needs both. Checked on the Ray versions in `SUPPORTED`; on any other, or where the
functions moved, "auto" resolves from $RAY_ADDRESS alone and token authentication is left to Ray
(tests/test_doctor_ray_private.py checks both on the installed Ray; which cluster "auto" finds without
$RAY_ADDRESS depends on what last started on the machine, so that is not asserted).
"""

from __future__ import annotations

import os

SUPPORTED = ((2, 40), (2, 60))  # first and last Ray (major, minor) these functions were read on


def supported() -> bool:
    import ray

    major, minor = (int(x) for x in ray.__version__.split(".")[:2])
    return SUPPORTED[0] <= (major, minor) <= SUPPORTED[1]


def auto_address() -> str | None:
    """The GCS address "auto" means here ($RAY_ADDRESS, else the cluster started on this machine), or None."""
    if supported():
        try:
            from ray._private.services import get_ray_address_from_environment
        except ImportError:
            pass
        else:
            try:
                return get_ray_address_from_environment("auto", None)
            except ConnectionError:
                return None
    return os.environ.get("RAY_ADDRESS") or None


def enable_token_auth() -> bool:
    """Turn on token authentication for this process as Ray's CLI does when a token exists; False where unsupported."""
    if not supported():
        return False
    try:
        from ray._private.authentication.authentication_token_setup import maybe_enable_token_auth_if_token_available
    except ImportError:  # a Ray without token authentication
        return False
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    return True
