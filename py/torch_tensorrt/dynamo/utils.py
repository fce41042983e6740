"""The fork's compile-memory functions: the overlay of ``torch_tensorrt/dynamo/utils.py``.

This file is never installed as it is. The patched-wheel build reads it and splices it into
upstream's ``torch_tensorrt/dynamo/utils.py`` taken from the official base wheel:

* each top-level function or class defined here replaces the top-level definition of the same
  name in upstream's file, in place;
* a function or class that upstream's file lacks is added at the end of that file;
* an import, or a top-level constant, that upstream's file lacks is added after its imports;
* every other byte of upstream's file stays as it was.

The build splices these definitions as named fixes, each only into a base whose module has
the fix's hook: the offload (:func:`deallocate_module`), the host trim
(:func:`release_host_and_device_memory` and its helpers), and the input copy
(``prepare_inputs``, only into releases whose own ``prepare_inputs`` copies every tensor
input, 2.10 and 2.11).

The definitions here need torch and the standard library only, so this file imports and runs
without TensorRT, and its tests run on machines with no GPU. The one name of upstream's package
they use, ``torch_tensorrt._Input.Input`` (which cannot be imported without TensorRT), is
imported inside ``prepare_inputs`` when it runs, not at the top of this file: spliced into
upstream's module that import finds the class upstream's module already imported; run on its
own, the tests put a stand-in module under that name.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import itertools
import logging
import os
import platform
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

logger = logging.getLogger(__name__)

# Default step of deallocate_module: bytes of CUDA tensors moved between two cache releases.
DEFAULT_RELEASE_EVERY_BYTES = 16 * 1024 * 1024

# Offload fast path: CUDA tensors of at least 1 MiB move through two page-locked chunks of this
# size each; TORCHTRT_OFFLOAD_PINNED_BOUNCE=0 turns the fast path off. 32 MiB rather than 16:
# small tensors move faster (more of them share one wait), for 32 MiB more page-locked memory
# (git show 06c003a:benchmarks/results/offload_designs_24gib_timing.json).
PINNED_BOUNCE_CHUNK_BYTES = 32 * 1024 * 1024
PINNED_BOUNCE_ENV_VAR = "TORCHTRT_OFFLOAD_PINNED_BOUNCE"

# Linux's transparent huge pages, and madvise advice values (the same on every architecture).
_HUGE_PAGE_BYTES = 2 * 1024 * 1024
_MADV_HUGEPAGE = 14

# Host-heap trimming is on unless this variable is 0 (upstream's opt-in with 1 still trims).
MALLOC_TRIM_ENV_VAR = "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"

# A compiled module lets go of its serialized engine unless this variable is 1.
KEEP_SERIALIZED_ENGINE_ENV_VAR = "TORCHTRT_KEEP_SERIALIZED_ENGINE"


def _strided_nbytes(tensor: torch.Tensor) -> int:
    """Bytes of a strided tensor's elements; zero for sparse and other layouts.

    Only strided tensors have a plain ``numel * element_size`` footprint. Sparse and other
    layouts are rare among parameters and their storage is not one block, so the release
    schedule of :func:`deallocate_module` does not count them.
    """
    if tensor.layout != torch.strided:
        return 0
    return tensor.nelement() * tensor.element_size()


def deallocate_module(
    module: torch.nn.Module,
    release_every_bytes: int = DEFAULT_RELEASE_EVERY_BYTES,
    *,
    delete_module: bool = True,
) -> None:
    """Move every parameter and buffer of ``module`` to the CPU, releasing GPU memory as it goes.

    ``module.to("cpu")`` copies the whole module to the host before any GPU memory can be
    reused: PyTorch's CUDA caching allocator keeps each freed block until
    ``torch.cuda.empty_cache()``, so for the length of the move the host copy and the GPU copy
    both exist, and host plus GPU memory peaks near twice the module's size. On machines where
    host and GPU share one memory pool (Jetson, DGX Spark) that is what runs a compile out of
    memory.

    Here the tensors move one at a time through ``module._apply``. The bytes of strided CUDA
    tensors moved since the last release are counted; before the next CUDA tensor moves, once
    that count has reached ``release_every_bytes``, the cache is emptied and the count starts
    again. The memory held twice is then at most ``release_every_bytes`` plus the largest
    tensor (plus the two chunks of the fast path below), or, where tensors share a segment of
    the CUDA caching allocator, the largest segment: a segment's memory is handed back only
    once all its tensors have moved. Tied parameters move once and stay tied.

    Where CUDA is available, dense contiguous tensors of 1 MiB or more take a fast path (see
    :class:`_PinnedBounceMover`): they move by DMA through two page-locked chunks of
    :data:`PINNED_BOUNCE_CHUNK_BYTES` into host memory advised to use huge pages, instead of
    the driver's copy into pageable memory that ``tensor.to("cpu")`` makes, one mover per CUDA
    device. It is several times faster than ``tensor.to`` and holds no more memory twice; its
    cost is the two chunks of each device, page-locked host memory while the move lasts. The
    DMA runs on the device's current stream: a stream of its own would make PyTorch create its
    pool of side streams in a process that has none yet, which takes GPU memory for the rest
    of the process.
    Setting ``TORCHTRT_OFFLOAD_PINNED_BOUNCE=0`` turns it off; every tensor then moves with
    ``tensor.to("cpu")``.

    A module none of whose parameters and buffers is on a CUDA device returns at once, with no
    garbage collection and no cache release. Upstream's ``TRTInterpreter.run`` calls this
    again after ``compile()`` has offloaded the module, and that second call would otherwise
    pay ``gc.collect()`` and a device-synchronizing ``empty_cache()`` to free nothing (0.2 s a
    call, as upstream's pull request 4700 measured it). Tensors on devices other than CUDA
    (``meta``, or any this fork does not offload from) stay where they are: an offload frees
    GPU memory, and ``tensor.to("cpu")`` of a ``meta`` tensor fails.

    Args:
        module: The module to move. It is changed in place; tensors not on CUDA stay.
        release_every_bytes: Bytes of CUDA tensors to move between two releases of the CUDA
            cache. ``0`` releases before every CUDA tensor.
        delete_module: Accepted so that the call sites of releases 2.8 to 2.10 keep working.
            It has no effect: the caller's reference keeps the module alive either way.

    Raises:
        ValueError: If ``release_every_bytes`` is negative.
    """
    if release_every_bytes < 0:
        raise ValueError(
            f"release_every_bytes must be 0 or more, got {release_every_bytes!r}; "
            "pass 0 to release the CUDA cache before every tensor"
        )
    # A module with nothing on CUDA (a second call, as TRTInterpreter.run makes after compile()
    # has offloaded) has no GPU memory to free: skip the collection and the cache release.
    tensors = itertools.chain(module.parameters(), module.buffers())
    if not any(tensor.is_cuda for tensor in tensors):
        logger.debug("deallocate_module: no tensor is on a CUDA device; nothing to do")
        return
    schedule = _ReleaseSchedule(release_every_bytes)
    with contextlib.ExitStack() as closing:
        movers = _MoversByDevice(closing)

        def move_to_cpu(tensor: torch.Tensor) -> torch.Tensor:
            if not tensor.is_cuda:
                return tensor
            schedule.before_move(tensor)
            mover = (
                movers.for_device(tensor.device) if _PinnedBounceMover.can_move(tensor) else None
            )
            return tensor.to("cpu") if mover is None else mover.move(tensor)

        module._apply(move_to_cpu)
    gc.collect()
    torch.cuda.empty_cache()


class _ReleaseSchedule:
    """When :func:`deallocate_module` empties the CUDA cache: every ``every_bytes`` moved.

    Counts the bytes of strided CUDA tensors moved since the last release; once the count has
    reached ``every_bytes`` (and is not zero), the next move first releases the cache.
    """

    def __init__(self, every_bytes: int) -> None:
        self.every_bytes = every_bytes
        self.moved_since_release = 0

    def before_move(self, tensor: torch.Tensor) -> None:
        """Release the cache if the step is reached, then count ``tensor`` as moved."""
        if self.moved_since_release and self.moved_since_release >= self.every_bytes:
            torch.cuda.empty_cache()
            self.moved_since_release = 0
        self.moved_since_release += _strided_nbytes(tensor)


class _MoversByDevice:
    """One fast-path mover per CUDA device, made on first use, closed when ``closing`` ends.

    A device whose mover cannot be made (page-locking refused, fast path off) is remembered as
    ``None``, so page-locking is tried once per device and its tensors move with ``tensor.to``.
    """

    def __init__(self, closing: contextlib.ExitStack) -> None:
        self.closing = closing
        self.movers: Dict[torch.device, Optional[_PinnedBounceMover]] = {}

    def for_device(self, device: torch.device) -> Optional[_PinnedBounceMover]:
        if device not in self.movers:
            mover = _PinnedBounceMover.create(device)
            if mover is not None:
                self.closing.callback(mover.close)
            self.movers[device] = mover
        return self.movers[device]


def _advise_huge_pages(tensor: torch.Tensor) -> None:
    """Ask Linux to back a new CPU tensor with huge pages; a no-op elsewhere.

    Memory that a tensor gets fresh from the kernel is faulted in 4 KiB page by page, and
    faulting is the slow part of filling it. ``madvise(MADV_HUGEPAGE)`` on the 2 MiB-aligned
    part of the range lets the kernel fault it in 2 MiB at a time where transparent huge pages
    are enabled (``always`` or ``madvise``). Only whole huge pages inside the tensor are
    advised, so the tensor takes no more memory than without the advice.
    """
    madvise = _libc_madvise()
    if madvise is None:
        return
    start = -(-tensor.data_ptr() // _HUGE_PAGE_BYTES) * _HUGE_PAGE_BYTES
    end = (tensor.data_ptr() + tensor.nbytes) // _HUGE_PAGE_BYTES * _HUGE_PAGE_BYTES
    if end > start:
        madvise(start, end - start, _MADV_HUGEPAGE)


@functools.lru_cache(maxsize=None)
def _libc_madvise() -> Optional[Callable[[int, int, int], int]]:
    """The C library's ``madvise``, looked up once; ``None`` off Linux or where it is missing.

    Opened as ``libc.so.6``, as for ``malloc_trim``: the fast path it serves exists only with
    CUDA, whose Linux builds need glibc, so a C library of another name loses nothing.
    """
    if platform.system() != "Linux":
        return None
    try:
        madvise = ctypes.CDLL("libc.so.6").madvise
    except (OSError, AttributeError) as error:
        logger.debug("madvise is not available: %s", error)
        return None
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    madvise.restype = ctypes.c_int
    return madvise


class _PinnedBounceMover:
    """Moves CUDA tensors into new host memory through two reused page-locked chunks.

    A plain ``tensor.to("cpu")`` copies into fresh pageable memory, which the kernel faults in
    page by page while the copy waits. Here the GPU copies each piece of the tensor by DMA into
    one of two page-locked chunks, and while it fills the other chunk, PyTorch's multi-threaded
    CPU copy moves the first into the destination, which is advised to use huge pages. The
    chunks are page-locked with ``cudaHostRegister`` on memory of our own rather than taken
    from PyTorch's pinned-memory cache, so that :meth:`close` hands them back to the OS
    entirely. The DMA is queued on the device's current stream, after whatever was queued
    there before: nothing else runs on the GPU during the move, and a ``torch.cuda.Stream()``
    of its own would make PyTorch create its pool of side streams, GPU memory kept for the
    rest of the process (``git show 90a4bc8:benchmarks/results/fast_path_setup.json``).

    The last piece of a tensor is copied on the CPU while the next tensor's first piece is on
    its way, so a returned tensor may still lack its last piece until the next :meth:`move` or
    :meth:`close`; the caller reads none of them before :meth:`close` returns.
    """

    min_tensor_bytes = 1024 * 1024

    def __init__(self, chunks: List[torch.Tensor], device: torch.device) -> None:
        self.chunks = chunks
        self.chunk_bytes = chunks[0].numel()
        self.device = device
        self.stream = torch.cuda.current_stream(device)
        self.events = [torch.cuda.Event() for _ in chunks]
        self.next_chunk = 0
        self.pending: Optional[Tuple[torch.Tensor, int, int, int]] = None

    @staticmethod
    def can_move(tensor: torch.Tensor) -> bool:
        """Whether the fast path can move ``tensor``: a plain dense CUDA tensor of 1 MiB+."""
        return (
            type(tensor) in (torch.Tensor, torch.nn.Parameter)
            and tensor.layout == torch.strided
            and not tensor.is_quantized
            and tensor.is_contiguous()
            and tensor.nbytes >= _PinnedBounceMover.min_tensor_bytes
        )

    @classmethod
    def create(
        cls, device: torch.device, chunk_bytes: int = PINNED_BOUNCE_CHUNK_BYTES
    ) -> Optional[_PinnedBounceMover]:
        """A mover for one CUDA device's tensors; ``None`` if page-locking fails or is off."""
        if not _env_flag_enabled(PINNED_BOUNCE_ENV_VAR):
            return None
        cudart = torch.cuda.cudart()
        chunks: List[torch.Tensor] = []
        for _ in range(2):
            chunk = torch.empty(chunk_bytes, dtype=torch.uint8)
            status = int(cudart.cudaHostRegister(chunk.data_ptr(), chunk.nbytes, 0))
            if status != 0:
                logger.debug("cudaHostRegister failed (%d); offloading with tensor.to", status)
                for registered in chunks:
                    cudart.cudaHostUnregister(registered.data_ptr())
                return None
            chunks.append(chunk)
        return cls(chunks, device)

    def move(self, tensor: torch.Tensor) -> torch.Tensor:
        """A CPU copy of ``tensor``; its last piece may land at the next call or at close.

        Like ``tensor.to("cpu")`` under ``module._apply``'s ``no_grad``, the copy has no
        autograd history and does not require grad; ``_apply`` gives parameters theirs back.
        """
        destination = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
        _advise_huge_pages(destination)
        source_bytes = tensor.detach().reshape(-1).view(torch.uint8)
        destination_bytes = destination.view(-1).view(torch.uint8)
        total = source_bytes.numel()
        chunk = self.next_chunk
        for offset in range(0, total, self.chunk_bytes):
            size = min(self.chunk_bytes, total - offset)
            chunk = self.next_chunk
            self.next_chunk = (chunk + 1) % len(self.chunks)
            with torch.cuda.stream(self.stream):
                self.chunks[chunk][:size].copy_(
                    source_bytes[offset : offset + size], non_blocking=True
                )
                self.events[chunk].record(self.stream)
            self._copy_pending()
            self.pending = (destination_bytes, offset, size, chunk)
        # Wait for the last piece's DMA, so that the caller may free the CUDA tensor.
        self.events[chunk].synchronize()
        return destination

    def _copy_pending(self) -> None:
        """Copy the piece waiting in its page-locked chunk into its destination."""
        if self.pending is None:
            return
        destination_bytes, offset, size, chunk = self.pending
        self.pending = None
        self.events[chunk].synchronize()
        destination_bytes[offset : offset + size].copy_(self.chunks[chunk][:size])

    def close(self) -> None:
        """Finish the last copy and hand the page-locked chunks back to the OS."""
        try:
            self._copy_pending()
        finally:
            cudart = torch.cuda.cudart()
            for chunk in self.chunks:
                cudart.cudaHostUnregister(chunk.data_ptr())
            self.chunks = []


@functools.lru_cache(maxsize=None)
def _glibc_malloc_trim() -> Optional[Callable[[int], int]]:
    """glibc's ``malloc_trim``, or ``None`` where the C library has none.

    The library is opened once per process; later calls return the cached function. ``None``
    off Linux, where ``libc.so.6`` cannot be loaded, and where it lacks the symbol (musl).
    """
    if platform.system() != "Linux":
        return None
    try:
        malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError) as error:
        logger.debug("malloc_trim is not available: %s", error)
        return None
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    return malloc_trim


