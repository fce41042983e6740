"""Tests of the overlay's ``convert_module`` and its helpers (the engine-bytes fix, spliced into
upstream's ``dynamo/conversion/_conversion.py``).

``convert_module`` imports upstream's names when it runs; upstream's package cannot be imported
here (it needs TensorRT), so stand-in modules take those names: an interpreter whose ``run``
deserializes the builder's output through its module's ``trt`` global and whose result is
serialized again, as 2.11's ``TRTInterpreter.run`` and ``interpret_module_to_result`` do;
runtime module classes that, like upstream's, set up an engine in ``__init__`` unless
``lazy_engine_init`` is set; and ``torch.classes.tensorrt.Engine``, which takes the engine's
information as TorchScript does, one item at a time. The code under test is the overlay's,
unchanged.
"""

from __future__ import annotations

import io
import sys
from types import ModuleType, SimpleNamespace
from typing import Any, Dict, Iterable, List, NamedTuple, Optional

import pytest
import torch

KEEP_VAR = "TORCHTRT_KEEP_SERIALIZED_ENGINE"
ENGINE_IDX = 3


class Interpreted(NamedTuple):
    """The fields of 2.11's ``SerializedInterpreterResult``."""

    serialized_engine: bytes
    input_names: tuple
    output_names: tuple
    weight_name_map: Optional[Dict[str, Any]]
    requires_output_allocator: bool
    symbolic_shape_expressions: Dict[str, Any]


class Settings(SimpleNamespace):
    """Stands in for ``CompilationSettings``: the fields ``convert_module`` reads."""

    def __init__(self, use_python_runtime: bool = False, lazy_engine_init: bool = False) -> None:
        super().__init__(
            use_python_runtime=use_python_runtime,
            lazy_engine_init=lazy_engine_init,
            enable_cross_compile_for_windows=False,
        )


class GpuEngine:
    """An engine deserialized on the "GPU" from ``serialized``."""

    made: List[bytes] = []

    def __init__(self, serialized: Any) -> None:
        self.serialized = bytes(serialized)
        GpuEngine.made.append(self.serialized)

    def serialize(self) -> bytes:
        return self.serialized

    def create_serialization_config(self) -> str:
        return "config"


class Runtime:
    """Stands in for ``trt.Runtime``."""

    def __init__(self, logger: Any) -> None:
        self.logger = logger

    def deserialize_cuda_engine(self, serialized: Any) -> GpuEngine:
        return GpuEngine(serialized)


class TakenEngine:
    """Stands in for ``torch.classes.tensorrt.Engine``: takes the items one by one, as
    TorchScript's ``createGenericList`` does, noting how many copies of the engine's bytes
    were alive (in the caller's list) when each item was taken."""

    def __init__(self, info: Iterable[Any]) -> None:
        self.source = info
        self.items: List[Any] = []
        for item in info:
            self.items.append(bytes(item) if isinstance(item, bytes) else item)
        self.still_listed = getattr(info, "items", info)


class RuntimeModule:
    """Stands in for a runtime module: keeps what it was made with; sets up an engine unless
    lazy or given no bytes, as upstream's runtime modules do in ``__init__``."""

    def __init__(
        self, *, serialized_engine: Optional[bytes], name: str, settings: Settings, **kwargs: Any
    ):
        self.made_with = dict(kwargs, serialized_engine=serialized_engine, name=name)
        self.serialized_engine: Optional[bytes] = serialized_engine
        self.name = name
        self.engine: Any = None
        if serialized_engine and not settings.lazy_engine_init:
            self.engine = TakenEngine(self._pack_engine_info())

    def _pack_engine_info(self) -> List[Any]:
        assert self.serialized_engine
        info: List[Any] = ["abi", self.name, "device", None, "x", "y", "0", "meta", "p", "0", "0"]
        info[ENGINE_IDX] = self.serialized_engine
        return info


class CppRuntimeModule(RuntimeModule):
    pass


