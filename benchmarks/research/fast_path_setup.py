"""Where the fast path's fixed memory goes: GPU and host memory after each step of its setup.

The offload's overshoot above its floor held about 59 MiB of GPU memory that no tensor
explains. Each order of steps (``--orders``) runs in a fresh process: CUDA is started and
warmed up as the offload runner does (a 16 MiB tensor to the CPU and back), then the GPU
memory in use (``cudaMemGetInfo``, as the runner's probe reads it) and the host's anonymous
RSS are read after every step. The steps are the mover's parts, apart:

* ``stream``: ``torch.cuda.Stream()``;
* ``register``: two 16 MiB host chunks page-locked with ``cudaHostRegister``;
* ``events``: two ``torch.cuda.Event()``;
* ``dma_side`` / ``dma_default``: the first DMA of 16 MiB into a chunk, on the new stream or on
  the default stream, with an event recorded and waited on;
* ``mover``: the overlay's own ``_PinnedBounceMover.create`` and a first ``move`` of 64 MiB;
* ``close``: the chunks unregistered (or the mover closed), then ``empty_cache``.

Usage: ``python -m benchmarks run fast-path-setup --out benchmarks/results/fast_path_setup.json``
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Dict, List

from benchmarks import harness

MiB = 1024 * 1024

ORDERS: Dict[str, List[str]] = {
    "overlay": ["mover", "close"],
    "side-stream": ["stream", "register", "events", "dma_side", "close"],
    "default-stream": ["register", "events", "dma_default", "close"],
    "stream-only": ["stream", "dma_side_unlocked"],
}


def run_order(name: str) -> Dict[str, Any]:
    import torch

    def used() -> Dict[str, float]:
        free, total = torch.cuda.mem_get_info()
        with open("/proc/self/statm") as statm:
            fields = statm.read().split()
        rss = (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")
        return {"gpu_MiB": (total - free) / MiB, "host_MiB": rss / MiB}

    warm = torch.randn(4 * MiB, device="cuda")
    warm.cpu().cuda()
    del warm
    source = torch.randint(0, 255, (64 * MiB,), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    cudart = torch.cuda.cudart()
    state: Dict[str, Any] = {}
    steps = [{"step": "start", **used()}]
    for step in ORDERS[name]:
        if step == "stream":
            state["stream"] = torch.cuda.Stream()
        elif step == "register":
            state["chunks"] = [torch.empty(16 * MiB, dtype=torch.uint8) for _ in range(2)]
            for chunk in state["chunks"]:
                assert int(cudart.cudaHostRegister(chunk.data_ptr(), chunk.nbytes, 0)) == 0
        elif step == "events":
            state["events"] = [torch.cuda.Event(), torch.cuda.Event()]
        elif step in ("dma_side", "dma_default", "dma_side_unlocked"):
            stream = state["stream"] if step != "dma_default" else torch.cuda.current_stream()
            target = (
                state["chunks"][0]
                if "chunks" in state
                else torch.empty(16 * MiB, dtype=torch.uint8)
            )
            event = state.get("events", [torch.cuda.Event()])[0]
            with torch.cuda.stream(stream):
                target.copy_(source[: 16 * MiB], non_blocking=True)
                event.record(stream)
            event.synchronize()
        elif step == "mover":
            overlay = harness.load_overlay()
            state["mover"] = overlay._PinnedBounceMover.create(torch.device("cuda", 0))
            steps.append({"step": "mover_created", **used()})
            state["moved"] = state["mover"].move(source.view(torch.float16))
        elif step == "close":
            if "mover" in state:
                state["mover"].close()
            for chunk in state.get("chunks", []):
                cudart.cudaHostUnregister(chunk.data_ptr())
            state.pop("chunks", None)
            torch.cuda.empty_cache()
        torch.cuda.synchronize()
        steps.append({"step": step, **used()})
    for before, after in zip(steps, steps[1:]):
        after["gpu_delta_MiB"] = after["gpu_MiB"] - before["gpu_MiB"]
        after["host_delta_MiB"] = after["host_MiB"] - before["host_MiB"]
    return {"order": name, "steps": steps}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--orders", nargs="*", default=list(ORDERS), choices=list(ORDERS))
    parser.add_argument("--out", type=Path, default=harness.RESULTS / "fast_path_setup.json")
    args = parser.parse_args()
    if args.case:
        harness.print_case_result(run_order(args.case))
        return 0
    record = harness.provenance()
    orders = []
    for name in args.orders:
        try:
            found = harness.run_in_fresh_process(
                ["-m", "benchmarks.research.fast_path_setup", "--case", name]
            )
        except harness.CaseFailed as error:
            print(f"{name}: failed: {error}", file=sys.stderr, flush=True)
            continue
        orders.append(found)
        for step in found["steps"][1:]:
            print(
                f"{name:>15} {step['step']:>18}: GPU {step['gpu_delta_MiB']:+7.1f} MiB,"
                f" host {step['host_delta_MiB']:+7.1f} MiB",
                flush=True,
            )
        harness.save_result(args.out, "fast_path_setup", {"orders": orders}, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
