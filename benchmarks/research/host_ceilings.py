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

``ceilings_GBps`` names the two that ``run.py --ceilings`` compares each model with:
``cpu_copy`` (the CPU copy with every core, the ceiling issue 10 names) and ``fault_in``
(faulting in with every core).

Variants: ``deallocate_module`` on 4 GiB models of several tensor mixes (``run.py``'s), in
this process: the fast path as it is (``fast``), with ``n`` worker threads faulting the
destinations in ahead of the copy (``fault-ahead-<n>``, a variant of this script that the
overlay does not ship: it measured slower), the fast path off (``plain``), and,
given ``--old-overlay``, an older overlay file (``old``, ``old-<n>MiB`` with other chunks,
``-4k`` without the huge-page advice, ``-memmove`` with the CPU copy made by memmove
threads); some run again with transparent huge pages off for the process (``-thp-never``).

``--decompose`` also times the bounce path's CPU copy in 16 MiB chunks into fresh memory,
alone and beside a DMA that keeps writing host memory, with torch's copy and with memmove
threads.

Usage (on a machine with a GPU)::

    python benchmarks/offload/host_ceilings.py --out offload_ceilings.json
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402  (run.py beside this file: models, machine info, the overlay)

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
    """The bounce path's CPU copy in 16 MiB chunks: alone, beside a DMA, by memmove threads."""
    cores = os.cpu_count() or 1
    pool = ThreadPoolExecutor(cores)
    slot = torch.empty(16 * MiB, dtype=torch.uint8, pin_memory=True)
    pinned = torch.empty(256 * MiB, dtype=torch.uint8, pin_memory=True)
    source = torch.randint(0, 255, (256 * MiB,), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()

    def chunked(copy: Callable[[torch.Tensor, int], None], dma: bool) -> Callable[[], None]:
        def action() -> None:
            target = fresh(GiB)
            if dma:  # keep the copy engine writing host memory for the whole copy
                with torch.cuda.stream(stream):
                    for _ in range(24):
                        pinned.copy_(source, non_blocking=True)
            for offset in range(0, GiB, 16 * MiB):
                copy(target, offset)
            stream.synchronize()

        return action

    def torch_copy(target: torch.Tensor, offset: int) -> None:
        target[offset : offset + 16 * MiB].copy_(slot)

    def memmove_copy(target: torch.Tensor, offset: int) -> None:
        memmove_in_threads(target.data_ptr() + offset, slot.data_ptr(), 16 * MiB, pool, cores)

    rates = {
        "cpu_copy_16MiB_chunks": median_GBps(chunked(torch_copy, False), repeats),
        "cpu_copy_16MiB_chunks_beside_dma": median_GBps(chunked(torch_copy, True), repeats),
        "memmove_16MiB_chunks": median_GBps(chunked(memmove_copy, False), repeats),
        "memmove_16MiB_chunks_beside_dma": median_GBps(chunked(memmove_copy, True), repeats),
    }
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
# Variants of the fast path, on 4 GiB models
# ------------------------------------------------------------------------------------------

VARIANTS = ["fast", "fault-ahead-8", "fault-ahead-16", "old", "plain"]
MIXES = ["llm", "small", "fp32-64MiB", "one-large"]


ADVISE: Dict[int, Any] = {}


def load_old_overlay(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("torchtrt_old_overlay", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ADVISE[id(module)] = module._advise_huge_pages
    COPY_PENDING[id(module)] = module._PinnedBounceMover._copy_pending
    return module


COPY_PENDING: Dict[int, Any] = {}
POOL = ThreadPoolExecutor(os.cpu_count() or 1)


def memmove_copy_pending(self: Any) -> None:
    """The old fast path's CPU copy, made by memmove threads instead of torch's copy_."""
    if self.pending is None:
        return
    destination_bytes, offset, slot = self.pending
    self.pending = None
    self.events[slot].synchronize()
    size = min(self.slots[slot].numel(), destination_bytes.numel() - offset)
    address = destination_bytes.data_ptr() + offset
    memmove_in_threads(address, self.slots[slot].data_ptr(), size, POOL, os.cpu_count() or 1)


def variant_move(variant: str, old: Optional[ModuleType]) -> Optional[Callable[[Any], None]]:
    """The offload of one variant, with the overlay's settings changed for it."""
    overlay = run.load_overlay()
    restore_overlay(overlay)
    os.environ[overlay.PINNED_BOUNCE_ENV_VAR] = "0" if variant == "plain" else "1"
    if variant.startswith("old"):
        if old is None:
            return None
        parts = variant.split("-")
        old._PinnedBounceMover._copy_pending = (
            memmove_copy_pending if "memmove" in parts else COPY_PENDING[id(old)]
        )
        sizes = [int(part[:-3]) for part in parts if part.endswith("MiB")]
        old.PINNED_BOUNCE_CHUNK_BYTES = (sizes[0] if sizes else 16) * MiB
        old._advise_huge_pages = (lambda t: None) if "4k" in parts else ADVISE[id(old)]
        return old.deallocate_module  # type: ignore[no-any-return]
    if variant.startswith("fault-ahead-"):
        fault_ahead(overlay, int(variant.split("-")[2]))
    if variant.endswith("profiled"):
        profile_mover(overlay)
    return overlay.deallocate_module  # type: ignore[no-any-return]


# What the variants replace in the overlay (loaded once per process), as it was at first.
PATCHED_MOVER_METHODS = ("move", "_copy_pending", "close")
ORIGINALS: Dict[str, Any] = {}


def restore_overlay(overlay: ModuleType) -> None:
    """Undo what an earlier variant replaced in the overlay (remembering it the first time)."""
    mover = overlay._PinnedBounceMover
    if not ORIGINALS:
        ORIGINALS["_advise_huge_pages"] = overlay._advise_huge_pages
        ORIGINALS.update({name: getattr(mover, name) for name in PATCHED_MOVER_METHODS})
    overlay._advise_huge_pages = ORIGINALS["_advise_huge_pages"]
    for name in PATCHED_MOVER_METHODS:
        setattr(mover, name, ORIGINALS[name])


FAULT_AHEAD_BYTES = 8 * MiB


def fault_ahead(overlay: ModuleType, threads: int) -> None:
    """The fast path with ``threads`` workers faulting each destination in ahead of its copy.

    A variant measured against the shipped fast path (which has no workers): every new
    destination, once advised to use huge pages, is handed to the workers in tasks of
    FAULT_AHEAD_BYTES that fault its pages in with ``madvise(MADV_POPULATE_WRITE)`` (which
    never writes the bytes a copy may have written already); ``close`` cancels what is left.
    """
    pool = ThreadPoolExecutor(threads, thread_name_prefix="fault-ahead")
    advise, close = overlay._advise_huge_pages, overlay._PinnedBounceMover.close

    def advise_and_fault_in(destination: torch.Tensor) -> None:
        advise(destination)
        address, end = destination.data_ptr(), destination.data_ptr() + destination.nbytes
        while address < end:
            cut = min(end, (address // FAULT_AHEAD_BYTES + 1) * FAULT_AHEAD_BYTES)
            first = address // 4096 * 4096
            # ``destination`` rides along so that its memory outlives the task.
            pool.submit(
                lambda t, a, n: libc.madvise(a, n, MADV_POPULATE_WRITE),
                destination,
                first,
                cut - first,
            )
            address = cut

    def close_and_cancel(self: Any) -> None:
        try:
            close(self)
        finally:
            pool.shutdown(cancel_futures=True)

    overlay._advise_huge_pages = advise_and_fault_in
    overlay._PinnedBounceMover.close = close_and_cancel


PROFILE: Dict[str, float] = {}


def profile_mover(overlay: ModuleType) -> None:
    """Sum the seconds spent in the fast path's steps into PROFILE (the lock: thread-seconds)."""
    mover = overlay._PinnedBounceMover
    for name in PATCHED_MOVER_METHODS:
        original = getattr(mover, name)

        def timed(*args: Any, _original: Any = original, _name: str = name) -> Any:
            began = time.perf_counter()
            try:
                return _original(*args)
            finally:
                PROFILE[_name] = PROFILE.get(_name, 0.0) + time.perf_counter() - began

        setattr(mover, name, timed)


def time_variant(move: Callable[[Any], None], mix: str, repeats: int) -> Dict[str, Any]:
    seconds = []
    for _ in range(repeats):
        module = run.build_model(4, mix)
        sample = {name: t.cpu() for name, t in list(module.state_dict().items())[-3:]}
        nbytes = sum(t.nbytes for t in module.state_dict().values())
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        began = time.perf_counter()
        move(module)
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - began)
        state = module.state_dict()
        assert all(torch.equal(state[name], value) for name, value in sample.items())
        assert not any(t.is_pinned() or t.is_cuda for t in state.values())
        del module, state
    return {"mix": mix, "GBps": nbytes / statistics.median(seconds) / 1e9, "seconds": seconds}


def measure_variants(args: argparse.Namespace) -> List[Dict[str, Any]]:
    old = load_old_overlay(args.old_overlay) if args.old_overlay else None
    results = []
    for variant in args.variants:
        move = variant_move(variant, old)
        if move is None:
            continue
        for mix in args.mixes:
            repeats = 1 if variant == "plain" else args.repeats
            if variant == "plain" and mix != "llm":
                continue
            result = time_variant(move, mix, repeats)
            result["variant"] = variant + ("-thp-never" if args.thp_never else "")
            if PROFILE:
                result["profile_s"] = dict(PROFILE)
                print({k: round(v, 3) for k, v in PROFILE.items()}, flush=True)
                PROFILE.clear()
            results.append(result)
            print(f"{result['variant']:>28} {mix:>11}: {result['GBps']:6.2f} GB/s", flush=True)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("offload_ceilings.json"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", nargs="*", default=VARIANTS)
    parser.add_argument("--mixes", nargs="*", default=MIXES)
    parser.add_argument("--old-overlay", type=Path, help="an older overlay file to compare")
    parser.add_argument(
        "--thp-variants",
        nargs="*",
        default=["fast", "fault-ahead-16", "plain"],
        help="variants to run again with transparent huge pages off",
    )
    parser.add_argument("--no-ceilings", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--thp-never", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--decompose", action="store_true", help="also time the chunked CPU copy's parts"
    )
    args = parser.parse_args()
    if args.thp_never:  # the child process of the run with huge pages off
        run.disable_huge_pages_for_this_process()
        print(json.dumps(measure_variants(args)))
        return 0
    run.warm_host_memory(16)
    document: Dict[str, Any] = {
        "benchmark": "offload_ceilings",
        "command": " ".join(["python", *sys.argv]),
        "machine": {**run.machine_info(), "torch_threads": torch.get_num_threads()},
    }
    if args.decompose:
        document["decomposition_GBps"] = measure_decomposition(args.repeats)
        print(json.dumps(document["decomposition_GBps"], indent=1), flush=True)
    if not args.no_ceilings:
        document.update(measure_ceilings(args.repeats))
        print(json.dumps(document["GBps"], indent=1), json.dumps(document["lock"], indent=1))
    document["variants"] = measure_variants(args)
    child = [sys.executable, __file__, "--thp-never", "--repeats", "1", "--mixes", "llm", "small"]
    child += ["--variants", *args.thp_variants]
    child += ["--old-overlay", str(args.old_overlay)] if args.old_overlay else []
    done = subprocess.run(child, capture_output=True, text=True)
    if done.returncode == 0:
        document["variants"] += json.loads(done.stdout.strip().splitlines()[-1])
    else:
        print(done.stderr[-3000:], file=sys.stderr)
    temporary = args.out.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(temporary, args.out)
    print()
    for name, value in document.get("GBps", {}).items():
        print(f"{name:>24} {value:7.2f} GB/s")
    for result in document["variants"]:
        print(f"{result['variant']:>28} {result['mix']:>11} {result['GBps']:7.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