def _env_flag_enabled(name: str) -> bool:
    """Whether an on-by-default switch is on: yes unless the variable is ``0``/false/no/off."""
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def trim_host_heap() -> None:
    """Hand freed heap memory back to the operating system with glibc's ``malloc_trim(0)``.

    A TensorRT engine build frees gigabytes of host memory in blocks of a few MiB. After the
    first large free, glibc raises its mmap threshold to 32 MiB, so later blocks below that
    come from the heap, and freeing them leaves the pages resident: the process keeps the
    memory of the build until it exits. ``malloc_trim(0)`` returns those pages.

    Trimming is on by default. Setting ``TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM=0`` (or ``false``,
    ``no``, ``off``) turns it off; ``1``, upstream's opt-in, keeps it on. Where the C library
    has no ``malloc_trim`` (macOS, Windows, musl) this does nothing. ``malloc_trim``'s result
    only says whether any memory was released, so it is logged at debug level, never as a
    warning. This function never raises.
    """
    if not _env_flag_enabled(MALLOC_TRIM_ENV_VAR):
        logger.debug("Host heap trimming is off (%s=0)", MALLOC_TRIM_ENV_VAR)
        return
    try:
        malloc_trim = _glibc_malloc_trim()
        if malloc_trim is None:
            return
        released = malloc_trim(0)
    except Exception:  # a failed trim must never fail a compile
        logger.debug("malloc_trim(0) failed", exc_info=True)
        return
    logger.debug("malloc_trim(0) returned %d (1: memory was released)", released)


