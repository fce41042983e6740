"""The overlay: read and parsed once for the build, or imported on its own for tests.

The overlay is not an installed module: the build splices it into upstream's file, from the
one parsed object :func:`read_overlay` returns (the splice, the call-site check and the
signature check share it). Tests and benchmarks import it from its path instead, with
:func:`load_overlay`; it needs torch, not TensorRT. Importing this module imports neither.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from patched_wheel import PatchError
from patched_wheel.paths import DEFAULT_OVERLAY
from patched_wheel.splice import OverlayParts, parse_overlay

__all__ = ["DEFAULT_OVERLAY", "OVERLAY_MODULE_NAME", "load_overlay", "read_overlay"]

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


def read_overlay(path: Path = DEFAULT_OVERLAY) -> OverlayParts:
    """The overlay at ``path``, parsed once.

    Raises:
        PatchError: If it cannot be read, or has a statement the splice has no rule for.
    """
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PatchError(
            f"cannot read the overlay {str(path)!r} ({error}); check the path"
        ) from None
    return parse_overlay(source)