class PythonRuntimeModule(RuntimeModule):
    pass


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Stand-ins for the upstream modules ``convert_module`` imports, in ``sys.modules``."""
    calls: List[Any] = []
    built = b"engine" * 1000
    interpreter = ModuleType("torch_tensorrt.dynamo.conversion._TRTInterpreter")
    interpreter.trt = SimpleNamespace(Runtime=Runtime)  # type: ignore[attr-defined]
    seen: Dict[str, Any] = {}

    def interpret_module_to_result(module: Any, inputs: Any, settings: Any, **kwargs: Any) -> Any:
        """2.11's steps: run() deserializes the builder's output through its module's trt,
        the result is serialized again and copied through a BytesIO."""
        calls.append((module, inputs, settings, kwargs))
        engine = interpreter.trt.Runtime("logger").deserialize_cuda_engine(bytearray(built))
        seen["trt_during_run"] = interpreter.trt
        if kwargs.get("engine_cache") == "cache":
            seen["cache_config"] = engine.create_serialization_config()
        serialized = engine.serialize()
        with io.BytesIO() as copy:
            copy.write(serialized)
            serialized = copy.getvalue()
        return Interpreted(serialized, ("x",), ("y",), {"w": "l.weight"}, True, {"y": []})

    features = SimpleNamespace(torch_tensorrt_runtime=True)
    modules = {
        "torch_tensorrt": ModuleType("torch_tensorrt"),
        "torch_tensorrt._features": SimpleNamespace(ENABLED_FEATURES=features),
        "torch_tensorrt.dynamo": SimpleNamespace(
            _settings=SimpleNamespace(CompilationSettings=Settings)
        ),
        "torch_tensorrt.dynamo._settings": SimpleNamespace(CompilationSettings=Settings),
        "torch_tensorrt.dynamo.conversion": SimpleNamespace(
            _conversion=SimpleNamespace(interpret_module_to_result=interpret_module_to_result),
            _TRTInterpreter=interpreter,
        ),
        "torch_tensorrt.dynamo.runtime": SimpleNamespace(
            TorchTensorRTModule=CppRuntimeModule, PythonTorchTensorRTModule=PythonRuntimeModule
        ),
    }
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(
        torch, "classes", SimpleNamespace(tensorrt=SimpleNamespace(Engine=TakenEngine))
    )
    monkeypatch.delenv(KEEP_VAR, raising=False)
    GpuEngine.made = []
    return SimpleNamespace(
        calls=calls, built=built, features=features, interpreter=interpreter, seen=seen
    )


def test_the_cpp_module_gets_its_engine_from_the_builders_bytes_and_keeps_none(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    settings = Settings()
    compiled = overlay.convert_module("gm", ["input"], settings, "_run_on_acc_0", engine_cache="c")
    assert isinstance(compiled, CppRuntimeModule)
    assert compiled.serialized_engine is None
    assert compiled.engine.items[ENGINE_IDX] == upstream.built
    assert compiled.engine.items[1] == "_run_on_acc_0"
    # The bytes were taken out of the list as they were handed over: nothing else held them.
    assert compiled.engine.still_listed == []
    assert upstream.calls == [("gm", ["input"], settings, {"engine_cache": "c"})]


def test_no_engine_is_deserialized_before_the_runtime_module(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    overlay.convert_module("gm", [], Settings(use_python_runtime=True))
    assert GpuEngine.made == []  # the stand-in Python module makes none; upstream's run made one
    trt = upstream.interpreter.trt
    assert trt.Runtime is Runtime, "the interpreter's trt was not put back"
    assert upstream.seen["trt_during_run"] is not trt


def test_the_trt_global_is_put_back_when_the_compile_fails(
    overlay: ModuleType, upstream: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the build failed")

    conversion = sys.modules["torch_tensorrt.dynamo.conversion"]._conversion
    monkeypatch.setattr(conversion, "interpret_module_to_result", failing)
    trt = upstream.interpreter.trt
    with pytest.raises(ValueError, match="the build failed"):
        overlay.convert_module("gm", [], Settings())
    assert upstream.interpreter.trt is trt


def test_the_engine_cache_gets_a_real_engine(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    compiled = overlay.convert_module("gm", [], Settings(), engine_cache="cache")
    assert upstream.seen["cache_config"] == "config"
    assert GpuEngine.made == [upstream.built]
    assert compiled.engine.items[ENGINE_IDX] == upstream.built


def test_the_runtime_module_gets_every_field_of_the_interpreter_result(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    compiled = overlay.convert_module("gm", [], Settings(use_python_runtime=True), "sub")
    assert compiled.made_with == {
        "serialized_engine": upstream.built,
        "input_binding_names": ["x"],
        "output_binding_names": ["y"],
        "name": "sub",
        "weight_name_map": {"w": "l.weight"},
        "requires_output_allocator": True,
        "symbolic_shape_expressions": {"y": []},
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
    assert compiled.serialized_engine == upstream.built


def test_keep_variable_keeps_upstreams_steps_and_the_bytes(
    overlay: ModuleType, upstream: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEEP_VAR, "1")
    compiled = overlay.convert_module("gm", [], Settings())
    assert GpuEngine.made == [upstream.built]  # run deserialized, as upstream's does
    assert compiled.engine is not None
    assert compiled.serialized_engine == upstream.built


def test_settings_default_to_compilation_settings(
    overlay: ModuleType, upstream: SimpleNamespace
) -> None:
    overlay.convert_module("gm", [])
    assert isinstance(upstream.calls[0][2], Settings)


def test_the_builders_output_is_handed_on_once(overlay: ModuleType) -> None:
    built = bytearray(b"built")
    output = overlay._BuilderOutput(built, Runtime("logger"))
    assert output.serialize() is built
    with pytest.raises(RuntimeError, match=KEEP_VAR):
        output.serialize()
    with pytest.raises(AttributeError):
        output.create_serialization_config()


def test_a_torch_that_iterates_twice_is_refused(overlay: ModuleType) -> None:
    class TwiceEngine:
        def __init__(self, info: Iterable[Any]) -> None:
            list(info)
            list(info)

    given = overlay._ItemsGivenUp(["a", b"engine"])
    with pytest.raises(RuntimeError, match="twice"):
        TwiceEngine(given)


def test_a_torch_that_takes_only_lists_gets_the_list(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    class ListOnlyEngine:
        def __init__(self, info: Any) -> None:
            if not isinstance(info, list):
                raise TypeError("expected a list")
            self.items = list(info)

    classes = SimpleNamespace(tensorrt=SimpleNamespace(Engine=ListOnlyEngine))
    monkeypatch.setattr(torch, "classes", classes)
    engine = overlay._cpp_engine_from_info(["a", b"engine"])
    assert engine.items == ["a", b"engine"]
