"""A stand-in for the ``tensorrt`` package, for the installed-package tests only.

TensorRT cannot be installed on the machines that run these tests, yet upstream's
``torch_tensorrt`` reads names of it at import time (base classes, enums, constants). This
package hands out a placeholder for any name asked of it, through a module-level
``__getattr__`` (PEP 562), so it needs no list of names per release. As in TensorRT itself,
the package's names are those of its ``tensorrt.tensorrt`` submodule. Nothing here builds an
engine: code that reached TensorRT's real work would get placeholders back, not results.

It is never installed or shipped; the tests put its folder on ``sys.path`` of a subprocess.
"""

from __future__ import annotations

from typing import Any

from . import tensorrt
from .tensorrt import __version__

__all__ = ["__version__", "tensorrt"]


def __getattr__(name: str) -> Any:
    return getattr(tensorrt, name)
