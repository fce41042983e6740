"""Tests of the overlay's ``prepare_inputs``: the caller's tensors are described, not copied.

``torch_tensorrt.Input`` cannot be imported without TensorRT, so a stand-in module takes its
name (``torch_tensorrt._Input``), with an ``Input`` whose ``from_tensor`` keeps the contract of
upstream's (2.10-2.14): it refuses a tensor that is neither contiguous nor channels-last unless
the check is off, records the layout, and keeps the tensor it was given.

Behaviour is compared with upstream's own function, read from the official 2.10 and 2.11
wheels when the test runs (nothing of it is kept here) and run against the same stand-in.
"""

from __future__ import annotations

import ast
import collections
import inspect
import sys
import warnings
import zipfile
from types import ModuleType
from typing import Any, Callable, Dict, Sequence

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily

MiB = 1024 * 1024


class StandInInput:
    """Stands for ``torch_tensorrt.Input``, as far as ``prepare_inputs`` uses it."""

    def __init__(self, shape: torch.Size, dtype: torch.dtype, layout: Any, tensor: Any) -> None:
        self.shape = shape
        self.dtype = dtype
        self.format = layout
        self.torch_tensor = tensor

    @classmethod
    def from_tensor(cls, t: torch.Tensor, disable_memory_format_check: bool = False) -> Any:
        contiguous = t.is_contiguous()
        if not (disable_memory_format_check or contiguous):
            if not t.is_contiguous(memory_format=torch.channels_last):
                raise ValueError("stand-in Input: neither contiguous nor channels-last")
        layout = (
            torch.contiguous_format
            if disable_memory_format_check or contiguous
            else torch.channels_last
        )
        return cls(t.shape, t.dtype, layout, t)