def release_host_and_device_memory() -> None:
    """Release the memory an engine build left behind, on the GPU and on the host.

    Collects garbage first so that freed tensors reach their allocators, then, where CUDA is
    available, waits for the GPU, empties PyTorch's CUDA cache and the CUDA IPC handles, and
    waits again; last, trims the host heap with :func:`trim_host_heap`.
    """
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.ipc_collect()
        torch.cuda.synchronize()
    trim_host_heap()


def prepare_inputs(inputs: Any, disable_memory_format_check: bool = False) -> Any:
    """Describe example inputs as ``torch_tensorrt.Input`` objects without copying their tensors.

    The compile entry points call this on the caller's example inputs: a tensor, a number, an
    ``Input``, ``None``, or lists, tuples and dicts nesting them, which come back in the same
    shape (a list stays a list, any other tuple becomes a tuple, a dict a dict) with each tensor
    and number turned into an ``Input``. Under ``torch.compile`` the model's parameters are
    lifted into these inputs, so a copy of each tensor would hold every weight twice on the
    GPU while the compile runs. Releases 2.10 and 2.11 made that copy (``torch.tensor`` of the
    tensor); here the ``Input`` is made from a detached alias of the caller's tensor, which
    shares its storage, has no autograd history and, like the copy, does not require grad.

    Only a tensor whose elements do not fill one dense block of memory (a strided slice, an
    expanded view) is still copied, as those releases did: their copy was compact, and
    ``Input.from_tensor`` accepts a compact tensor where it refuses such a view, so the copy
    keeps their results. Parameters are never such views.

    Args:
        inputs: The example inputs, nested as above.
        disable_memory_format_check: Passed on to ``Input.from_tensor``: accept a tensor that
            is neither contiguous nor channels-last.

    Raises:
        ValueError: If an input is of any other type.
    """
    # Imported here: the name is upstream's, which needs TensorRT (module docstring).
    from torch_tensorrt._Input import Input  # type: ignore[import-not-found]

    describe = functools.partial(
        Input.from_tensor, disable_memory_format_check=disable_memory_format_check
    )
    # Tensors made here must be real ones even inside a torch.compile session's fake mode.
    with unset_fake_temporarily():
        if inputs is None or isinstance(inputs, Input):
            return inputs
        if isinstance(inputs, torch.Tensor):
            # Dense: every element in one block, the strides a permutation of a compact
            # layout's (size-1 dimensions have any stride).
            dense = inputs.layout == torch.strided
            if dense and inputs.numel() > 0:
                expected_stride = 1
                for stride, size in sorted(
                    (stride, size)
                    for size, stride in zip(inputs.shape, inputs.stride())
                    if size != 1
                ):
                    if stride != expected_stride:
                        dense = False
                        break
                    expected_stride *= size
            example = inputs.detach() if dense else inputs.detach().clone()
            return describe(example)
        if isinstance(inputs, (int, float, bool)):
            return describe(torch.tensor(inputs))
        if isinstance(inputs, (list, tuple)):
            described = [prepare_inputs(item, disable_memory_format_check) for item in inputs]
            return described if isinstance(inputs, list) else tuple(described)
        if isinstance(inputs, dict):
            return {
                key: prepare_inputs(value, disable_memory_format_check)
                for key, value in inputs.items()
            }
        raise ValueError(
            f"cannot make a torch_tensorrt.Input of a {type(inputs).__name__!r}; give tensors, "
            "numbers, torch_tensorrt.Input objects or None, alone or in lists, tuples and dicts"
        )


