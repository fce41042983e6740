"""Offload designs not in the overlay, built from its parts and measured beside it.

Each design is a strategy of ``benchmarks/strategies.py`` (``fork-chunk-32MiB``,
``fork-chunk-64MiB``, ``packed``, ``packed-slab``, ``direct-locked``), so the offload runner
measures it as it measures the shipped overlay: a fresh process per case, the same probes, the
same copy ceiling and host limit. :func:`offload` is ``deallocate_module``'s own order of
steps (the overlay's release schedule and its test of which tensors take the fast path), with
the design's mover in place of the overlay's.

* ``chunks``: the overlay's mover with chunks of another size; with ``current_stream``, its
  DMA runs on the device's current stream instead of a stream of its own. PyTorch makes its
  pool of side streams (32 per priority per device) at the first ``torch.cuda.Stream()`` of a
  process, and ``benchmarks/results/fast_path_setup.json`` measured that at 70 MiB of GPU
  memory; nothing else runs on the GPU during the move, so the DMA needs no stream of its own.
* :class:`PackedMover`: the bounce path, where a chunk holds several small tensors: pieces of
  up to a chunk are packed into the chunk being filled, and the CPU copies a chunk's pieces
  out only when the GPU has moved on to the other one, so a 4 MiB tensor no longer waits for
  its own DMA before the next one starts. The CUDA tensors of a packed chunk are kept alive
  until it is copied out (at most one chunk's worth); a tensor larger than a chunk waits for
  its last piece, as in the overlay. With ``slab``, tensors under :data:`SLAB_LIMIT` land in
  views of 64 MiB huge-page slabs instead of memory of their own, to test whether faulting in
  small fresh destinations 4 KiB at a time is what limits small tensors (a research probe:
  the views share one storage, which the overlay cannot give a user's tensors).
* :class:`DirectLockedMover`: no bounce chunk. The destination itself is faulted in (by
  ``MADV_POPULATE_WRITE`` from every core), page-locked with ``cudaHostRegister``, written by
  DMA and unlocked, in pieces of :data:`DIRECT_PIECE` pipelined so that faulting in the piece
  after next, locking the next one, the DMA of this one and unlocking the last one overlap.
  Host memory traffic per byte: the page zeroing and the DMA's write, against four for the
  bounce path.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
from concurrent.futures import Future, ThreadPoolExecutor
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

MiB = 1024 * 1024
HUGE_PAGE = 2 * MiB
PAGE = 4096
MADV_POPULATE_WRITE = 23
SLAB_BYTES = 64 * MiB
SLAB_LIMIT = 8 * MiB
DIRECT_PIECE = 32 * MiB

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.madvise.restype = ctypes.c_int

Mover = Any


def offload(
    overlay: ModuleType, module: torch.nn.Module, make_mover: Callable[[Any], Mover]
) -> None:
    """``deallocate_module``'s steps at its default release step, with ``make_mover``'s mover."""
    schedule = overlay._ReleaseSchedule(overlay.DEFAULT_RELEASE_EVERY_BYTES)
    movers: Dict[Any, Mover] = {}
    with contextlib.ExitStack() as closing:

        def move(tensor: torch.Tensor) -> torch.Tensor:
            if not tensor.is_cuda:
                return tensor.to("cpu")
            schedule.before_move(tensor)
            if not overlay._PinnedBounceMover.can_move(tensor):
                return tensor.to("cpu")
            if tensor.device not in movers:
                movers[tensor.device] = make_mover(tensor.device)
                closing.callback(movers[tensor.device].close)
            return movers[tensor.device].move(tensor)  # type: ignore[no-any-return]

        module._apply(move)
    gc.collect()
    torch.cuda.empty_cache()


def chunks(
    overlay: ModuleType, chunk_bytes: int, current_stream: bool = False
) -> Callable[[Any], Mover]:
    """The overlay's mover with ``chunk_bytes`` chunks, on the current stream if asked."""

    class CurrentStreamMover(overlay._PinnedBounceMover):  # type: ignore[name-defined,misc]
        def __init__(self, chunks: List[torch.Tensor], device: Any) -> None:
            side_stream = torch.cuda.Stream
            current = torch.cuda.current_stream(device)
            torch.cuda.Stream = lambda *args, **kwargs: current  # type: ignore[assignment,misc]
            try:
                super().__init__(chunks, device)
            finally:
                torch.cuda.Stream = side_stream  # type: ignore[misc]

    mover_class = CurrentStreamMover if current_stream else overlay._PinnedBounceMover

    def make(device: Any) -> Mover:
        mover = mover_class.create(device, chunk_bytes)
        assert mover is not None, "page-locking refused"
        return mover

    return make


