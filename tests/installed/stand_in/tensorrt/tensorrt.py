"""``tensorrt.tensorrt``, where TensorRT's bindings live: a placeholder for every name."""

from __future__ import annotations

from typing import Any

from ._placeholder import placeholder

# A TensorRT version at least as new as any supported release asks for.
__version__ = "11.99.0"


def __getattr__(name: str) -> Any:
    # Special names stay missing, as on any module; "tensorrt_rtx" too, so that upstream takes
    # this for standard TensorRT rather than the RTX variant.
    if name.startswith("__") or name == "tensorrt_rtx":
        raise AttributeError(f"module 'tensorrt' has no attribute {name!r}")
    return placeholder(f"tensorrt.{name}")
