"""The fork's compile-memory functions: the overlay of ``torch_tensorrt/dynamo/utils.py``.

This file is never installed as it is. The patched-wheel build reads it and splices it into
upstream's ``torch_tensorrt/dynamo/utils.py`` taken from the official base wheel:

* each top-level function defined here replaces the top-level function of the same name in
  upstream's file, in place;
* a function that upstream's file lacks is added at the end of that file;
* an import, or a top-level constant, that upstream's file lacks is added after its imports;
* every other byte of upstream's file stays as it was.

The functions here need torch and the standard library only, so this file imports and runs
without TensorRT, and its tests run on machines with no GPU.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import logging
import os
import platform
from typing import Callable, Optional

import torch

logger = logging.getLogger(__name__)

# Default step of deallocate_module: bytes of CUDA tensors moved between two cache releases.
DEFAULT_RELEASE_EVERY_BYTES = 64 * 1024 * 1024

# Host-heap trimming is on unless this variable is 0 (upstream's opt-in with 1 still trims).
MALLOC_TRIM_ENV_VAR = "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"


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
    host and GPU share one memory pool (Jetson, DGX Spark, GH200) that is what runs a compile
    out of memory.

    Here the tensors move one at a time through ``module._apply``. The bytes of strided CUDA
    tensors moved since the last release are counted; before the next CUDA tensor moves, once
    that count has reached ``release_every_bytes``, the cache is emptied and the count starts
    again. The memory held twice is then at most ``release_every_bytes`` plus the largest
    tensor. Tied parameters move once and stay tied.

    Args:
        module: The module to move. It is changed in place; tensors already on the CPU stay.
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
    moved_since_release = 0

    def move_to_cpu(tensor: torch.Tensor) -> torch.Tensor:
        nonlocal moved_since_release
        if tensor.is_cuda:
            if moved_since_release and moved_since_release >= release_every_bytes:
                torch.cuda.empty_cache()
                moved_since_release = 0
            moved_since_release += _strided_nbytes(tensor)
        return tensor.to("cpu")

    module._apply(move_to_cpu)
    gc.collect()
    torch.cuda.empty_cache()


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
    return malloc_trim  # type: ignore[no-any-return]


def _host_heap_trim_enabled() -> bool:
    """Whether :func:`trim_host_heap` trims: yes unless the variable says ``0`` (or off)."""
    value = os.environ.get(MALLOC_TRIM_ENV_VAR, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


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
    if not _host_heap_trim_enabled():
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
