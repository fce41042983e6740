"""The overlay: read and parsed once for the build, or imported on its own for tests.

The overlay is not an installed module: the build splices it into upstream's file, from the
one parsed object :func:`read_overlay` returns (the splice, the call-site check and the
signature check share it). Tests and benchmarks import it from its path instead, with
:func:`load_overlay`; it needs torch, not TensorRT. Importing this module imports neither.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from patched_wheel import PatchError
from patched_wheel.paths import DEFAULT_OVERLAY
from patched_wheel.splice import OverlayParts, parse_overlay

__all__ = [
    "OVERLAY_MODULE_NAME",
    "load_overlay",
    "overlay_from_bytes",
    "read_overlay",
]

# The name the overlay is imported under: not torch_tensorrt's, which needs TensorRT.
OVERLAY_MODULE_NAME = "torchtrt_fork_overlay_utils"


def load_overlay(path: Path = DEFAULT_OVERLAY) -> ModuleType:
    """Import the overlay once per process (later calls return the same module)."""
    loaded = sys.modules.get(OVERLAY_MODULE_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(OVERLAY_MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise PatchError(f"cannot import the overlay {str(path)!r}; check that the file exists")
    module = importlib.util.module_from_spec(spec)
    sys.modules[OVERLAY_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[OVERLAY_MODULE_NAME]
        raise
    return module


def overlay_from_bytes(data: bytes, what: str) -> OverlayParts:
    """The overlay whose file holds ``data``, parsed, with the sha256 of those bytes.

    Line ends are read as a text file reads them (``\r\n`` and ``\r`` become ``\n``), so
    that a checkout with Windows line ends splices the same text.

    Raises:
        PatchError: If ``data`` is not UTF-8, or has a statement the splice has no rule for.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PatchError(f"cannot read the overlay {what} ({error}); it must be UTF-8") from None
    parts = parse_overlay(text.replace("\r\n", "\n").replace("\r", "\n"))
    return dataclasses.replace(parts, sha256=hashlib.sha256(data).hexdigest())


def read_overlay(path: Path = DEFAULT_OVERLAY) -> OverlayParts:
    """The overlay at ``path``, parsed once, with the sha256 of its bytes.

    Raises:
        PatchError: If it cannot be read, or has a statement the splice has no rule for.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise PatchError(
            f"cannot read the overlay {str(path)!r} ({error}); check the path"
        ) from None
    return overlay_from_bytes(data, repr(str(path)))