def _register(address: int, nbytes: int) -> None:
    status = int(torch.cuda.cudart().cudaHostRegister(address, nbytes, 0))
    if status != 0:
        raise RuntimeError(f"cudaHostRegister failed ({status})")


def _unregister(address: int) -> None:
    torch.cuda.cudart().cudaHostUnregister(address)


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().reshape(-1).view(torch.uint8)


class PackedMover:
    """Two page-locked chunks; pieces of several tensors share a chunk (module docstring)."""

    def __init__(self, overlay: ModuleType, device: Any, chunk_bytes: int, slab: bool) -> None:
        self.overlay = overlay
        self.chunk_bytes = chunk_bytes
        self.chunks = [torch.empty(chunk_bytes, dtype=torch.uint8) for _ in range(2)]
        for chunk in self.chunks:
            _register(chunk.data_ptr(), chunk_bytes)
        self.device = device
        self.stream = torch.cuda.Stream(device=device)
        self.events = [torch.cuda.Event() for _ in self.chunks]
        # Per chunk: (destination bytes, offset in it, size, offset in the chunk, source kept alive)
        self.pieces: List[List[Tuple[torch.Tensor, int, int, int, Optional[torch.Tensor]]]] = [
            [],
            [],
        ]
        self.current = 0
        self.fill = 0
        self.slab = slab
        self.slab_tensor: Optional[torch.Tensor] = None
        self.slab_fill = 0

    def _destination(self, tensor: torch.Tensor) -> torch.Tensor:
        if not self.slab or tensor.nbytes >= SLAB_LIMIT:
            destination = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
            self.overlay._advise_huge_pages(destination)
            return destination
        size = -(-tensor.nbytes // 64) * 64
        if self.slab_tensor is None or self.slab_fill + size > SLAB_BYTES:
            raw = torch.empty(SLAB_BYTES + HUGE_PAGE, dtype=torch.uint8)
            start = -(-raw.data_ptr() // HUGE_PAGE) * HUGE_PAGE - raw.data_ptr()
            self.slab_tensor = raw[start : start + SLAB_BYTES]
            self.overlay._advise_huge_pages(self.slab_tensor)
            self.slab_fill = 0
        view = self.slab_tensor[self.slab_fill : self.slab_fill + tensor.nbytes]
        self.slab_fill += size
        return view.view(tensor.dtype).view(tensor.shape)

    def _seal(self) -> None:
        """Close the chunk being filled and start on the other, once its pieces are out."""
        if self.fill == 0:
            return
        self.events[self.current].record(self.stream)
        self.current = 1 - self.current
        self.fill = 0
        self._drain(self.current)

    def _drain(self, chunk: int) -> None:
        if not self.pieces[chunk]:
            return
        self.events[chunk].synchronize()
        for destination, offset, size, at, _ in self.pieces[chunk]:
            destination[offset : offset + size].copy_(self.chunks[chunk][at : at + size])
        self.pieces[chunk] = []

    def move(self, tensor: torch.Tensor) -> torch.Tensor:
        destination = self._destination(tensor)
        source = _bytes(tensor)
        target = _bytes(destination)
        total = source.numel()
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        large = total > self.chunk_bytes
        for offset in range(0, total, self.chunk_bytes):
            size = min(self.chunk_bytes, total - offset)
            if self.fill + size > self.chunk_bytes:
                self._seal()
            with torch.cuda.stream(self.stream):
                self.chunks[self.current][self.fill : self.fill + size].copy_(
                    source[offset : offset + size], non_blocking=True
                )
            keep = None if large else tensor
            self.pieces[self.current].append((target, offset, size, self.fill, keep))
            self.fill += size
        if large:  # wait for the last piece, so that the caller may free the CUDA tensor
            chunk = self.current
            self._seal()
            self.events[chunk].synchronize()
        return destination

    def close(self) -> None:
        try:
            self._seal()
            self._drain(0)
            self._drain(1)
        finally:
            for chunk in self.chunks:
                _unregister(chunk.data_ptr())
            self.chunks = []


class DirectLockedMover:
    """DMA straight into the page-locked destination, pipelined in pieces (module docstring)."""

    def __init__(self, device: Any, overlay: ModuleType, piece_bytes: int = DIRECT_PIECE) -> None:
        self.overlay = overlay
        self.device = device
        self.piece_bytes = piece_bytes
        self.stream = torch.cuda.Stream(device=device)
        self.cores = os.cpu_count() or 1
        self.fault_pool = ThreadPoolExecutor(self.cores)
        self.fault_lead = ThreadPoolExecutor(1)  # faults in the piece after next
        self.unlock = ThreadPoolExecutor(1)  # unlocks the pieces whose DMA is done
        self.unlocking: List[Future[None]] = []

    def _fault_in(self, address: int, nbytes: int) -> None:
        share = max(HUGE_PAGE, -(-nbytes // self.cores // HUGE_PAGE) * HUGE_PAGE)
        parts = [
            (a, min(share, address + nbytes - a)) for a in range(address, address + nbytes, share)
        ]

        def one(part: Tuple[int, int]) -> None:
            if _libc.madvise(part[0], part[1], MADV_POPULATE_WRITE) != 0:
                raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_WRITE) failed")

        list(self.fault_pool.map(one, parts))

    def move(self, tensor: torch.Tensor) -> torch.Tensor:
        destination = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
        self.overlay._advise_huge_pages(destination)
        source = _bytes(tensor)
        target = _bytes(destination)
        begin = destination.data_ptr()
        end = begin + destination.nbytes
        # Whole pages of the destination only: its first and last page may be another
        # allocation's, which may be locked too; the bytes outside them move by plain copies.
        first = -(-begin // PAGE) * PAGE
        last = end // PAGE * PAGE
        pieces = []
        cut = first
        while cut < last:
            stop = min(last, (cut // HUGE_PAGE) * HUGE_PAGE + self.piece_bytes)
            pieces.append((cut, stop))
            cut = stop
        if first > begin:
            target[: first - begin].copy_(source[: first - begin])
        if end > max(last, first):
            tail = max(last, first) - begin
            target[tail:].copy_(source[tail:])
        self.stream.wait_stream(torch.cuda.current_stream(self.device))
        faulted: List[Future[None]] = [
            self.fault_lead.submit(self._fault_in, a, b - a) for a, b in pieces[:2]
        ]
        events = []
        for index, (a, b) in enumerate(pieces):
            faulted[index].result()
            if index + 2 < len(pieces):
                c, d = pieces[index + 2]
                faulted.append(self.fault_lead.submit(self._fault_in, c, d - c))
            _register(a, b - a)
            with torch.cuda.stream(self.stream):
                target[a - begin : b - begin].copy_(
                    source[a - begin : b - begin], non_blocking=True
                )
                event = torch.cuda.Event()
                event.record(self.stream)
            events.append((event, a))
            if len(events) > 1:
                done, address = events.pop(0)
                self.unlocking.append(self.unlock.submit(self._unlock_after, done, address))
        for done, address in events:
            done.synchronize()
            self.unlocking.append(self.unlock.submit(_unregister, address))
        return destination

    @staticmethod
    def _unlock_after(event: Any, address: int) -> None:
        event.synchronize()
        _unregister(address)

    def close(self) -> None:
        for future in self.unlocking:
            future.result()
        self.unlocking = []
        for pool in (self.fault_pool, self.fault_lead, self.unlock):
            pool.shutdown()