class _BuilderOutput:
    """Stands in for the engine that ``TRTInterpreter.run`` deserializes from the builder's output.

    On TensorRT-RTX (and with ``version_compatible``), ``run`` builds with
    ``build_serialized_network`` and at once deserializes the result into an engine on the GPU;
    ``interpret_module_to_result`` then serializes that engine again and copies it through a
    ``BytesIO``, and the runtime module deserializes the copy a second time. While
    :func:`_builder_output_handed_on` is in effect, the deserialization in ``run`` makes this
    object instead: it holds the builder's buffer, and its :meth:`serialize` hands that very
    buffer on, so the engine is built on the GPU once, by the runtime module, and the host holds
    one serialized copy fewer. Anything else asked of it (the engine cache's serialization with
    its own flags) deserializes the real engine first, as upstream would have.
    """

    def __init__(self, serialized: Any, runtime: Any) -> None:
        self._serialized: Any = serialized
        self._runtime = runtime
        self._engine: Any = None

    def __bool__(self) -> bool:
        return True

    def serialize(self) -> Any:
        """The builder's buffer, given up: this object holds neither it nor an engine after."""
        if self._serialized is None:
            raise RuntimeError(
                "the builder's serialized engine was already handed on; set "
                f"{KEEP_SERIALIZED_ENGINE_ENV_VAR}=1 to compile as upstream does"
            )
        serialized, self._serialized, self._engine = self._serialized, None, None
        return serialized

    def __getattr__(self, name: str) -> Any:
        # Only names this class lacks reach here: they belong to the real engine.
        if name.startswith("_") or self.__dict__.get("_serialized") is None:
            raise AttributeError(name)
        if self._engine is None:
            logger.debug("deserializing the engine for %r (the engine cache asks for it)", name)
            self._engine = self._runtime.deserialize_cuda_engine(self._serialized)
        return getattr(self._engine, name)


