"""Tests of the overlay's ``convert_module`` and ``release_serialized_engine`` (the engine-bytes
fix, spliced into upstream's ``dynamo/conversion/_conversion.py``).

``convert_module`` imports upstream's names when it runs; upstream's package cannot be imported
here (it needs TensorRT), so stand-in modules take those names: an interpreter result with the
fields of 2.11's, and runtime module classes that record how they were made and, like the C++
runtime's, set up a live engine unless ``lazy_engine_init`` is set. The code under test is the
overlay's, unchanged.
"""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any, Dict, List, NamedTuple, Optional

import pytest

KEEP_VAR = "TORCHTRT_KEEP_SERIALIZED_ENGINE"


class Interpreted(NamedTuple):
    """The fields of 2.11's ``SerializedInterpreterResult``."""

    serialized_engine: bytes
    input_names: tuple
    output_names: tuple
    weight_name_map: Optional[Dict[str, Any]]
    requires_output_allocator: bool
    symbolic_shape_expressions: Dict[str, Any]


class Settings(SimpleNamespace):
    """Stands in for ``CompilationSettings``: the two fields ``convert_module`` reads."""

    def __init__(self, use_python_runtime: bool = False, lazy_engine_init: bool = False) -> None:
        super().__init__(use_python_runtime=use_python_runtime, lazy_engine_init=lazy_engine_init)


class RuntimeModule:
    """Stands in for a runtime module: keeps what it was made with; sets up an engine unless
    lazy, as both of upstream's runtime modules do in ``__init__``."""

    def __init__(self, *, serialized_engine: bytes, name: str, settings: Settings, **kwargs: Any):
        self.made_with = dict(kwargs, serialized_engine=serialized_engine, name=name)
        self.serialized_engine: Optional[bytes] = serialized_engine
        self.name = name
        self.engine = None if settings.lazy_engine_init else object()


class CppRuntimeModule(RuntimeModule):
    pass


class PythonRuntimeModule(RuntimeModule):
    pass


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Stand-ins for the upstream modules ``convert_module`` imports, in ``sys.modules``."""
    calls: List[Any] = []
    result = Interpreted(b"engine" * 1000, ("x",), ("y",), {"w": "l.weight"}, True, {"y": []})

    def interpret_module_to_result(module: Any, inputs: Any, settings: Any, **kwargs: Any) -> Any:
        calls.append((module, inputs, settings, kwargs))
        return result

    features = SimpleNamespace(torch_tensorrt_runtime=True)
    modules = {
        "torch_tensorrt": ModuleType("torch_tensorrt"),
        "torch_tensorrt._features": SimpleNamespace(ENABLED_FEATURES=features),
        "torch_tensorrt.dynamo": SimpleNamespace(
            _settings=SimpleNamespace(CompilationSettings=Settings)
        ),
        "torch_tensorrt.dynamo._settings": SimpleNamespace(CompilationSettings=Settings),
        "torch_tensorrt.dynamo.conversion": SimpleNamespace(
            _conversion=SimpleNamespace(interpret_module_to_result=interpret_module_to_result)
        ),
        "torch_tensorrt.dynamo.runtime": SimpleNamespace(
            TorchTensorRTModule=CppRuntimeModule, PythonTorchTensorRTModule=PythonRuntimeModule
        ),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv(KEEP_VAR, raising=False)
    return SimpleNamespace(calls=calls, result=result, features=features)


def test_the_cpp_runtime_module_keeps_its_engine_but_not_its_bytes(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    settings = Settings()
    compiled = overlay.convert_module("gm", ["input"], settings, "_run_on_acc_0", engine_cache="c")
    assert isinstance(compiled, CppRuntimeModule)
    assert compiled.engine is not None and compiled.serialized_engine is None
    assert upstream.calls == [("gm", ["input"], settings, {"engine_cache": "c"})]


def test_the_runtime_module_gets_every_field_of_the_interpreter_result(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    compiled = overlay.convert_module("gm", [], Settings(), "sub")
    result = upstream.result
    assert compiled.made_with == {
        "serialized_engine": result.serialized_engine,
        "input_binding_names": list(result.input_names),
        "output_binding_names": list(result.output_names),
        "name": "sub",
        "weight_name_map": result.weight_name_map,
        "requires_output_allocator": result.requires_output_allocator,
        "symbolic_shape_expressions": result.symbolic_shape_expressions,
    }


@pytest.mark.parametrize(
    "settings, runtime_available, expected_class",
    [
        pytest.param(Settings(use_python_runtime=True), True, PythonRuntimeModule, id="asked-for"),
        pytest.param(Settings(), False, PythonRuntimeModule, id="no-cpp-runtime"),
        pytest.param(Settings(lazy_engine_init=True), True, CppRuntimeModule, id="lazy-engine"),
    ],
)
def test_a_module_that_needs_its_bytes_keeps_them(
    overlay: ModuleType,
    upstream: SimpleNamespace,
    settings: Settings,
    runtime_available: bool,
    expected_class: type,
) -> None:
    upstream.features.torch_tensorrt_runtime = runtime_available
    compiled = overlay.convert_module("gm", [], settings)
    assert type(compiled) is expected_class
    assert compiled.serialized_engine == upstream.result.serialized_engine


def test_keep_variable_keeps_the_bytes(
    overlay: ModuleType, upstream: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEEP_VAR, "1")
    compiled = overlay.convert_module("gm", [], Settings())
    assert compiled.engine is not None
    assert compiled.serialized_engine == upstream.result.serialized_engine


def test_settings_default_to_compilation_settings(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    overlay.convert_module("gm", [])
    assert isinstance(upstream.calls[0][2], Settings)


@pytest.mark.parametrize(
    "engine, serialized, keep, dropped",
    [
        pytest.param(object(), b"e", None, True, id="live-engine"),
        pytest.param(None, b"e", None, False, id="no-engine-yet"),
        pytest.param(object(), None, None, False, id="nothing-to-drop"),
        pytest.param(object(), b"e", "1", False, id="kept-by-variable"),
        pytest.param(object(), b"e", "0", True, id="variable-0"),
    ],
)
def test_release_serialized_engine(
    overlay: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    engine: Any,
    serialized: Optional[bytes],
    keep: Optional[str],
    dropped: bool,
) -> None:
    if keep is None:
        monkeypatch.delenv(KEEP_VAR, raising=False)
    else:
        monkeypatch.setenv(KEEP_VAR, keep)
    module = SimpleNamespace(engine=engine, serialized_engine=serialized, name="m")
    assert overlay.release_serialized_engine(module) is dropped
    assert module.serialized_engine == (None if dropped else serialized)