@pytest.fixture
def stand_in_input(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch_tensorrt._Input.Input`` is the stand-in while the test runs."""
    module = ModuleType("torch_tensorrt._Input")
    module.Input = StandInInput  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch_tensorrt._Input", module)


PrepareInputs = Callable[..., Any]


@pytest.fixture
def fork_prepare_inputs(overlay: ModuleType, stand_in_input: None) -> PrepareInputs:
    return overlay.prepare_inputs  # type: ignore[no-any-return]


def upstream_function(release: str) -> PrepareInputs:
    """Upstream's ``prepare_inputs`` of ``release``, from the official wheel, on the stand-in."""
    from tests.patched_wheel.wheel_helpers import (
        fetch,  # the tests' one way to an official wheel (lock-checked)
    )

    with zipfile.ZipFile(fetch(release)) as wheel:
        source = wheel.read("torch_tensorrt/dynamo/utils.py").decode("utf-8")
    definition = next(
        node
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef) and node.name == "prepare_inputs"
    )
    namespace: Dict[str, Any] = {
        "Any": Any,
        "Dict": Dict,
        "Sequence": Sequence,
        "Input": StandInInput,
        "torch": torch,
        "unset_fake_temporarily": unset_fake_temporarily,
    }
    code = compile(ast.Module(body=[definition], type_ignores=[]), f"{release}:utils.py", "exec")
    exec(code, namespace)
    return namespace["prepare_inputs"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module", params=["2.10.0", "2.11.0"])
def upstream_prepare_inputs(request: pytest.FixtureRequest) -> PrepareInputs:
    return upstream_function(request.param)


Point = collections.namedtuple("Point", ["x", "y"])


def example_inputs() -> Dict[str, Any]:
    """Inputs of every kind the compile entry points pass: the same values, fresh, each call."""
    numbers = torch.Generator().manual_seed(0)
    base = torch.arange(48, dtype=torch.float32).reshape(4, 12)
    return {
        "contiguous": torch.randn(2, 3, generator=numbers),
        "parameter": torch.nn.Parameter(torch.randn(4, 4, generator=numbers)),
        "channels-last": torch.randn(2, 3, 4, 5, generator=numbers).to(
            memory_format=torch.channels_last
        ),
        "transposed": base.t(),
        "strided-slice": base[:, ::2],
        "expanded": torch.randn(3, generator=numbers).expand(4, 3),
        "0-dim": torch.tensor(2.5),
        "empty": torch.empty(0, 3),
        "int": 3,
        "float": 0.5,
        "bool": True,
        "none": None,
        "nested": [torch.ones(2), (torch.zeros(3), {"k": torch.ones(1, 2)}), [], ()],
        "namedtuple": Point(torch.ones(2), 1),
        "ordered-dict": collections.OrderedDict(b=torch.ones(2), a=[torch.zeros(1)]),
    }


def described(result: Any) -> Any:
    """The result as plain data: containers by type, each Input by what it records."""
    if isinstance(result, StandInInput):
        tensor = result.torch_tensor
        return (
            "Input",
            tuple(result.shape),
            result.dtype,
            result.format,
            type(tensor),
            tensor.stride(),
            tensor.requires_grad,
            tensor.tolist(),
        )
    if isinstance(result, (list, tuple)):
        return (type(result), [described(item) for item in result])
    if isinstance(result, dict):
        return (type(result), [(key, described(value)) for key, value in result.items()])
    return result


def outcome(prepare: PrepareInputs, inputs: Any, check_off: bool) -> Any:
    try:
        return described(prepare(inputs, disable_memory_format_check=check_off))
    except ValueError as error:
        return ("ValueError", "channels-last" in str(error))


@pytest.mark.network
@pytest.mark.parametrize("check_off", [False, True], ids=["format-checked", "check-off"])
@pytest.mark.parametrize("case", list(example_inputs()))
def test_prepare_inputs_gives_upstreams_results(
    fork_prepare_inputs: PrepareInputs,
    upstream_prepare_inputs: PrepareInputs,
    case: str,
    check_off: bool,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch.tensor(tensor)'s advice to clone
        expected = outcome(upstream_prepare_inputs, example_inputs()[case], check_off)
    assert outcome(fork_prepare_inputs, example_inputs()[case], check_off) == expected


@pytest.mark.network
def test_upstream_copies_where_the_overlay_shares(
    fork_prepare_inputs: PrepareInputs, upstream_prepare_inputs: PrepareInputs
) -> None:
    """The hook of the fix: upstream's function of 2.10 and 2.11 copies a tensor input."""
    tensor = torch.randn(256, 1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        upstream = upstream_prepare_inputs(tensor)
    assert upstream.torch_tensor.data_ptr() != tensor.data_ptr()
    assert fork_prepare_inputs(tensor).torch_tensor.data_ptr() == tensor.data_ptr()


SHARED_CASES = ["contiguous", "parameter", "channels-last", "transposed", "0-dim"]


@pytest.mark.parametrize("case", SHARED_CASES)
def test_prepare_inputs_shares_the_callers_storage(
    fork_prepare_inputs: PrepareInputs, case: str
) -> None:
    tensor = example_inputs()[case]
    result = fork_prepare_inputs(tensor, disable_memory_format_check=True)
    described_tensor = result.torch_tensor
    assert described_tensor.data_ptr() == tensor.data_ptr()
    assert described_tensor.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
    assert described_tensor.stride() == tensor.stride()
    with torch.no_grad():
        tensor.fill_(7.0)
    assert bool((described_tensor == 7.0).all()), "a write to the input is not seen: a copy"


def test_prepare_inputs_shares_every_nested_tensor(fork_prepare_inputs: PrepareInputs) -> None:
    first, second, third = torch.ones(2), torch.zeros(3), torch.ones(1, 2)
    result = fork_prepare_inputs({"a": [first, (second, 4)], "b": {"c": third}})
    assert result["a"][0].torch_tensor.data_ptr() == first.data_ptr()
    assert result["a"][1][0].torch_tensor.data_ptr() == second.data_ptr()
    assert result["b"]["c"].torch_tensor.data_ptr() == third.data_ptr()
    assert type(result["a"]) is list and type(result["a"][1]) is tuple
    assert result["a"][1][1].torch_tensor.item() == 4


def test_prepare_inputs_of_a_parameter_has_no_autograd(fork_prepare_inputs: PrepareInputs) -> None:
    parameter = torch.nn.Parameter(torch.randn(3, 3))
    described_tensor = fork_prepare_inputs(parameter).torch_tensor
    assert type(described_tensor) is torch.Tensor
    assert not described_tensor.requires_grad and described_tensor.grad_fn is None
    assert parameter.requires_grad


@pytest.mark.parametrize("case", ["strided-slice", "expanded"])
def test_prepare_inputs_copies_only_a_view_with_gaps(
    fork_prepare_inputs: PrepareInputs, case: str
) -> None:
    """Such a view is copied into a compact tensor, which from_tensor accepts."""
    view = example_inputs()[case]
    described_tensor = fork_prepare_inputs(view).torch_tensor
    assert described_tensor.is_contiguous() and torch.equal(described_tensor, view)
    assert described_tensor.untyped_storage().data_ptr() != view.untyped_storage().data_ptr()


def test_prepare_inputs_keeps_an_input_and_none(fork_prepare_inputs: PrepareInputs) -> None:
    given = StandInInput(torch.Size([1]), torch.float32, torch.contiguous_format, None)
    assert fork_prepare_inputs(given) is given
    assert fork_prepare_inputs(None) is None
    assert fork_prepare_inputs([None, given]) == [None, given]


def test_prepare_inputs_refuses_another_type(fork_prepare_inputs: PrepareInputs) -> None:
    with pytest.raises(ValueError, match=r"cannot make a torch_tensorrt.Input of a 'str'"):
        fork_prepare_inputs([torch.ones(1), "text"])


def test_prepare_inputs_makes_real_tensors_in_fake_mode(fork_prepare_inputs: PrepareInputs) -> None:
    with FakeTensorMode():
        result = fork_prepare_inputs([2, 0.5])
    assert all(not isinstance(r.torch_tensor, FakeTensor) for r in result)
    assert [r.torch_tensor.item() for r in result] == [2, 0.5]


def test_prepare_inputs_signature_binds_every_release_call(overlay: ModuleType) -> None:
    """2.10 and 2.11 call it with the inputs alone, or with disable_memory_format_check=True."""
    signature = inspect.signature(overlay.prepare_inputs)
    signature.bind([torch.ones(1)])
    signature.bind([torch.ones(1)], disable_memory_format_check=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
def test_prepare_inputs_takes_no_gpu_memory(fork_prepare_inputs: PrepareInputs) -> None:
    weight = torch.nn.Parameter(torch.randn(64 * MiB, device="cuda"))  # 256 MiB
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    result = fork_prepare_inputs([weight], disable_memory_format_check=True)
    torch.cuda.synchronize()
    grew = torch.cuda.max_memory_allocated() - before
    print(f"\nprepare_inputs of a {weight.nbytes / MiB:.0f} MiB CUDA tensor: peak +{grew} bytes")
    assert grew < weight.nbytes // 2, f"GPU memory peaked {grew / MiB:.0f} MiB above the start"
    assert result[0].torch_tensor.data_ptr() == weight.data_ptr()