class _DeferringRuntime:
    """A ``trt.Runtime`` whose ``deserialize_cuda_engine`` defers to :class:`_BuilderOutput`."""

    def __init__(self, runtime_class: Any, trt_logger: Any) -> None:
        self._runtime = runtime_class(trt_logger)

    def deserialize_cuda_engine(self, serialized: Any) -> _BuilderOutput:
        return _BuilderOutput(serialized, self._runtime)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


class _TensorRTDeferringRuntime:
    """The ``tensorrt`` module as ``TRTInterpreter`` sees it while the builder's output is handed
    on: every name is TensorRT's, but ``Runtime`` makes a :class:`_DeferringRuntime`."""

    def __init__(self, trt: Any) -> None:
        self._trt = trt

    def Runtime(self, trt_logger: Any) -> _DeferringRuntime:  # noqa: N802 (TensorRT's name)
        return _DeferringRuntime(self._trt.Runtime, trt_logger)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._trt, name)


@contextlib.contextmanager
def _builder_output_handed_on() -> Iterator[None]:
    """While in effect, ``TRTInterpreter.run`` hands the builder's buffer on undeserialized.

    Upstream's interpreter module names TensorRT as its global ``trt``; for the length of the
    block that name is :class:`_TensorRTDeferringRuntime`, which differs from TensorRT only in
    the engine that ``Runtime(...).deserialize_cuda_engine`` makes. Only that module's code sees
    it (the converters and the runtime modules keep their own ``trt``), and the name is put back
    when the block ends, also on an error. A release whose ``run`` builds the engine directly
    (standard TensorRT's ``build_engine_with_config``) makes no ``Runtime`` there and is
    unaffected.
    """
    from torch_tensorrt.dynamo.conversion import (  # type: ignore[import-not-found]
        _TRTInterpreter,
    )

    trt = getattr(_TRTInterpreter, "trt", None)
    if trt is None or not hasattr(trt, "Runtime"):
        yield
        return
    _TRTInterpreter.trt = _TensorRTDeferringRuntime(trt)
    try:
        yield
    finally:
        _TRTInterpreter.trt = trt


