"""Fixtures shared by the overlay's tests.

The overlay ``py/torch_tensorrt/dynamo/utils.py`` is loaded from its file under a name of its
own, because the real ``torch_tensorrt`` package (which needs TensorRT) cannot be imported
here, and the overlay must run with torch alone.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Iterator

import pytest

OVERLAY_PATH = Path(__file__).resolve().parents[2] / "py" / "torch_tensorrt" / "dynamo" / "utils.py"
OVERLAY_MODULE_NAME = "torchtrt_fork_overlay_utils"


def load_overlay() -> ModuleType:
    """Import the overlay file once per process, under :data:`OVERLAY_MODULE_NAME`."""
    if OVERLAY_MODULE_NAME in sys.modules:
        return sys.modules[OVERLAY_MODULE_NAME]
    spec = importlib.util.spec_from_file_location(OVERLAY_MODULE_NAME, OVERLAY_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[OVERLAY_MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module


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
