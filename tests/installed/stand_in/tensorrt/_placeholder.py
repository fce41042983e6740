"""Placeholder classes: any attribute of one is another, and they can be subclassed and called."""

from __future__ import annotations

from typing import Any, Dict, Tuple


class _PlaceholderMeta(type):
    """Metaclass of placeholders: class attributes, ``|``, iteration and ``[]`` all work."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}")

    def __or__(cls, other: object) -> Any:
        return cls

    __ror__ = __or__

    def __getitem__(cls, key: object) -> Any:
        return placeholder(f"{cls.__qualname__}[{key!r}]")

    def __iter__(cls) -> Any:
        return iter(())

    def __int__(cls) -> int:
        return 0

    def __index__(cls) -> int:
        return 0


class Placeholder(metaclass=_PlaceholderMeta):
    """Base of every placeholder; instances hand out placeholders for attributes too."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return placeholder(f"{type(self).__qualname__}().{name}")

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return placeholder(f"{type(self).__qualname__}()()")()


_made: Dict[str, type] = {}


def placeholder(qualname: str) -> Any:
    """The placeholder class named ``qualname`` (the same class each time it is asked for)."""
    if qualname not in _made:
        namespace: Dict[str, Any] = {"__qualname__": qualname, "__module__": "tensorrt"}
        bases: Tuple[type, ...] = (Placeholder,)
        _made[qualname] = _PlaceholderMeta(qualname.rsplit(".", 1)[-1], bases, namespace)
    return _made[qualname]
