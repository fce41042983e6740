"""Fixtures shared by the overlay's tests.

The overlay ``py/torch_tensorrt/dynamo/utils.py`` is loaded from its file under a name of its
own (``benchmarks.harness.load_overlay``, the benchmarks' loader), because the real ``torch_tensorrt`` package
(which needs TensorRT) cannot be imported here, and the overlay must run with torch alone.
"""

from __future__ import annotations

from types import ModuleType
from typing import Iterator

import pytest

from benchmarks.harness import load_overlay


@pytest.fixture
def overlay() -> Iterator[ModuleType]:
    """The overlay module, with the cached malloc_trim lookup cleared before and after."""
    module = load_overlay()
    module._glibc_malloc_trim.cache_clear()
    yield module
    module._glibc_malloc_trim.cache_clear()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Start every test without the trimming variable, whatever the caller's shell set."""
    monkeypatch.delenv("TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM", raising=False)
