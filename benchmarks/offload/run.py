"""Offload benchmark: host + GPU memory and time of moving a large fp16 model to the CPU.

For each model and strategy, a fresh process builds the model on the GPU, empties the CUDA
cache, and moves the model to the CPU while two probes record host RSS + CUDA reserved
memory: a dispatch mode after every tensor operation (so after every tensor move) and a
sampler thread every millisecond. The overshoot is the peak of that sum above its value at
the start; with the model on the GPU at the start, upstream's ``module.to("cpu")`` overshoots
by about the model size W.

Strategies:

* ``upstream``: ``module.to("cpu")`` then ``torch.cuda.empty_cache()`` (releases up to 2.14);
* ``step-1GiB-plain``: upstream main's fix, tensor by tensor, cache released every 1 GiB;
* ``fork-plain``: the fork's ``deallocate_module`` with its fast path off
  (``TORCHTRT_OFFLOAD_PINNED_BOUNCE=0``), at the default step;
* ``fork``: the fork's ``deallocate_module`` as users get it;
* ``fork-step-<size>``: the fork with another release step.

Usage (on a machine with a GPU; the full run takes about 6 minutes on an H200)::

    python benchmarks/offload/run.py                       # every case, saves the JSON
    python benchmarks/offload/run.py --sizes 3 --out /tmp/offload.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "offload.json"
sys.path.insert(0, str(REPO / "tools"))

from patched_wheel.overlay import load_overlay  # noqa: E402

MiB = 1024 * 1024
GiB = 1024 * MiB

# (model size in GiB, tensor mix, strategies): the full run.
PLAN: List[Tuple[int, str, List[str]]] = [
    (
        3,
        "llm",
        [
            "upstream",
            "step-1GiB-plain",
            "fork-plain",
            "fork",
            "fork-step-0",
            "fork-step-64MiB",
            "fork-step-256MiB",
        ],
    ),
    (3, "one-large", ["upstream", "fork-plain", "fork"]),
    (
        24,
        "llm",
        ["upstream", "step-1GiB-plain", "fork-plain", "fork", "fork-step-0", "fork-step-64MiB"],
    ),
    (64, "llm", ["upstream", "step-1GiB-plain", "fork-plain", "fork", "fork-step-0"]),
]


def host_rss() -> int:
    """Anonymous resident memory (statm's resident minus shared) of this process, in bytes.

    File-backed pages (the CUDA and torch libraries paged in as new code runs, about 130 MiB
    over a first offload) are left out: the kernel can drop them, and they are not what runs
    a machine out of memory. Page-locked memory is anonymous and counts.
    """
    with open("/proc/self/statm") as statm:
        fields = statm.read().split()
    return (int(fields[1]) - int(fields[2])) * os.sysconf("SC_PAGE_SIZE")


def warm_host_memory(gib: int) -> float:
    """Touch ``gib`` GiB of host memory once, so that no case pays for the VM's first touch.

    A virtual machine whose memory grows on use (as the GPU machines here do) backs each page
    the first time the guest touches it, at about 3 GB/s; a case that ran first would pay that
    and the others not. Returns the seconds it took.
    """
    import torch

    began = time.perf_counter()
    block = torch.ones(gib * GiB, dtype=torch.uint8)
    del block
    return time.perf_counter() - began


# ------------------------------------------------------------------------------------------
# One case, in its own process
# ------------------------------------------------------------------------------------------


def build_model(size_gib: int, mix: str) -> Any:
    """An fp16 module on the GPU of about ``size_gib`` GiB.

    ``llm``: an embedding and an output matrix (32000 or 128256 x 4096), then layers of
    8-64 MiB matrices (q, k, v, o, gate, up, down) and small norm vectors. ``one-large``: one
    tensor of two thirds of the size, then 32 MiB matrices.
    """
    import torch

    total = size_gib * GiB
    module = torch.nn.Module()
    hidden = 4096

    def add(name: str, *shape: int) -> None:
        weight = torch.randn(*shape, dtype=torch.float16, device="cuda")
        module.register_parameter(name, torch.nn.Parameter(weight))

    if mix == "llm":
        vocab = 32000 if size_gib < 8 else 128256
        add("embed", vocab, hidden)
        add("lm_head", vocab, hidden)
        layer_shapes = {
            "q": (hidden, hidden),
            "k": (1024, hidden),
            "v": (1024, hidden),
            "o": (hidden, hidden),
            "gate": (8192, hidden),
            "up": (8192, hidden),
            "down": (hidden, 8192),
            "norm1": (hidden,),
            "norm2": (hidden,),
        }
        layer_bytes = sum(2 * math.prod(s) for s in layer_shapes.values())
        used = 2 * 2 * vocab * hidden
        layer = 0
        while used + layer_bytes <= total:
            for name, shape in layer_shapes.items():
                add(f"l{layer}_{name}", *shape)
            used += layer_bytes
            layer += 1
    elif mix == "one-large":
        add("large", total * 2 // 3 // 2 // hidden, hidden)
        used = module.large.nbytes
        index = 0
        while used + 32 * MiB <= total:
            add(f"m{index}", hidden, hidden)
            used += 32 * MiB
            index += 1
    else:
        raise SystemExit(f"unknown mix {mix!r}: use 'llm' or 'one-large'")
    return module


def strategy_function(strategy: str, overlay: ModuleType) -> Callable[[Any], None]:
    import torch

    def upstream(module: Any) -> None:
        module.to("cpu")
        torch.cuda.empty_cache()

    if strategy == "upstream":
        return upstream
    if strategy == "step-1GiB-plain":
        os.environ[overlay.PINNED_BOUNCE_ENV_VAR] = "0"
        return lambda module: overlay.deallocate_module(module, release_every_bytes=GiB)
    if strategy == "fork-plain":
        os.environ[overlay.PINNED_BOUNCE_ENV_VAR] = "0"
        return overlay.deallocate_module  # type: ignore[no-any-return]
    if strategy == "fork":
        return overlay.deallocate_module  # type: ignore[no-any-return]
    if strategy.startswith("fork-step-"):
        text = strategy[len("fork-step-") :]
        step = int(text[:-3]) * MiB if text.endswith("MiB") else int(text)
        return lambda module: overlay.deallocate_module(module, release_every_bytes=step)
    raise SystemExit(f"unknown strategy {strategy!r}")


def run_case(size_gib: int, mix: str, strategy: str, probes: bool = True) -> Dict[str, Any]:
    """Build the model, move it with the strategy, and return every figure.

    With ``probes`` off, only the time is measured: the probes' own work (a driver call and a
    read of /proc after every copy, a sampler thread) slows the moves they watch.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    overlay = load_overlay()
    move = strategy_function(strategy, overlay)

    # Warm up CUDA, the copy engines and the host allocator outside the measured window.
    warm = torch.randn(16 * MiB, device="cuda")
    warm.cpu()
    del warm

    module = build_model(size_gib, mix)
    weight_bytes = sum(p.nbytes for p in module.parameters())
    largest = max(p.nbytes for p in module.parameters())
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

    def combined() -> int:
        # cudaMemGetInfo is a cheap driver call; torch.cuda.memory_reserved() builds the whole
        # statistics dict, and calling it every millisecond slowed the moves 3-4x.
        free, total = torch.cuda.mem_get_info()
        return host_rss() + total - free

    copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}
    start = combined()
    peak = {"ops": start, "sampler": start}

    class PerMove(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
            result = func(*args, **(kwargs or {}))
            if func in copies:
                peak["ops"] = max(peak["ops"], combined())
            return result

    stop = threading.Event()
    samples = [0]

    def sampler() -> None:
        while not stop.is_set():
            peak["sampler"] = max(peak["sampler"], combined())
            samples[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=sampler, daemon=True)
    rss_start = host_rss()
    if probes:
        thread.start()
    began = time.perf_counter()
    if probes:
        with PerMove():
            move(module)
    else:
        move(module)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    stop.set()
    if probes:
        thread.join()
    assert all(p.device.type == "cpu" for p in module.parameters())
    overshoot = max(peak.values()) - start
    return {
        "size_gib": size_gib,
        "mix": mix,
        "strategy": strategy,
        "probes": probes,
        "W_bytes": weight_bytes,
        "largest_tensor_bytes": largest,
        "tensors": sum(1 for _ in module.parameters()),
        "overshoot_bytes": overshoot,
        "overshoot_W": overshoot / weight_bytes,
        "overshoot_over_largest_MiB": (overshoot - largest) / MiB,
        "overshoot_ops_bytes": peak["ops"] - start,
        "overshoot_sampler_bytes": peak["sampler"] - start,
        "sampler_samples": samples[0],
        "seconds": seconds,
        "GBps": weight_bytes / seconds / 1e9,
        "host_after_minus_W_MiB": (host_rss() - rss_start - weight_bytes) / MiB,
        "cuda_reserved_after_MiB": torch.cuda.memory_reserved() / MiB,
    }


# ------------------------------------------------------------------------------------------
# The driver: one process per case, a table, a JSON file
# ------------------------------------------------------------------------------------------


def machine_info() -> Dict[str, Any]:
    import torch

    def read(path: str) -> Optional[str]:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return None

    meminfo = read("/proc/meminfo") or ""
    cpu = read("/proc/cpuinfo") or ""
    model = next((l.split(":", 1)[1].strip() for l in cpu.splitlines() if "model name" in l), None)
    return {
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "mem_total": next((l for l in meminfo.splitlines() if l.startswith("MemTotal")), None),
        "transparent_hugepage": read("/sys/kernel/mm/transparent_hugepage/enabled"),
    }


def print_table(cases: List[Dict[str, Any]]) -> None:
    header = f"{'model':>12} {'strategy':>18} {'overshoot':>10} {'x W':>6} {'-largest':>9} {'time':>7} {'GB/s':>6} {'host-W':>7}"
    print(header)
    print("-" * len(header))
    for c in cases:
        print(
            f"{c['size_gib']:>4} GiB {c['mix']:>3.3s} {c['strategy']:>18}"
            f" {c['overshoot_bytes'] / GiB:>6.2f} GiB {c['overshoot_W']:>6.2f}"
            f" {c['overshoot_over_largest_MiB']:>5.0f} MiB {c['seconds']:>6.2f}s {c['GBps']:>6.2f}"
            f" {c['host_after_minus_W_MiB']:>4.0f} MiB"
        )


def save(out: Path, machine: Dict[str, Any], cases: List[Dict[str, Any]], seconds: float) -> None:
    """Write the results so far (after every case, so a cut-short run keeps what it measured)."""
    result = {
        "benchmark": "offload",
        "command": " ".join(["python", *sys.argv]),
        "machine": machine,
        "total_seconds": seconds,
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(result, indent=2) + "\n")
    os.replace(temporary, out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--sizes", type=int, nargs="*", help="model sizes (GiB) to run")
    parser.add_argument("--strategies", nargs="*", help="strategies to run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write")
    parser.add_argument(
        "--no-probes", action="store_true", help="measure time only, without the memory probes"
    )
    args = parser.parse_args()
    if args.case:
        size, mix, strategy = args.case.split(":")
        print(json.dumps(run_case(int(size), mix, strategy, probes=not args.no_probes)))
        return 0

    cases: List[Dict[str, Any]] = []
    began = time.perf_counter()
    machine = machine_info()
    sizes = [size for size, _, _ in PLAN if not args.sizes or size in args.sizes]
    machine["host_warm_up_s"] = warm_host_memory(max(sizes) + 8)
    for size, mix, strategies in PLAN:
        if args.sizes and size not in args.sizes:
            continue
        for strategy in strategies:
            if args.strategies and strategy not in args.strategies:
                continue
            env = {k: v for k, v in os.environ.items() if k != "TORCHTRT_OFFLOAD_PINNED_BOUNCE"}
            done = subprocess.run(
                [sys.executable, __file__, "--case", f"{size}:{mix}:{strategy}"]
                + (["--no-probes"] if args.no_probes else []),
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                print(done.stderr, file=sys.stderr)
                print(f"{size} GiB {mix} {strategy}: failed", flush=True)
                continue
            case = json.loads(done.stdout.strip().splitlines()[-1])
            cases.append(case)
            print(
                f"{size:>3} GiB {mix:>9} {strategy:>18}: overshoot {case['overshoot_W']:.3f} W,"
                f" {case['GBps']:.2f} GB/s",
                flush=True,
            )
            save(args.out, machine, cases, time.perf_counter() - began)
    print()
    print_table(cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
