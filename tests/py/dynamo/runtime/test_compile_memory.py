"""Tests of the overlay's compile-memory functions.

They run with torch alone. What a CPU-only machine lacks is mocked: the C library's
``malloc_trim`` (through ``ctypes.CDLL``), the platform name, and CUDA itself, where
:class:`FakeCudaTensor` stands in for a CUDA tensor and ``torch.cuda`` calls are recorded.
The tests that need the real thing (glibc, a GPU) skip with a reason where it is absent.
"""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import json
import logging
import os
import platform
import subprocess
import sys
import textwrap
import time
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

MiB = 1024 * 1024
GiB = 1024 * MiB
TRIM_VAR = "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"

Event = Tuple[str, int]


def is_glibc_linux() -> bool:
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


# --------------------------------------------------------------------------------------------
# malloc_trim lookup and trim_host_heap, with ctypes mocked
# --------------------------------------------------------------------------------------------


class FakeMallocTrim:
    """Stands in for the ctypes function ``malloc_trim``: records its calls."""

    def __init__(self, result: int = 1) -> None:
        self.calls: List[int] = []
        self.result = result
        self.argtypes: Optional[List[Any]] = None
        self.restype: Any = None

    def __call__(self, pad: int) -> int:
        self.calls.append(pad)
        return self.result


class FakeLibc:
    """Stands in for ``ctypes.CDLL("libc.so.6")``; without ``malloc_trim`` when it is None."""

    def __init__(self, malloc_trim: Optional[FakeMallocTrim]) -> None:
        self._malloc_trim = malloc_trim

    def __getattr__(self, name: str) -> FakeMallocTrim:
        if name == "malloc_trim" and self._malloc_trim is not None:
            return self._malloc_trim
        raise AttributeError(f"undefined symbol: {name}")


class FakeCDLL:
    """Stands in for ``ctypes.CDLL``: counts the libraries opened and can fail to open."""

    def __init__(self, libc: Optional[FakeLibc]) -> None:
        self.libc = libc
        self.opened: List[str] = []

    def __call__(self, name: str, *args: Any, **kwargs: Any) -> FakeLibc:
        self.opened.append(name)
        if self.libc is None:
            raise OSError(f"{name}: cannot open shared object file: No such file or directory")
        return self.libc


@pytest.fixture
def fake_malloc_trim(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tuple[FakeMallocTrim, FakeCDLL]]:
    """A Linux whose libc has a recording ``malloc_trim``."""
    malloc_trim = FakeMallocTrim()
    cdll = FakeCDLL(FakeLibc(malloc_trim))
    monkeypatch.setattr(overlay.platform, "system", lambda: "Linux")
    monkeypatch.setattr(overlay.ctypes, "CDLL", cdll)
    yield malloc_trim, cdll


def test_trim_host_heap_trims_by_default(
    overlay: ModuleType, fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL]
) -> None:
    malloc_trim, cdll = fake_malloc_trim
    assert TRIM_VAR not in os.environ
    overlay.trim_host_heap()
    assert malloc_trim.calls == [0]
    assert cdll.opened == ["libc.so.6"]


@pytest.mark.parametrize(
    ("value", "expected_calls"),
    [
        pytest.param("0", [], id="0-off"),
        pytest.param("false", [], id="false-off"),
        pytest.param(" OFF ", [], id="off-with-spaces"),
        pytest.param("1", [0], id="1-old-opt-in-trims"),
        pytest.param("", [0], id="empty-trims"),
    ],
)
def test_trim_host_heap_follows_the_variable(
    overlay: ModuleType,
    fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL],
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    expected_calls: List[int],
) -> None:
    malloc_trim, _ = fake_malloc_trim
    monkeypatch.setenv(TRIM_VAR, value)
    overlay.trim_host_heap()
    assert malloc_trim.calls == expected_calls


