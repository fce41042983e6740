"""Placeholder classes for the names of TensorRT: any attribute of one is another placeholder."""

from __future__ import annotations

from typing import Any, Dict


class _PlaceholderType(type):
    """The type of placeholders: asked for an attribute, a placeholder gives another one."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}")


class Placeholder(metaclass=_PlaceholderType):
    """Base of the placeholders: called with any arguments (``trt.Logger(...)``), it does nothing."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass


_made: Dict[str, type] = {}


def placeholder(qualname: str) -> Any:
    """The placeholder class named ``qualname``: the same class each time it is asked for.

    A class, so that upstream can subclass it (its plugins and loggers derive from TensorRT's
    classes) and name it in annotations and ``isinstance`` checks.
    """
    if qualname not in _made:
        namespace = {"__qualname__": qualname, "__module__": "tensorrt"}
        _made[qualname] = _PlaceholderType(qualname.rsplit(".", 1)[-1], (Placeholder,), namespace)
    return _made[qualname]
