"""Ceilings of the offload on one GPU host, and the fast path's variants measured against them.

Ceilings, each on 1 GiB and a fresh destination every time (median of ``--repeats``):

* ``cpu_copy_<n>``: ``copy_`` from a page-locked buffer into fresh huge-page memory with ``n``
  torch threads: the CPU side of a fast path that bounces through page-locked chunks;
* ``fault_in_<n>``: faulting in fresh huge-page memory with ``madvise(MADV_POPULATE_WRITE)``
  from ``n`` threads, and ``fault_in_4k_<n>`` the same with 4 KiB pages: the least work any
  path into new host memory does;
* ``zero_<n>``: ``zero_()`` into fresh huge-page memory with ``n`` torch threads;
* ``dma_pinned``: DMA into a reused page-locked buffer (the link and the copy engine);
* ``dma_locked``: DMA into memory faulted in ahead and page-locked with ``cudaHostRegister``;
  ``lock_s_per_GiB`` and ``unlock_s_per_GiB`` give what locking and unlocking cost, for
  huge pages and for 4 KiB pages.

Variants (``--variants``): ``deallocate_module``'s own steps (the overlay's release schedule
and mover, the mover subclassed only to time its steps) on 8 GiB models of the ``llm`` and
``small`` mixes (``--variant-gib``), with another chunk size, no cache release during the
move (``-no-release``) or a release before every tensor (``-step-0``); ``profile_s`` sums the
seconds of each step (mover creation, cache releases, the mover's ``move`` and its CPU copy
inside it, ``tensor.to`` of the tensors the fast path leaves, ``_apply`` in all, closing,
``gc.collect`` and the final release). (Device call (a) of issue 19 also measured memmove
threads on whole huge pages of the destination, ``pool-*``, against torch's ``copy_``: slower,
so the overlay no longer has them.)

``--decompose`` also times the bounce path's CPU copy in 16 and 32 MiB chunks into fresh
memory, alone and beside a DMA that keeps writing host memory, with torch's copy and with
memmove threads.

Usage (on a machine with a GPU)::

    python -m benchmarks run host-ceilings --decompose --out host_ceilings.json
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Tuple

import torch

from benchmarks import harness
from benchmarks.offload import run

MiB = 1024 * 1024
GiB = 1024 * MiB
HUGE_PAGE = 2 * MiB
MADV_HUGEPAGE, MADV_NOHUGEPAGE, MADV_POPULATE_WRITE = 14, 15, 23

libc = ctypes.CDLL(None, use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.restype = ctypes.c_int


def fresh(nbytes: int, huge: bool = True) -> torch.Tensor:
    """New host memory, not yet faulted in, advised to use huge pages or not to."""
    tensor = torch.empty(nbytes, dtype=torch.uint8)
    start = -(-tensor.data_ptr() // HUGE_PAGE) * HUGE_PAGE
    end = (tensor.data_ptr() + nbytes) // HUGE_PAGE * HUGE_PAGE
    libc.madvise(start, end - start, MADV_HUGEPAGE if huge else MADV_NOHUGEPAGE)
    return tensor


def populate(tensor: torch.Tensor, threads: int, pool: ThreadPoolExecutor) -> None:
    """Fault ``tensor`` in with ``madvise(MADV_POPULATE_WRITE)`` from ``threads`` threads."""
    start = tensor.data_ptr() // 4096 * 4096
    end = tensor.data_ptr() + tensor.nbytes
    share = -(-(end - start) // threads // HUGE_PAGE) * HUGE_PAGE
    parts = [(a, min(share, end - a)) for a in range(start, end, share)]

    def one(part: Any) -> None:
        if libc.madvise(part[0], part[1], MADV_POPULATE_WRITE) != 0:
            raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_WRITE) failed")

    list(pool.map(one, parts))


def median_GBps(action: Callable[[], Any], repeats: int, nbytes: int = GiB) -> float:
    """Median GB/s of ``action`` over ``repeats`` runs."""
    rates = []
    for _ in range(repeats):
        began = time.perf_counter()
        action()
        rates.append(nbytes / (time.perf_counter() - began) / 1e9)
    return statistics.median(rates)


def with_threads(threads: int, action: Callable[[], Any]) -> Callable[[], Any]:
    def run_with() -> Any:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            return action()
        finally:
            torch.set_num_threads(before)

    return run_with


def memmove_in_threads(
    destination: int, source: int, nbytes: int, pool: ThreadPoolExecutor, threads: int
) -> None:
    """``memmove`` split over ``threads`` threads, cut on huge pages of the destination."""
    share = max(HUGE_PAGE, -(-nbytes // threads // HUGE_PAGE) * HUGE_PAGE)
    cuts = [0]
    while cuts[-1] < nbytes:
        cuts.append(min(nbytes, ((destination + cuts[-1]) // share + 1) * share - destination))
    parts = list(zip(cuts[:-1], cuts[1:]))
    list(pool.map(lambda p: ctypes.memmove(destination + p[0], source + p[0], p[1] - p[0]), parts))


def measure_decomposition(repeats: int) -> Dict[str, float]:
    """The bounce path's CPU copy in 16 and 32 MiB chunks: alone, beside a DMA, by memmove threads.

    Each 1 GiB destination is fresh and advised to use huge pages. ``torch`` is one ``copy_``
    per chunk (torch's threads split it where they will); ``memmove`` is one ``memmove`` per
    thread on whole huge pages of the destination.
    """
    cores = os.cpu_count() or 1
    pool = ThreadPoolExecutor(cores)
    pinned = torch.empty(256 * MiB, dtype=torch.uint8, pin_memory=True)
    source = torch.randint(0, 255, (256 * MiB,), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    rates: Dict[str, float] = {}
    for chunk in (16 * MiB, 32 * MiB):
        slot = torch.empty(chunk, dtype=torch.uint8, pin_memory=True)

        def chunked(copy: Callable[[torch.Tensor, int], None], dma: bool) -> Callable[[], None]:
            def action() -> None:
                target = fresh(GiB)
                if dma:  # keep the copy engine writing host memory for the whole copy
                    with torch.cuda.stream(stream):
                        for _ in range(24):
                            pinned.copy_(source, non_blocking=True)
                for offset in range(0, GiB, chunk):
                    copy(target, offset)
                stream.synchronize()

            return action

        def torch_copy(target: torch.Tensor, offset: int) -> None:
            target[offset : offset + chunk].copy_(slot)

        def memmove_copy(target: torch.Tensor, offset: int) -> None:
            memmove_in_threads(target.data_ptr() + offset, slot.data_ptr(), chunk, pool, cores)

        name = f"{chunk // MiB}MiB_chunks"
        rates[f"cpu_copy_{name}"] = median_GBps(chunked(torch_copy, False), repeats)
        rates[f"cpu_copy_{name}_beside_dma"] = median_GBps(chunked(torch_copy, True), repeats)
        rates[f"memmove_{name}"] = median_GBps(chunked(memmove_copy, False), repeats)
        rates[f"memmove_{name}_beside_dma"] = median_GBps(chunked(memmove_copy, True), repeats)
    pool.shutdown()
    return rates


def measure_ceilings(repeats: int) -> Dict[str, Any]:
    cores = os.cpu_count() or 1
    counts = sorted({1, 4, 8, cores})
    pool = ThreadPoolExecutor(cores)
    pinned = torch.empty(GiB, dtype=torch.uint8, pin_memory=True)
    pinned.fill_(1)
    rates: Dict[str, float] = {}
    for n in counts:
        rates[f"cpu_copy_{n}"] = median_GBps(
            with_threads(n, lambda: fresh(GiB).copy_(pinned)), repeats
        )
        rates[f"fault_in_{n}"] = median_GBps(lambda: populate(fresh(GiB), n, pool), repeats)
        rates[f"fault_in_4k_{n}"] = median_GBps(
            lambda: populate(fresh(GiB, huge=False), n, pool), repeats
        )
    rates[f"zero_{cores}"] = median_GBps(with_threads(cores, lambda: fresh(GiB).zero_()), repeats)
    source = torch.randint(0, 255, (GiB,), dtype=torch.uint8, device="cuda")

    def dma_pinned() -> None:
        pinned.copy_(source, non_blocking=True)
        torch.cuda.synchronize()

    rates["dma_pinned"] = median_GBps(dma_pinned, repeats)
    cudart = torch.cuda.cudart()
    lock: Dict[str, float] = {}
    for huge in (True, False):
        name = "huge" if huge else "4k"
        seconds: Dict[str, List[float]] = {"lock": [], "dma": [], "unlock": [], "lock_32MiB": []}
        for _ in range(repeats):
            target = fresh(GiB, huge)
            populate(target, cores, pool)
            began = time.perf_counter()
            assert int(cudart.cudaHostRegister(target.data_ptr(), GiB, 0)) == 0
            seconds["lock"].append(time.perf_counter() - began)
            began = time.perf_counter()
            target.copy_(source, non_blocking=True)
            torch.cuda.synchronize()
            seconds["dma"].append(time.perf_counter() - began)
            began = time.perf_counter()
            cudart.cudaHostUnregister(target.data_ptr())
            seconds["unlock"].append(time.perf_counter() - began)
            began = time.perf_counter()
            base = -(-target.data_ptr() // HUGE_PAGE) * HUGE_PAGE
            pieces = range(base, target.data_ptr() + GiB - 32 * MiB, 32 * MiB)
            for address in pieces:
                assert int(cudart.cudaHostRegister(address, 32 * MiB, 0)) == 0
                cudart.cudaHostUnregister(address)
            seconds["lock_32MiB"].append(
                (time.perf_counter() - began) * GiB / (len(pieces) * 32 * MiB)
            )
            assert torch.equal(target[:4096].cuda(), source[:4096])
            del target
        if huge:
            rates["dma_locked"] = GiB / statistics.median(seconds["dma"]) / 1e9
        lock[f"lock_s_per_GiB_{name}"] = statistics.median(seconds["lock"])
        lock[f"unlock_s_per_GiB_{name}"] = statistics.median(seconds["unlock"])
        lock[f"lock_and_unlock_in_32MiB_pieces_s_per_GiB_{name}"] = statistics.median(
            seconds["lock_32MiB"]
        )
    pool.shutdown()
    return {
        "GBps": rates,
        "lock": lock,
        "ceilings_GBps": {
            "cpu_copy": rates[f"cpu_copy_{cores}"],
            "fault_in": rates[f"fault_in_{cores}"],
        },
    }


# ------------------------------------------------------------------------------------------
# Variants of the fast path, on 8 GiB models, through the overlay's own parts
# ------------------------------------------------------------------------------------------

# name: (chunk bytes, release step)
VARIANTS: Dict[str, Tuple[int, int]] = {
    "chunk-16MiB": (16 * MiB, 16 * MiB),
    "chunk-24MiB": (24 * MiB, 16 * MiB),
    "chunk-32MiB": (32 * MiB, 16 * MiB),
    "chunk-48MiB": (48 * MiB, 16 * MiB),
    "chunk-16MiB-no-release": (16 * MiB, 1 << 50),
    "chunk-32MiB-step-0": (32 * MiB, 0),
}
MIXES = ["llm", "small"]


def profiled_mover_class(overlay: ModuleType) -> Any:
    """The overlay's mover, subclassed to sum the seconds of its steps into ``PROFILE``."""

    class ProfiledMover(overlay._PinnedBounceMover):  # type: ignore[name-defined,misc]
        def move(self, tensor: torch.Tensor) -> torch.Tensor:
            began = time.perf_counter()
            try:
                return super().move(tensor)  # type: ignore[no-any-return]
            finally:
                PROFILE["move"] = PROFILE.get("move", 0.0) + time.perf_counter() - began

        def _copy_pending(self) -> None:
            began = time.perf_counter()
            try:
                super()._copy_pending()
            finally:
                PROFILE["cpu_copy"] = PROFILE.get("cpu_copy", 0.0) + time.perf_counter() - began

    return ProfiledMover


PROFILE: Dict[str, float] = {}


def timed(step: str) -> Any:
    """A context that adds its seconds to ``PROFILE[step]``."""

    @contextlib.contextmanager
    def context() -> Any:
        began = time.perf_counter()
        try:
            yield
        finally:
            PROFILE[step] = PROFILE.get(step, 0.0) + time.perf_counter() - began

    return context()


def offload(overlay: ModuleType, module: Any, variant: Tuple[int, int]) -> None:
    """``deallocate_module``'s steps, with the variant's chunk size and release step, timed."""
    chunk_bytes, step = variant
    mover_class = profiled_mover_class(overlay)
    schedule = overlay._ReleaseSchedule(step)
    movers: Dict[Any, Any] = {}
    with contextlib.ExitStack() as closing:

        def move(tensor: torch.Tensor) -> torch.Tensor:
            if not tensor.is_cuda:
                with timed("tensor_to"):
                    return tensor.to("cpu")
            with timed("release"):
                schedule.before_move(tensor)
            if not overlay._PinnedBounceMover.can_move(tensor):
                with timed("tensor_to"):
                    return tensor.to("cpu")
            if tensor.device not in movers:
                with timed("create"):
                    movers[tensor.device] = mover_class.create(tensor.device, chunk_bytes)
                closing.callback(movers[tensor.device].close)
            return movers[tensor.device].move(tensor)  # type: ignore[no-any-return]

        with timed("apply"):
            module._apply(move)
        began = time.perf_counter()
    PROFILE["close"] = time.perf_counter() - began
    with timed("gc_collect"):
        gc.collect()
    with timed("final_release"):
        torch.cuda.empty_cache()


def time_variant(name: str, mix: str, repeats: int, size_gib: int) -> Dict[str, Any]:
    overlay = run.load_overlay()
    seconds = []
    profiles = []
    for _ in range(repeats):
        module = run.build_model(size_gib, mix)
        sample = {key: t.cpu() for key, t in list(module.state_dict().items())[-3:]}
        nbytes = sum(t.nbytes for t in module.state_dict().values())
        tensors = len(module.state_dict())
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        PROFILE.clear()
        began = time.perf_counter()
        offload(overlay, module, VARIANTS[name])
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - began)
        profiles.append(dict(PROFILE))
        state = module.state_dict()
        assert all(torch.equal(state[key], value) for key, value in sample.items())
        assert not any(t.is_pinned() or t.is_cuda for t in state.values())
        del module, state
    return {
        "variant": name,
        "mix": mix,
        "size_gib": size_gib,
        "tensors": tensors,
        "GBps": nbytes / statistics.median(seconds) / 1e9,
        "seconds": seconds,
        "profile_s": profiles,
    }


