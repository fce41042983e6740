"""Build patched ``torch_tensorrt`` wheels from the official releases.

The build takes an official ``torch-tensorrt`` wheel (the *base*), splices the fork's overlay
``py/torch_tensorrt/dynamo/utils.py`` into the base's ``torch_tensorrt/dynamo/utils.py``,
gives the result a local version label, and writes a new wheel whose RECORD is computed
afresh. Every other file of the base is copied byte for byte.

Modules, by role:

* :mod:`patched_wheel.splice`: the pure splice of two Python sources, and its checks;
* :mod:`patched_wheel.wheelfile`: the one path that reads, verifies and writes wheels;
* :mod:`patched_wheel.callsites`: the calls of replaced functions, bound to the overlay;
* :mod:`patched_wheel.lock`: the lock of the official wheels' sha256;
* :mod:`patched_wheel.base`: choosing and downloading the base wheel;
* :mod:`patched_wheel.build`: :func:`~patched_wheel.build.build_patched_wheel`;
* :mod:`patched_wheel.matrix`: the release command over the supported matrix.
"""

from __future__ import annotations

__all__ = ["PatchError"]


class PatchError(Exception):
    """A base wheel, an overlay or a setting that the build refuses.

    The message names the thing refused and says what to do. It is the only exception type
    the build raises on purpose; the command line catches it once and exits with status 1.
    """
