"""Ceilings of the ways to move a CUDA tensor into new host memory, measured on one GPU.

The candidates for a fast ``deallocate_module``, each measured on fp16 tensors of 1 GiB and
of 32 MiB (the size of a typical weight matrix, where per-tensor costs show), median of
several runs, the destination always freshly allocated as in a real offload:

* ``to_cpu``: ``tensor.to("cpu")``, today's path, into fresh pageable memory;
* ``hugepage_dst``: like ``to_cpu``, but the destination is advised ``MADV_HUGEPAGE`` first;
* ``register_dst``: the destination (huge-page advised) is page-locked with
  ``cudaHostRegister``, copied into by DMA, and unregistered;
* ``bounce``: two reused page-locked chunks; the GPU fills one while the CPU copies the other
  into the huge-page advised destination.

Usage: ``python benchmarks/research/fast_path_ceilings.py [--out results.json]``
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness  # noqa: E402  (benchmarks/harness.py)

MiB = 1024 * 1024
GiB = 1024 * MiB
HUGE_PAGE = 2 * MiB
MADV_HUGEPAGE = 14

libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.madvise.restype = ctypes.c_int


def advise_huge_pages(tensor: torch.Tensor) -> None:
    start = tensor.data_ptr()
    end = start + tensor.nbytes
    aligned_start = (start + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE
    aligned_end = end // HUGE_PAGE * HUGE_PAGE
    if aligned_end > aligned_start:
        libc.madvise(aligned_start, aligned_end - aligned_start, MADV_HUGEPAGE)


def fresh_like(tensor: torch.Tensor, huge: bool) -> torch.Tensor:
    out = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu")
    if huge:
        advise_huge_pages(out)
    return out


def to_cpu(src: torch.Tensor) -> torch.Tensor:
    return src.to("cpu")


def hugepage_dst(src: torch.Tensor) -> torch.Tensor:
    out = fresh_like(src, huge=True)
    out.copy_(src)
    return out


def register_dst(src: torch.Tensor) -> torch.Tensor:
    cudart = torch.cuda.cudart()
    out = fresh_like(src, huge=True)
    assert int(cudart.cudaHostRegister(out.data_ptr(), out.nbytes, 0)) == 0
    out.copy_(src, non_blocking=True)
    torch.cuda.current_stream().synchronize()
    assert int(cudart.cudaHostUnregister(out.data_ptr())) == 0
    return out


class Bounce:
    """Two page-locked chunks, reused for every tensor."""

    def __init__(self, chunk_bytes: int) -> None:
        self.chunk_bytes = chunk_bytes
        self.buffers = [torch.empty(chunk_bytes, dtype=torch.uint8) for _ in range(2)]
        cudart = torch.cuda.cudart()
        for buffer in self.buffers:
            buffer.fill_(0)
            assert int(cudart.cudaHostRegister(buffer.data_ptr(), chunk_bytes, 0)) == 0
        self.stream = torch.cuda.Stream()
        self.events = [torch.cuda.Event(), torch.cuda.Event()]

    def close(self) -> None:
        cudart = torch.cuda.cudart()
        for buffer in self.buffers:
            assert int(cudart.cudaHostUnregister(buffer.data_ptr())) == 0

    def move(self, src: torch.Tensor) -> torch.Tensor:
        out = fresh_like(src, huge=True)
        src_bytes = src.view(-1).view(torch.uint8)
        out_bytes = out.view(-1).view(torch.uint8)
        total = src_bytes.numel()
        chunks = [(o, min(self.chunk_bytes, total - o)) for o in range(0, total, self.chunk_bytes)]
        self.stream.wait_stream(torch.cuda.current_stream())

        def start(index: int) -> None:
            offset, size = chunks[index]
            slot = index % 2
            with torch.cuda.stream(self.stream):
                self.buffers[slot][:size].copy_(
                    src_bytes[offset : offset + size], non_blocking=True
                )
                self.events[slot].record(self.stream)

        start(0)
        for index, (offset, size) in enumerate(chunks):
            if index + 1 < len(chunks):
                start(index + 1)
            slot = index % 2
            self.events[slot].synchronize()
            out_bytes[offset : offset + size].copy_(self.buffers[slot][:size])
        return out


def time_move(move: Callable[[torch.Tensor], torch.Tensor], size: int, repeats: int) -> float:
    """Median GB/s of moving ``repeats`` x (1 GiB / size) fresh tensors."""
    count = max(1, GiB // size)
    rates: List[float] = []
    for repeat in range(repeats + 1):
        sources = [torch.randn(size // 2, dtype=torch.float16, device="cuda") for _ in range(count)]
        torch.cuda.synchronize()
        began = time.perf_counter()
        outs = [move(s) for s in sources]
        torch.cuda.synchronize()
        seconds = time.perf_counter() - began
        if repeat == 0:  # warm-up
            assert all(torch.equal(o, s.cpu()) for o, s in zip(outs[:2], sources[:2]))
        else:
            rates.append(count * size / seconds / 1e9)
        del outs, sources
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="fast_path_ceilings.json")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    record = harness.provenance()
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        thp = f.read().strip()
    info: Dict[str, object] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cpus": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "kernel": platform.release(),
        "thp": thp,
        "host_emptyCache": hasattr(torch._C, "_host_emptyCache"),
    }
    print(info)
    results: Dict[str, Dict[str, float]] = {}
    bounces = {f"bounce_{c // MiB}MiB": Bounce(c) for c in (8 * MiB, 32 * MiB)}
    candidates: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "to_cpu": to_cpu,
        "hugepage_dst": hugepage_dst,
        "register_dst": register_dst,
        **{name: b.move for name, b in bounces.items()},
    }
    for name, move in candidates.items():
        results[name] = {}
        for size in (GiB, 32 * MiB):
            rate = time_move(move, size, args.repeats)
            results[name][f"{size // MiB}MiB"] = rate
            print(f"{name:16s} {size // MiB:5d} MiB tensors: {rate:6.2f} GB/s", flush=True)
    for b in bounces.values():
        b.close()
    harness.save_result(
        Path(args.out), "fast_path_ceilings", {"machine": info, "GBps": results}, record
    )


if __name__ == "__main__":
    main()
