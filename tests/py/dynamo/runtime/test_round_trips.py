"""Round trips of a compiled module with the installed ``torch_tensorrt`` (marked ``gpu``).

These need a CUDA device and an installed ``torch_tensorrt`` with its TensorRT (the GPU
machine: ``PYTHONPATH`` naming the wheel's and TensorRT-RTX's folders, as the compile
benchmark sets it); elsewhere they skip with the reason. They compile a small fp16 MLP and
check what a user does with the result after the compile: run it, save and load it in a fresh
process (exported program; TorchScript for the C++ runtime), pickle and deep-copy it, refit it
with new weights, and compile again from the engine cache. Run under the official wheel too,
they show which round trips upstream's own code passes.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required"),
]

KEEP_VAR = "TORCHTRT_KEEP_SERIALIZED_ENGINE"
WIDTH = 256

# Round trips that failed on the GPU machine with the fork's 2.11.0 RTX wheel (+memfix1.5, H100,
# 2026-12-05), each in upstream's code that the fork does not replace; the official wheel's run
# of this file is still to be made. Marked strict: a round trip that starts to pass fails the
# run, so that its mark is removed.
UPSTREAM_STATE_DICT = (
    "TorchTensorRTModule.get_extra_state asks `if self.engine:`, and the TorchScript engine "
    "class has no __len__ or __bool__ (NotImplementedError)"
)
UPSTREAM_PYTHON_PICKLE = (
    "PythonTorchTensorRTModule.__getstate__ keeps its CUDA stream: cannot pickle 'Stream'"
)
UPSTREAM_PYTHON_EXPORT = (
    "torch_tensorrt.save of a PythonTorchTensorRTModule traces into the engine with fake "
    "tensors (Cannot access data pointer of Tensor)"
)


def known_failure(request: pytest.FixtureRequest, reason: str) -> None:
    request.applymarker(pytest.mark.xfail(reason=reason, strict=True))


@pytest.fixture(scope="module")
def torch_tensorrt() -> Any:
    """The installed ``torch_tensorrt``; the module skips where it cannot be imported."""
    try:
        import torch_tensorrt
    except Exception as error:  # without TensorRT it fails in several ways, not only ImportError
        pytest.skip(f"torch_tensorrt cannot be imported here: {error}")
    return torch_tensorrt


def mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    with torch.device("cuda"):
        layers = [torch.nn.Linear(WIDTH, WIDTH, dtype=torch.float16) for _ in range(3)]
    return torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2])


@pytest.fixture(scope="module")
def inputs() -> Tuple[torch.Tensor]:
    torch.manual_seed(1)
    return (torch.randn(4, WIDTH, dtype=torch.float16, device="cuda"),)


def compile_mlp(torch_tensorrt: Any, inputs: Tuple[torch.Tensor], **options: Any) -> Any:
    model = mlp(0).eval()
    return torch_tensorrt.compile(
        model, ir="dynamo", inputs=list(inputs), min_block_size=1, **options
    )


def engines(compiled: torch.nn.Module) -> List[torch.nn.Module]:
    """The compiled module's TensorRT submodules (either runtime's)."""
    names = ("TorchTensorRTModule", "PythonTorchTensorRTModule")
    return [m for m in compiled.modules() if type(m).__name__ in names]


def close(output: torch.Tensor, expected: torch.Tensor) -> bool:
    return bool(torch.allclose(output.float(), expected.float(), atol=2e-2, rtol=2e-2))


@pytest.fixture(scope="module", params=["cpp", "python"])
def compiled(request: Any, torch_tensorrt: Any, inputs: Tuple[torch.Tensor]) -> Iterator[Any]:
    python = request.param == "python"
    module = compile_mlp(torch_tensorrt, inputs, use_python_runtime=python)
    module.runtime = request.param
    yield module


def test_the_compiled_module_computes_the_models_output(
    compiled: Any, inputs: Tuple[torch.Tensor]
) -> None:
    with torch.no_grad():
        expected = mlp(0)(*inputs)
        assert close(compiled(*inputs), expected)
    assert engines(compiled), "the compile made no TensorRT module"


def test_the_cpp_module_keeps_its_live_engine_and_no_bytes(
    compiled: Any, torch_tensorrt: Any
) -> None:
    if compiled.runtime != "cpp":
        pytest.skip("the C++ runtime's module")
    conversion = torch_tensorrt.dynamo.conversion._conversion
    if not hasattr(conversion, "_cpp_engine_from_info"):
        pytest.skip("the official wheel, or a release the engine-bytes fix does not reach")
    for engine in engines(compiled):
        assert engine.engine is not None
        assert engine.serialized_engine is None


def test_keep_serialized_engine_keeps_upstreams_bytes(
    torch_tensorrt: Any, inputs: Tuple[torch.Tensor], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEEP_VAR, "1")
    module = compile_mlp(torch_tensorrt, inputs)
    for engine in engines(module):
        assert isinstance(engine.serialized_engine, (bytes, bytearray))
    with torch.no_grad():
        assert close(module(*inputs), mlp(0)(*inputs))


def run_fresh(script: str, tmp_path: Path) -> None:
    """Run ``script`` in a fresh Python with this process's environment (the same wheel)."""
    path = tmp_path / "fresh.py"
    path.write_text(textwrap.dedent(script))
    done = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, env=dict(os.environ)
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize("output_format", ["exported_program", "torchscript"])
def test_saved_and_loaded_in_a_fresh_process_gives_the_same_outputs(
    compiled: Any,
    torch_tensorrt: Any,
    inputs: Tuple[torch.Tensor],
    output_format: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    if output_format == "torchscript" and compiled.runtime != "cpp":
        pytest.skip("TorchScript holds the C++ runtime's engines only")
    if compiled.runtime == "python":
        known_failure(request, UPSTREAM_PYTHON_EXPORT)
    suffix = ".ep" if output_format == "exported_program" else ".ts"
    saved, expected_file = tmp_path / f"module{suffix}", tmp_path / "expected.pt"
    torch_tensorrt.save(compiled, str(saved), output_format=output_format, arg_inputs=list(inputs))
    with torch.no_grad():
        torch.save({"inputs": inputs, "expected": compiled(*inputs)}, expected_file)
    run_fresh(
        f"""
        import torch, torch_tensorrt
        data = torch.load({str(expected_file)!r})
        loaded = torch_tensorrt.load({str(saved)!r})
        module = loaded.module() if hasattr(loaded, "module") else loaded
        with torch.no_grad():
            output = module(*data["inputs"])
        output = output[0] if isinstance(output, (tuple, list)) else output
        assert torch.equal(output, data["expected"]), (output - data["expected"]).abs().max()
        """,
        tmp_path,
    )


def test_pickle_and_deepcopy_give_the_same_outputs(
    compiled: Any, inputs: Tuple[torch.Tensor], request: pytest.FixtureRequest
) -> None:
    if compiled.runtime == "python":
        known_failure(request, UPSTREAM_PYTHON_PICKLE)
    with torch.no_grad():
        expected = compiled(*inputs)
        assert torch.equal(copy.deepcopy(compiled)(*inputs), expected)
        assert torch.equal(pickle.loads(pickle.dumps(compiled))(*inputs), expected)


def test_state_dict_holds_the_engine(compiled: Any, request: pytest.FixtureRequest) -> None:
    if compiled.runtime == "cpp":
        known_failure(request, UPSTREAM_STATE_DICT)
    state: Dict[str, Any] = compiled.state_dict()
    assert any(key.endswith(("_extra_state", "engine")) for key in state), sorted(state)


def test_refit_with_new_weights_computes_the_new_models_output(
    torch_tensorrt: Any, inputs: Tuple[torch.Tensor]
) -> None:
    module = compile_mlp(torch_tensorrt, inputs, immutable_weights=False)
    new_model = mlp(7).eval()
    exported = torch.export.export(new_model, inputs)
    refitted = torch_tensorrt.dynamo.refit_module_weights(module, exported, arg_inputs=inputs)
    with torch.no_grad():
        assert close(refitted(*inputs), new_model(*inputs))


def test_a_compile_from_the_engine_cache_gives_the_same_outputs(
    torch_tensorrt: Any, inputs: Tuple[torch.Tensor], tmp_path: Path
) -> None:
    options = dict(
        immutable_weights=False,
        cache_built_engines=True,
        reuse_cached_engines=True,
        engine_cache_dir=str(tmp_path / "cache"),
    )
    first = compile_mlp(torch_tensorrt, inputs, **options)
    second = compile_mlp(torch_tensorrt, inputs, **options)
    assert any((tmp_path / "cache").rglob("*")), "nothing was cached"
    with torch.no_grad():
        assert torch.equal(second(*inputs), first(*inputs))
        assert close(second(*inputs), mlp(0)(*inputs))