class _ItemsGivenUp:
    """An iterable over a list that removes each item from the list as it hands it out, once.

    ``torch.classes.tensorrt.Engine`` takes a list of strings, the serialized engine one of
    them; TorchScript copies each into its own string, and the engine's constructor copies the
    list again. A Python list passed in keeps the engine's bytes alive through both copies: three
    copies at once, where TorchScript's two suffice. Passed this instead, TorchScript holds each
    item only while it converts it (it iterates the argument once, ``createGenericList``). Should
    a release of torch iterate twice, the second pass raises instead of handing an empty list to
    the engine.
    """

    def __init__(self, items: List[Any]) -> None:
        self.items = items
        self.taken = 0

    def __iter__(self) -> _ItemsGivenUp:
        if self.taken:
            raise RuntimeError(
                "torch iterated the engine's information twice; this fork's one-pass hand-over "
                f"does not fit this torch: set {KEEP_SERIALIZED_ENGINE_ENV_VAR}=1 and report it"
            )
        return self

    def __next__(self) -> Any:
        if not self.items:
            raise StopIteration
        self.taken += 1
        return self.items.pop(0)


def _cpp_engine_from_info(engine_info: List[Any]) -> Any:
    """``torch.classes.tensorrt.Engine`` made from ``engine_info``, which is emptied on the way.

    The caller must hold no other reference to the serialized engine in the list. Where the
    argument conversion of this torch does not take an iterable (nothing taken yet), the list
    itself is passed, as upstream does, at the cost of the third copy.
    """
    given_up = _ItemsGivenUp(engine_info)
    try:
        return torch.classes.tensorrt.Engine(given_up)
    except (TypeError, RuntimeError):
        if given_up.taken:
            raise
        logger.debug("torch takes no iterable here; the engine's information goes as a list")
        return torch.classes.tensorrt.Engine(engine_info)