def test_trim_host_heap_off_does_not_even_open_libc(
    overlay: ModuleType,
    fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, cdll = fake_malloc_trim
    monkeypatch.setenv(TRIM_VAR, "0")
    overlay.trim_host_heap()
    assert cdll.opened == []


def test_trim_host_heap_nothing_released_is_not_a_warning(
    overlay: ModuleType,
    fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL],
    caplog: pytest.LogCaptureFixture,
) -> None:
    malloc_trim, _ = fake_malloc_trim
    malloc_trim.result = 0
    with caplog.at_level(logging.DEBUG):
        overlay.trim_host_heap()
    assert malloc_trim.calls == [0]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_trim_host_heap_without_malloc_trim_is_a_no_op(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cdll = FakeCDLL(FakeLibc(None))
    monkeypatch.setattr(overlay.platform, "system", lambda: "Linux")
    monkeypatch.setattr(overlay.ctypes, "CDLL", cdll)
    with caplog.at_level(logging.DEBUG):
        overlay.trim_host_heap()
    assert cdll.opened == ["libc.so.6"]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_trim_host_heap_never_raises(overlay: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    class BrokenMallocTrim(FakeMallocTrim):
        def __call__(self, pad: int) -> int:
            raise ctypes.ArgumentError("argument 1: wrong type")

    malloc_trim = BrokenMallocTrim()
    monkeypatch.setattr(overlay.platform, "system", lambda: "Linux")
    monkeypatch.setattr(overlay.ctypes, "CDLL", FakeCDLL(FakeLibc(malloc_trim)))
    overlay.trim_host_heap()  # must not raise


@pytest.mark.parametrize("system", ["Darwin", "Windows"])
def test_malloc_trim_lookup_off_linux_is_none(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, system: str
) -> None:
    cdll = FakeCDLL(FakeLibc(FakeMallocTrim()))
    monkeypatch.setattr(overlay.platform, "system", lambda: system)
    monkeypatch.setattr(overlay.ctypes, "CDLL", cdll)
    assert overlay._glibc_malloc_trim() is None
    assert cdll.opened == []


@pytest.mark.parametrize(
    "libc",
    [
        pytest.param(None, id="OSError-no-libc.so.6"),
        pytest.param(FakeLibc(None), id="AttributeError-musl-without-malloc_trim"),
    ],
)
def test_malloc_trim_lookup_failures_are_none(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, libc: Optional[FakeLibc]
) -> None:
    cdll = FakeCDLL(libc)
    monkeypatch.setattr(overlay.platform, "system", lambda: "Linux")
    monkeypatch.setattr(overlay.ctypes, "CDLL", cdll)
    assert overlay._glibc_malloc_trim() is None
    assert cdll.opened == ["libc.so.6"]


def test_malloc_trim_lookup_is_cached_and_typed(
    overlay: ModuleType, fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL]
) -> None:
    malloc_trim, cdll = fake_malloc_trim
    first = overlay._glibc_malloc_trim()
    second = overlay._glibc_malloc_trim()
    overlay.trim_host_heap()
    assert first is malloc_trim and second is malloc_trim
    assert cdll.opened == ["libc.so.6"]
    assert malloc_trim.argtypes == [ctypes.c_size_t]
    assert malloc_trim.restype is ctypes.c_int


@pytest.mark.skipif(not is_glibc_linux(), reason="glibc on Linux is required")
def test_malloc_trim_lookup_finds_glibc(overlay: ModuleType) -> None:
    malloc_trim = overlay._glibc_malloc_trim()
    assert callable(malloc_trim)
    assert malloc_trim.argtypes == [ctypes.c_size_t]
    assert malloc_trim.restype is ctypes.c_int
    assert malloc_trim(0) in (0, 1)


# --------------------------------------------------------------------------------------------
# A real trim: a burst of heap memory freed, then trim_host_heap(), in a fresh process
# --------------------------------------------------------------------------------------------

HEAP_BURST_SCRIPT = textwrap.dedent("""
    import ctypes, json, os, runpy, sys, types

    overlay = types.SimpleNamespace(**runpy.run_path(sys.argv[1]))

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    page = os.sysconf("SC_PAGE_SIZE")
    MiB = 1 << 20

    def rss():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * page

    # Freeing one mmap-ed block raises glibc's dynamic mmap threshold to its size (24 MiB),
    # so the blocks below come from the heap; the blocks kept between them stop the heap from
    # shrinking at its top. They are 256 KiB, larger than the holes that importing torch
    # leaves, so that each lands between two blocks of the burst.
    libc.free(libc.malloc(24 * MiB))
    blocks, pins = [], []
    for i in range(64):
        size = (1 + i % 8) * MiB
        block = libc.malloc(size)
        ctypes.memset(block, 1, size)
        blocks.append(block)
        pins.append(libc.malloc(256 * 1024))
    burst = sum((1 + i % 8) * MiB for i in range(64))
    for block in blocks:
        libc.free(block)
    before = rss()
    overlay.trim_host_heap()
    after = rss()
    print(json.dumps({"burst": burst, "before": before, "after": after}))
    """)


def run_heap_burst(overlay: ModuleType, trim_setting: Optional[str]) -> Dict[str, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_"))}
    env.pop(TRIM_VAR, None)
    if trim_setting is not None:
        env[TRIM_VAR] = trim_setting
    result = subprocess.run(
        [sys.executable, "-c", HEAP_BURST_SCRIPT, str(overlay.__file__)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    figures: Dict[str, int] = json.loads(result.stdout.splitlines()[-1])
    return figures


@pytest.mark.skipif(not is_glibc_linux(), reason="glibc on Linux is required")
def test_real_trim_returns_freed_heap_to_the_os(overlay: ModuleType) -> None:
    figures = run_heap_burst(overlay, None)
    burst, before, after = figures["burst"], figures["before"], figures["after"]
    # The freed burst is still resident before the trim: the test measures something.
    assert before - after > 0.9 * burst, f"trim released only {before - after} of {burst} B"


@pytest.mark.skipif(not is_glibc_linux(), reason="glibc on Linux is required")
def test_real_trim_is_skipped_when_the_variable_is_0(overlay: ModuleType) -> None:
    figures = run_heap_burst(overlay, "0")
    burst, before, after = figures["burst"], figures["before"], figures["after"]
    assert abs(before - after) < 0.05 * burst, f"RSS moved from {before} to {after} B"


# --------------------------------------------------------------------------------------------
# deallocate_module's release schedule, with CUDA tensors faked
# --------------------------------------------------------------------------------------------


class FakeCudaTensor(torch.Tensor):
    """A tensor that says it is on CUDA, holding its values on the CPU.

    Moving it to the CPU (``aten._to_copy``) logs ``("move", nbytes)`` and returns a plain CPU
    copy of its values; every other operation is refused, so the code under test can only move
    it. It stands in for what a CPU-only machine lacks, a CUDA tensor.
    """

    values: torch.Tensor
    log: List[Event]

    @staticmethod
    def __new__(cls, values: torch.Tensor, log: List[Event]) -> "FakeCudaTensor":
        strides = values.stride() if values.layout == torch.strided else None
        tensor = torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined]
            cls,
            values.size(),
            strides=strides,
            dtype=values.dtype,
            layout=values.layout,
            device="cuda",
            requires_grad=values.requires_grad,
        )
        tensor.values = values
        tensor.log = log
        return tensor  # type: ignore[no-any-return]

    @classmethod
    def __torch_dispatch__(  # type: ignore[override]
        cls, func: Any, types: Any, args: Any = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        source = args[0]
        if func is torch.ops.aten._to_copy.default and kwargs.get("device") == torch.device("cpu"):
            nbytes = source.values.nelement() * source.values.element_size()
            source.log.append(("move", nbytes))
            return source.values.clone()
        if func is torch.ops.aten.detach.default:
            return FakeCudaTensor(source.values.detach(), source.log)
        raise NotImplementedError(f"{func} is not supported by FakeCudaTensor")


@pytest.fixture
def cuda_log(overlay: ModuleType, monkeypatch: pytest.MonkeyPatch) -> List[Event]:
    """A shared log of tensor moves and ``torch.cuda.empty_cache()`` calls."""
    log: List[Event] = []
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append(("release", 0)))
    return log


def fake_cuda_module(sizes_mib: List[int], log: List[Event]) -> torch.nn.Module:
    """A module with one fp32 buffer per size, each a FakeCudaTensor of that many MiB."""
    module = torch.nn.Module()
    for index, size in enumerate(sizes_mib):
        values = torch.full((size * MiB // 4,), float(index), dtype=torch.float32)
        module.register_buffer(f"b{index}", FakeCudaTensor(values, log))
    return module


def moves_and_releases(log: List[Event]) -> List[str]:
    return [f"move {n // MiB}" if kind == "move" else "release" for kind, n in log]


@pytest.mark.parametrize(
    ("sizes_mib", "step_mib", "expected"),
    [
        pytest.param(
            [1, 1, 1, 1],
            2,
            ["move 1", "move 1", "release", "move 1", "move 1", "release"],
            id="release-once-the-step-is-reached",
        ),
        pytest.param(
            [3, 1, 1],
            2,
            ["move 3", "release", "move 1", "move 1", "release"],
            id="a-tensor-larger-than-the-step",
        ),
        pytest.param(
            [1, 1, 1],
            0,
            ["move 1", "release", "move 1", "release", "move 1", "release"],
            id="step-0-releases-before-every-tensor",
        ),
        pytest.param(
            [1, 1, 1],
            1024,
            ["move 1", "move 1", "move 1", "release"],
            id="large-step-releases-only-at-the-end",
        ),
        pytest.param(
            [2, 1, 1, 2],
            3,
            ["move 2", "move 1", "release", "move 1", "move 2", "release"],
            id="count-restarts-after-a-release",
        ),
    ],
)
def test_deallocate_module_release_schedule(
    overlay: ModuleType,
    cuda_log: List[Event],
    sizes_mib: List[int],
    step_mib: int,
    expected: List[str],
) -> None:
    module = fake_cuda_module(sizes_mib, cuda_log)
    overlay.deallocate_module(module, release_every_bytes=step_mib * MiB)
    assert moves_and_releases(cuda_log) == expected
    for index, buffer in enumerate(module.buffers()):
        assert type(buffer) is torch.Tensor and buffer.device.type == "cpu"
        assert torch.equal(buffer, torch.full_like(buffer, float(index)))


def test_deallocate_module_default_step(overlay: ModuleType, cuda_log: List[Event]) -> None:
    step_mib = overlay.DEFAULT_RELEASE_EVERY_BYTES // MiB
    module = fake_cuda_module([step_mib // 2, step_mib // 2, 1], cuda_log)
    overlay.deallocate_module(module)
    half = f"move {step_mib // 2}"
    assert moves_and_releases(cuda_log) == [half, half, "release", "move 1", "release"]


def test_deallocate_module_does_not_count_sparse_tensors(
    overlay: ModuleType, cuda_log: List[Event]
) -> None:
    module = fake_cuda_module([1], cuda_log)
    dense = torch.zeros(4 * MiB // 4)
    dense[::2] = 1.0
    sparse = dense.to_sparse()
    module.register_buffer("sparse", FakeCudaTensor(sparse, cuda_log))
    module.register_buffer("after", FakeCudaTensor(torch.zeros(MiB // 4), cuda_log))
    overlay.deallocate_module(module, release_every_bytes=2 * MiB)
    # The sparse move logs its values' size, but the schedule counts it as zero bytes:
    # after 1 MiB dense + the sparse tensor, 1 MiB < 2 MiB, so no release before "after".
    kinds = [kind for kind, _ in cuda_log]
    assert kinds == ["move", "move", "move", "release"]
    assert module.sparse.layout == torch.sparse_coo and module.sparse.device.type == "cpu"
    assert torch.equal(module.sparse.to_dense(), dense)


def test_deallocate_module_moves_parameters_and_keeps_ties(
    overlay: ModuleType, cuda_log: List[Event]
) -> None:
    shared = torch.nn.Parameter(FakeCudaTensor(torch.ones(MiB // 4), cuda_log))
    first, second = torch.nn.Module(), torch.nn.Module()
    first.weight = shared
    second.weight = shared
    frozen = torch.nn.Parameter(FakeCudaTensor(torch.ones(MiB // 4), cuda_log), requires_grad=False)
    second.frozen = frozen
    module = torch.nn.Sequential(first, second)
    overlay.deallocate_module(module, release_every_bytes=0)
    assert module[0].weight is module[1].weight
    assert [p.device.type for p in module.parameters()] == ["cpu", "cpu"]
    assert module[0].weight.requires_grad and not module[1].frozen.requires_grad
    assert moves_and_releases(cuda_log) == ["move 1", "release", "move 1", "release"]


@pytest.fixture
def cleanup_calls(overlay: ModuleType, monkeypatch: pytest.MonkeyPatch) -> List[str]:
    """Records every ``gc.collect``, ``torch.cuda.empty_cache`` and ``synchronize`` call."""
    calls: List[str] = []
    monkeypatch.setattr(overlay.gc, "collect", lambda *args: calls.append("gc.collect") or 0)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty_cache"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args: calls.append("synchronize"))
    return calls


def test_deallocate_module_on_the_cpu_returns_at_once(
    overlay: ModuleType, cleanup_calls: List[str]
) -> None:
    """The second offload (TRTInterpreter.run's) costs no collection, cache release or sync.

    The module has as many tensors as a 7B-parameter transformer (about 300); the time per
    call is printed (run with ``-s``), and bounded here only loosely, as a guard.
    """
    layers = [torch.nn.Linear(8, 8) for _ in range(148)]
    module = torch.nn.Sequential(*layers, torch.nn.BatchNorm1d(8))
    before = dict(module.state_dict(keep_vars=True))
    overlay.deallocate_module(module)
    assert cleanup_calls == []
    after = module.state_dict(keep_vars=True)
    assert after.keys() == before.keys()
    assert all(after[name] is before[name] for name in before), "a tensor was replaced"
    seconds = []
    for _ in range(11):
        began = time.perf_counter()
        overlay.deallocate_module(module)
        seconds.append(time.perf_counter() - began)
    median = sorted(seconds)[len(seconds) // 2]
    print(f"\ndeallocate_module, CPU module of {len(before)} tensors: {median * 1e3:.3f} ms")
    assert cleanup_calls == []
    assert median < 0.05, f"{median * 1e3:.1f} ms for a module with nothing to move"


def test_deallocate_module_with_one_cuda_tensor_still_cleans_up(
    overlay: ModuleType, cleanup_calls: List[str]
) -> None:
    module = torch.nn.Linear(8, 4)
    log: List[Event] = []
    module.register_buffer("on_gpu", FakeCudaTensor(torch.ones(MiB // 4), log))
    overlay.deallocate_module(module)
    assert module.on_gpu.device.type == "cpu" and torch.equal(module.on_gpu, torch.ones(MiB // 4))
    assert log == [("move", MiB)]
    assert cleanup_calls == ["gc.collect", "empty_cache"]


def test_deallocate_module_with_meta_tensors_and_none_on_cuda_returns_at_once(
    overlay: ModuleType, cleanup_calls: List[str]
) -> None:
    """A module with ``meta`` tensors (a model built without its weights) and none on CUDA:
    nothing to free, and ``tensor.to("cpu")`` of a meta tensor would fail."""
    module = torch.nn.Linear(8, 4, device="meta")
    module.register_buffer("on_cpu", torch.ones(3))
    overlay.deallocate_module(module)
    assert cleanup_calls == []
    assert module.weight.device.type == "meta" and module.on_cpu.device.type == "cpu"


def test_deallocate_module_leaves_meta_tensors_beside_cuda_ones_where_they_are(
    overlay: ModuleType, cleanup_calls: List[str]
) -> None:
    module = torch.nn.Linear(8, 4, device="meta")
    log: List[Event] = []
    module.register_buffer("on_gpu", FakeCudaTensor(torch.ones(MiB // 4), log))
    overlay.deallocate_module(module)
    assert module.weight.device.type == "meta"
    assert module.on_gpu.device.type == "cpu" and log == [("move", MiB)]
    assert cleanup_calls == ["gc.collect", "empty_cache"]


def test_deallocate_module_of_an_empty_module_returns_at_once(
    overlay: ModuleType, cleanup_calls: List[str]
) -> None:
    overlay.deallocate_module(torch.nn.ReLU())
    assert cleanup_calls == []


def test_deallocate_module_without_cuda_runs(overlay: ModuleType) -> None:
    """No mocks at all: on a machine without CUDA the real empty_cache is a no-op."""
    module = torch.nn.Linear(4, 4)
    overlay.deallocate_module(module)
    assert module.weight.device.type == "cpu"


def test_deallocate_module_rejects_a_negative_step(overlay: ModuleType) -> None:
    with pytest.raises(ValueError, match=r"^release_every_bytes must be 0 or more, got -1;"):
        overlay.deallocate_module(torch.nn.Linear(2, 2), release_every_bytes=-1)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        pytest.param((), {}, id="2.11-2.14-module-alone"),
        pytest.param((), {"delete_module": False}, id="2.8-2.10-delete_module-False"),
        pytest.param((), {"delete_module": True}, id="delete_module-True"),
    ],
)
def test_deallocate_module_accepts_every_release_call(
    overlay: ModuleType, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> None:
    module = torch.nn.Linear(2, 2)
    inspect.signature(overlay.deallocate_module).bind(module, *args, **kwargs)
    overlay.deallocate_module(module, *args, **kwargs)
    assert module.weight.device.type == "cpu"


@pytest.mark.skipif(platform.system() != "Linux", reason="Linux is required")
@pytest.mark.parametrize("nbytes", [4 * MiB + 123, 64 * MiB, MiB])
def test_advise_huge_pages_advises_whole_huge_pages_inside_the_tensor(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, nbytes: int
) -> None:
    real_madvise = overlay._libc_madvise()
    assert real_madvise is not None
    calls: List[Tuple[int, int, int]] = []

    def recording_madvise(address: int, length: int, advice: int) -> int:
        calls.append((address, length, advice))
        result: int = real_madvise(address, length, advice)
        assert result == 0, f"madvise({address:#x}, {length}, {advice}) failed"
        return result

    monkeypatch.setattr(overlay, "_libc_madvise", lambda: recording_madvise)
    tensor = torch.empty(nbytes, dtype=torch.uint8)
    overlay._advise_huge_pages(tensor)
    start, end = tensor.data_ptr(), tensor.data_ptr() + nbytes
    huge = 2 * MiB
    whole_pages = end // huge * huge - (start + huge - 1) // huge * huge
    if whole_pages <= 0:
        assert calls == []
        return
    [(address, length, advice)] = calls
    assert advice == 14
    assert address % huge == 0 and length % huge == 0
    assert start <= address and address + length <= end
    assert length == whole_pages


def test_madvise_lookup_off_linux_is_none(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    overlay._libc_madvise.cache_clear()
    monkeypatch.setattr(overlay.platform, "system", lambda: "Windows")
    try:
        assert overlay._libc_madvise() is None
        overlay._advise_huge_pages(torch.empty(8 * MiB, dtype=torch.uint8))  # a no-op
    finally:
        overlay._libc_madvise.cache_clear()


# --------------------------------------------------------------------------------------------
# release_host_and_device_memory
# --------------------------------------------------------------------------------------------


def record_release_calls(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, cuda_available: bool
) -> List[str]:
    calls: List[str] = []

    def recorder(name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: calls.append(name)

    monkeypatch.setattr(overlay.gc, "collect", recorder("gc.collect"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda_available)
    for name in ("synchronize", "empty_cache", "ipc_collect"):
        monkeypatch.setattr(torch.cuda, name, recorder(name))
    monkeypatch.setattr(overlay, "trim_host_heap", recorder("trim_host_heap"))
    overlay.release_host_and_device_memory()
    return calls


def test_release_host_and_device_memory_with_cuda(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_release_calls(overlay, monkeypatch, cuda_available=True)
    assert calls == [
        "gc.collect",
        "synchronize",
        "empty_cache",
        "ipc_collect",
        "synchronize",
        "trim_host_heap",
    ]


def test_release_host_and_device_memory_without_cuda(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = record_release_calls(overlay, monkeypatch, cuda_available=False)
    assert calls == ["gc.collect", "trim_host_heap"]


def test_release_host_and_device_memory_trims_by_default(
    overlay: ModuleType, fake_malloc_trim: Tuple[FakeMallocTrim, FakeCDLL]
) -> None:
    malloc_trim, _ = fake_malloc_trim
    overlay.release_host_and_device_memory()
    assert malloc_trim.calls == [0]


# --------------------------------------------------------------------------------------------
# The fast path's bookkeeping, with the CUDA runtime faked (this machine has no GPU)
# --------------------------------------------------------------------------------------------


class FakeCudaRuntime:
    """Stands in for ``torch.cuda.cudart()``, streams and events on a machine without CUDA.

    Page-locking records each range and refuses one that overlaps a range still locked, as
    the CUDA runtime does; ``fail_after`` makes every registration after that many fail. The
    copies themselves are real CPU copies, made at once.
    """

    def __init__(self, fail_after: Optional[int] = None) -> None:
        self.locked: Dict[int, int] = {}
        self.ever_locked: List[Tuple[int, int]] = []
        self.fail_after = fail_after

    def cudaHostRegister(self, address: int, length: int, flags: int) -> int:
        if self.fail_after is not None and len(self.ever_locked) >= self.fail_after:
            return 2  # cudaErrorMemoryAllocation
        for start, size in self.locked.items():
            if address < start + size and start < address + length:
                return 712  # cudaErrorHostMemoryAlreadyRegistered
        self.locked[address] = length
        self.ever_locked.append((address, length))
        return 0

    def cudaHostUnregister(self, address: int) -> int:
        return 0 if self.locked.pop(address, None) is not None else 713

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class FakeStream:
            def __init__(self, device: Any = None) -> None:
                pass

            def wait_stream(self, other: Any) -> None:
                pass

            def synchronize(self) -> None:
                pass

        class FakeEvent:
            def record(self, stream: Any = None) -> None:
                pass

            def synchronize(self) -> None:
                pass

        class FakeStreamContext:
            def __init__(self, stream: Any) -> None:
                pass

            def __enter__(self) -> None:
                pass

            def __exit__(self, *exc: Any) -> None:
                pass

        monkeypatch.setattr(torch.cuda, "cudart", lambda: self)
        monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
        monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: FakeStream())
        monkeypatch.setattr(torch.cuda, "stream", FakeStreamContext)


def move_with_fake_runtime(overlay: ModuleType, sources: List[torch.Tensor]) -> List[torch.Tensor]:
    """Move CPU tensors standing in for CUDA ones through the fast path, then close it."""
    mover = overlay._PinnedBounceMover.create(torch.device("cuda", 0))
    assert mover is not None
    moved = [mover.move(source) for source in sources]
    mover.close()
    return moved


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param([MiB + 3, 5 * MiB + 1, 2 * MiB], id="tensors-smaller-than-a-chunk"),
        pytest.param([40 * MiB + 7, MiB], id="a-tensor-over-several-chunks"),
    ],
)
def test_fast_path_copies_every_byte_and_unlocks_its_chunks(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, sizes: List[int]
) -> None:
    runtime = FakeCudaRuntime()
    runtime.install(monkeypatch)
    sources = [torch.randint(0, 256, (size,), dtype=torch.uint8) for size in sizes]
    moved = move_with_fake_runtime(overlay, sources)
    for source, result in zip(sources, moved):
        assert torch.equal(result, source)
    assert runtime.locked == {}, "memory left page-locked after close"
    chunk = overlay.PINNED_BOUNCE_CHUNK_BYTES
    assert [length for _, length in runtime.ever_locked] == [chunk, chunk]


@pytest.mark.parametrize("fail_after", [0, 1], ids=["first-chunk", "second-chunk"])
def test_fast_path_is_skipped_when_page_locking_fails(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, fail_after: int
) -> None:
    runtime = FakeCudaRuntime(fail_after=fail_after)
    runtime.install(monkeypatch)
    assert overlay._PinnedBounceMover.create(torch.device("cuda", 0)) is None
    assert runtime.locked == {}


def test_fast_path_is_skipped_when_turned_off(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = FakeCudaRuntime()
    runtime.install(monkeypatch)
    monkeypatch.setenv(overlay.PINNED_BOUNCE_ENV_VAR, "0")
    assert overlay._PinnedBounceMover.create(torch.device("cuda", 0)) is None
    assert runtime.ever_locked == []


def test_fast_path_copies_every_byte_with_another_chunk_size(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    runtime = FakeCudaRuntime()
    runtime.install(monkeypatch)
    sources = [torch.randint(0, 256, (size,), dtype=torch.uint8) for size in (37 * MiB + 5, MiB)]
    mover = overlay._PinnedBounceMover.create(torch.device("cuda", 0), chunk_bytes=8 * MiB)
    moved = [mover.move(source) for source in sources]
    mover.close()
    assert all(torch.equal(result, source) for source, result in zip(sources, moved))
    assert not any(result.requires_grad for result in moved)
    assert runtime.locked == {}
    assert [length for _, length in runtime.ever_locked] == [8 * MiB, 8 * MiB]


def test_every_mover_is_closed_when_closing_one_fails(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: List[str] = []

    class RecordingMover:
        def __init__(self, device: torch.device) -> None:
            self.device = device

        def close(self) -> None:
            closed.append(str(self.device))
            if self.device.index == 1:
                raise RuntimeError("cudaHostUnregister failed")

    monkeypatch.setattr(overlay._PinnedBounceMover, "create", RecordingMover)
    devices = [torch.device("cuda", index) for index in range(3)]
    with pytest.raises(RuntimeError, match="cudaHostUnregister failed"):
        with contextlib.ExitStack() as closing:
            movers = overlay._MoversByDevice(closing)
            for device in devices + devices:  # one mover per device, made once
                assert movers.for_device(device).device == device
    assert sorted(closed) == ["cuda:0", "cuda:1", "cuda:2"]


# --------------------------------------------------------------------------------------------
# On a GPU: the real combined peak of host RSS + CUDA reserved while offloading
# --------------------------------------------------------------------------------------------


def host_rss_bytes() -> int:
    """Anonymous resident memory: statm's resident minus its file-backed (shared) pages.

    Libraries paged in as new code runs (~130 MiB of torch and CUDA on a first offload) are
    file-backed, reclaimable, and not what the fix is about, so they are left out.
    """
    with open("/proc/self/statm") as statm:
        fields = statm.read().split()
    return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")


class CombinedPeak(TorchDispatchMode):
    """Samples host RSS + CUDA reserved memory after every operation, so after every move."""

    def __init__(self) -> None:
        super().__init__()
        self.peak = 0

    def sample(self) -> None:
        self.peak = max(self.peak, host_rss_bytes() + torch.cuda.memory_reserved())

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        self.sample()
        return result


def llm_like_module(total_bytes: int) -> Tuple[torch.nn.Module, int]:
    """An fp16 module on the GPU: one large embedding, then 32 MiB matrices up to the total."""
    module = torch.nn.Module()
    embedding = torch.randn(total_bytes // 8 // 2048, 2048, dtype=torch.float16, device="cuda")
    module.register_parameter("embedding", torch.nn.Parameter(embedding))
    remaining = total_bytes - embedding.nbytes
    index = 0
    while remaining >= 32 * MiB:
        weight = torch.randn(4096, 4096, dtype=torch.float16, device="cuda")
        module.register_parameter(f"w{index}", torch.nn.Parameter(weight))
        remaining -= weight.nbytes
        index += 1
    largest = max(p.nbytes for p in module.parameters())
    return module, largest


def measure_offload(move: Callable[[torch.nn.Module], None], size: int) -> Dict[str, float]:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    module, largest = llm_like_module(size)
    weight_bytes = sum(p.nbytes for p in module.parameters())
    torch.cuda.synchronize()
    probe = CombinedPeak()
    start = host_rss_bytes() + torch.cuda.memory_reserved()
    probe.peak = start
    began = time.perf_counter()
    with probe:
        move(module)
    seconds = time.perf_counter() - began
    probe.sample()
    assert all(p.device.type == "cpu" for p in module.parameters())
    return {
        "W": weight_bytes,
        "largest": largest,
        "overshoot": probe.peak - start,
        "seconds": seconds,
    }


def upstream_offload(module: torch.nn.Module) -> None:
    module.to("cpu")
    torch.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
def test_offload_peak_on_the_gpu(overlay: ModuleType) -> None:
    size = int(1.5 * GiB)
    step = overlay.DEFAULT_RELEASE_EVERY_BYTES
    bounce = 2 * overlay.PINNED_BOUNCE_CHUNK_BYTES
    tolerance = 64 * MiB
    fork = measure_offload(overlay.deallocate_module, size)
    upstream = measure_offload(upstream_offload, size)
    W = fork["W"]
    print(
        f"\nW={W / GiB:.2f} GiB largest={fork['largest'] / MiB:.0f} MiB step={step / MiB:.0f} MiB"
        f"\nfork:     overshoot {fork['overshoot'] / GiB:.3f} GiB ({fork['overshoot'] / W:.2f} W)"
        f" in {fork['seconds']:.2f} s"
        f"\nupstream: overshoot {upstream['overshoot'] / GiB:.3f} GiB"
        f" ({upstream['overshoot'] / W:.2f} W) in {upstream['seconds']:.2f} s"
    )
    # The probe sees upstream's doubling, so it can see the fork's.
    assert upstream["overshoot"] > 0.8 * W, upstream
    limit = step + fork["largest"] + bounce + tolerance
    assert fork["overshoot"] < limit, (
        f"combined peak rose {fork['overshoot'] / MiB:.0f} MiB above the start, over "
        f"step + largest tensor + bounce chunks + tolerance = {limit / MiB:.0f} MiB"
    )


def offload_fixture_module() -> torch.nn.Module:
    """Tensors of every kind the fast path sees or must leave to ``tensor.to``."""
    module = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.Linear(1024, 1024))
    module[1].weight = module[0].weight  # tied
    module.register_buffer("chunk_and_a_bit", torch.randn(4 * MiB + 3, device="cuda"))
    module.register_buffer("bf16", torch.randn(3 * MiB, dtype=torch.bfloat16, device="cuda"))
    module.register_buffer("int8", torch.randint(-128, 127, (5 * MiB,), dtype=torch.int8))
    module.register_buffer("bool", torch.rand(2 * MiB, device="cuda") > 0.5)
    module.register_buffer("transposed", torch.randn(2048, 1024, device="cuda").t())
    module.register_buffer("tiny", torch.arange(7, device="cuda"))
    module.register_parameter(
        "frozen", torch.nn.Parameter(torch.randn(MiB, device="cuda"), requires_grad=False)
    )
    return module.cuda()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
@pytest.mark.parametrize("fast_path", ["1", "0"], ids=["pinned-bounce", "plain-to"])
def test_offload_keeps_every_tensor(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch, fast_path: str
) -> None:
    monkeypatch.setenv(overlay.PINNED_BOUNCE_ENV_VAR, fast_path)
    module = offload_fixture_module()
    expected = {name: t.to("cpu") for name, t in module.state_dict(keep_vars=True).items()}
    requires_grad = {name: p.requires_grad for name, p in module.named_parameters()}
    inputs = torch.randn(4, 1024)
    reference = module(inputs.cuda()).cpu()
    overlay.deallocate_module(module, release_every_bytes=0)
    state = module.state_dict(keep_vars=True)
    assert state.keys() == expected.keys()
    for name, tensor in state.items():
        want = expected[name]
        assert tensor.device.type == "cpu", name
        assert tensor.dtype == want.dtype and tensor.stride() == want.stride(), name
        assert torch.equal(tensor, want), name
        assert not tensor.is_pinned(), f"{name} was left page-locked"
    assert {name: p.requires_grad for name, p in module.named_parameters()} == requires_grad
    assert module[0].weight is module[1].weight
    torch.testing.assert_close(module(inputs), reference, rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="two CUDA devices are required")
def test_offload_takes_the_fast_path_on_every_device(
    overlay: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    created: List[torch.device] = []
    create = overlay._PinnedBounceMover.create

    def recording_create(device: torch.device) -> Any:
        created.append(device)
        return create(device)

    monkeypatch.setattr(overlay._PinnedBounceMover, "create", recording_create)
    module = torch.nn.Module()
    for index in range(4):
        weight = torch.randn(3 * MiB + index, device=f"cuda:{index % 2}")
        module.register_parameter(f"w{index}", torch.nn.Parameter(weight))
    expected = {name: p.detach().cpu() for name, p in module.named_parameters()}
    overlay.deallocate_module(module)
    assert sorted(str(device) for device in created) == ["cuda:0", "cuda:1"]
    for name, parameter in module.named_parameters():
        assert parameter.device.type == "cpu" and not parameter.is_pinned(), name
        assert torch.equal(parameter.detach(), expected[name]), name


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
def test_deallocate_module_on_the_cpu_waits_for_no_gpu_work(overlay: ModuleType) -> None:
    """A CPU module's call leaves queued GPU work running: it makes no device sync.

    The probe is a kernel that keeps the stream busy for about a second; a call that syncs
    the device (as the offload of a CUDA module does) returns only once the stream is idle.
    """
    stream = torch.cuda.current_stream()
    busy_cycles = 2 * 10**9  # about 1 s at the clock rates of current data-centre GPUs
    cpu_module = torch.nn.Linear(1024, 1024)
    torch.cuda._sleep(busy_cycles)
    began = time.perf_counter()
    overlay.deallocate_module(cpu_module)
    seconds = time.perf_counter() - began
    still_busy = not stream.query()
    torch.cuda.synchronize()
    print(f"\ndeallocate_module of a CPU module with the GPU busy: {seconds * 1e3:.3f} ms")
    assert still_busy, "deallocate_module of a CPU module waited for the GPU"
    # The probe sees a sync: offloading a CUDA module waits for the queued work.
    cuda_module = torch.nn.Linear(1024, 1024).cuda()
    torch.cuda._sleep(busy_cycles)
    overlay.deallocate_module(cuda_module)
    assert stream.query(), "the probe cannot see a device sync"