def measure_variants(args: argparse.Namespace) -> List[Dict[str, Any]]:
    results = []
    for name in args.variants:
        for mix in args.mixes:
            result = time_variant(name, mix, args.repeats, args.variant_gib)
            results.append(result)
            print(
                f"{name:>24} {mix:>6}: {result['GBps']:6.2f} GB/s {result['profile_s'][-1]}",
                flush=True,
            )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "host_ceilings.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--mixes", nargs="*", default=MIXES)
    parser.add_argument("--variant-gib", type=int, default=8)
    parser.add_argument("--no-variants", action="store_true", help="skip the variants")
    parser.add_argument("--no-ceilings", action="store_true", help="skip the ceilings")
    parser.add_argument(
        "--decompose", action="store_true", help="also time the chunked CPU copy's parts"
    )
    args = parser.parse_args()
    record = harness.provenance()
    run.warm_host_memory(16)
    document: Dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    if args.decompose:
        document["decomposition_GBps"] = measure_decomposition(args.repeats)
        print(json.dumps(document["decomposition_GBps"], indent=1), flush=True)
        harness.save_result(args.out, "offload_ceilings", document, record)
    if not args.no_ceilings:
        document.update(measure_ceilings(args.repeats))
        print(json.dumps(document["GBps"], indent=1), json.dumps(document["lock"], indent=1))
        harness.save_result(args.out, "offload_ceilings", document, record)
    document["variants"] = [] if args.no_variants else measure_variants(args)
    harness.save_result(args.out, "offload_ceilings", document, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