def convert_module(
    module: torch.fx.GraphModule,
    inputs: Any,
    settings: Any = None,
    name: str = "",
    engine_cache: Any = None,
) -> Any:
    """Build a TensorRT engine for ``module`` and wrap it in the runtime's module, the engine's
    bytes alive as few times as possible.

    Spliced into upstream's ``dynamo/conversion/_conversion.py`` (not ``dynamo/utils.py``), in
    place of its ``convert_module``, only where upstream's creates the runtime module with the
    same fields as this one. The same steps and the same runtime as upstream's: the C++
    runtime's ``TorchTensorRTModule`` where it is available and ``use_python_runtime`` is off,
    else ``PythonTorchTensorRTModule``; ``settings`` defaults to ``CompilationSettings()``.
    What differs is where the engine's bytes live (measured on TensorRT-RTX, docs'
    benchmarks page):

    * The builder's output is handed on to the runtime module (:func:`_builder_output_handed_on`)
      instead of being deserialized into an engine, serialized again and copied; on standard
      TensorRT, whose ``run`` builds the engine directly, upstream's steps stay.
    * The C++ runtime's module is made with its engine deferred, then given its engine from
      information that lets go of the bytes as TorchScript copies them (:class:`_ItemsGivenUp`),
      and it keeps no serialized copy beside its live engine: saving or pickling it serializes
      the live engine (a moment of W of host memory, and the time of one serialization). A
      module whose engine is set up later (``lazy_engine_init``, or built for Windows) keeps its
      bytes, which it needs then, as upstream's does.

    ``TORCHTRT_KEEP_SERIALIZED_ENGINE=1`` keeps upstream's steps and the bytes on the module.
    """
    # Upstream's names, imported when it runs (as in prepare_inputs); this module's own name
    # is read from the module, so that whatever replaced it there (a profiler's wrapper) runs.
    from torch_tensorrt._features import ENABLED_FEATURES  # type: ignore[import-not-found]
    from torch_tensorrt.dynamo import _settings  # type: ignore[import-not-found]
    from torch_tensorrt.dynamo.conversion import _conversion
    from torch_tensorrt.dynamo.runtime import (  # type: ignore[import-not-found]
        PythonTorchTensorRTModule,
        TorchTensorRTModule,
    )

    settings = _settings.CompilationSettings() if settings is None else settings
    keep = os.environ.get(KEEP_SERIALIZED_ENGINE_ENV_VAR, "0").strip() == "1"
    interpret = _conversion.interpret_module_to_result
    with contextlib.nullcontext() if keep else _builder_output_handed_on():
        interpreted = interpret(module, inputs, settings, engine_cache=engine_cache)
    python_asked = settings.use_python_runtime
    cpp_available = ENABLED_FEATURES.torch_tensorrt_runtime
    runtime_module = TorchTensorRTModule
    if python_asked or not cpp_available:
        runtime_module = PythonTorchTensorRTModule
        if not python_asked:
            logger.info("The Torch-TensorRT C++ runtime is not available; using the Python one")
    windows = getattr(settings, "enable_cross_compile_for_windows", False)
    set_up_now = not (settings.lazy_engine_init or windows)
    defer = runtime_module is TorchTensorRTModule and set_up_now and not keep
    compiled = runtime_module(
        serialized_engine=None if defer else interpreted.serialized_engine,
        input_binding_names=list(interpreted.input_names),
        output_binding_names=list(interpreted.output_names),
        name=name,
        settings=settings,
        weight_name_map=interpreted.weight_name_map,
        requires_output_allocator=interpreted.requires_output_allocator,
        symbolic_shape_expressions=interpreted.symbolic_shape_expressions,
    )
    if defer:
        # The bytes go onto the module only to be packed with its other fields, then every
        # reference but the packed list's is dropped before the engine is made from it.
        compiled.serialized_engine = interpreted.serialized_engine
        del interpreted
        engine_info = compiled._pack_engine_info()
        compiled.serialized_engine = None
        compiled.engine = _cpp_engine_from_info(engine_info)
    return compiled
