"""Offload benchmark: host + GPU memory and time of moving a large model to the CPU.

Each case runs in a fresh process: it builds a model of one tensor mix on the GPU, empties the
CUDA cache, and moves the model to the CPU with one strategy (:data:`STRATEGIES`) while two
probes (a dispatch mode after every tensor operation and a 1 ms sampler thread) record host
RSS + GPU memory in use. The driver first measures the host's copy ceiling and memory
bandwidth, and gives each case its share of both. ``docsrc/benchmarks.rst`` says what the
figures mean; the result file's ``measures`` say what each one is. On a machine with a GPU::

    python -m benchmarks run offload --plan headline
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Tuple

from benchmarks import harness
from benchmarks.harness import load_overlay
from evidence import RESULTS, memory, result
from evidence.result import Measure

DEFAULT_OUT = RESULTS / "offload_headline.json"
DEFAULT_TIMING_OUT = RESULTS / "offload_headline_timing.json"

MiB = 1024 * 1024
GiB = 1024 * MiB

# The overlay's switch of its fast path (its PINNED_BOUNCE_ENV_VAR).
FAST_PATH_SWITCH = "TORCHTRT_OFFLOAD_PINNED_BOUNCE"
# Bytes of host memory traffic per moved byte, for every strategy here: the bounce (the
# fork's, or the driver's behind ``tensor.to``) writes a chunk by DMA, the CPU reads it, the
# kernel zeroes each fresh destination page and the CPU writes it. Bandwidth / this is the
# fastest move the host's memory allows.
TRAFFIC = 4

Move = Callable[[Any], None]


@dataclass(frozen=True)
class Strategy:
    """A way of moving a module to the CPU: ``prepare(overlay)`` sets this process up and
    returns the move. ``headline`` strategies are the README's columns; ``thp_never`` turns
    transparent huge pages off for the case's process first."""

    label: str
    description: str
    prepare: Callable[[ModuleType], Move]
    headline: bool = False
    thp_never: bool = False


def _module_to(overlay: ModuleType) -> Move:
    import torch

    def move(module: Any) -> None:
        module.to("cpu")
        torch.cuda.empty_cache()

    return move


def _fork(step: int = -1, fast_path: bool = True) -> Callable[[ModuleType], Move]:
    """The fork's ``deallocate_module``, at its default step (``-1``) or at ``step`` bytes."""

    def prepare(overlay: ModuleType) -> Move:
        os.environ[FAST_PATH_SWITCH] = "1" if fast_path else "0"
        if step < 0:
            return overlay.deallocate_module  # type: ignore[no-any-return]
        return lambda module: overlay.deallocate_module(module, release_every_bytes=step)

    return prepare


def _fork_lock_refused(overlay: ModuleType) -> Move:
    """The fork where every ``cudaHostRegister`` fails, as where page-locking is refused."""
    import torch

    real = torch.cuda.cudart()

    class RefusingRuntime:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def cudaHostRegister(self, *args: Any) -> int:
            return 2  # cudaErrorMemoryAllocation

    torch.cuda.cudart = RefusingRuntime  # type: ignore[assignment]
    return _fork()(overlay)


STRATEGIES: Dict[str, Strategy] = {
    "upstream": Strategy(
        "`module.to`",
        '`module.to("cpu")` then `torch.cuda.empty_cache()`: what releases up to 2.14 do',
        _module_to,
        headline=True,
    ),
    "step-1GiB-plain": Strategy(
        "1 GiB-step plain move",
        "the fork's `deallocate_module` with `release_every_bytes=1 GiB` and the fast path off: "
        "the release schedule of upstream main's fix, not upstream's code",
        _fork(step=GiB, fast_path=False),
        headline=True,
    ),
    "fork": Strategy(
        "this fork",
        "the fork's `deallocate_module` as users get it (fast path on, default step)",
        _fork(),
        headline=True,
    ),
    "fork-plain": Strategy(
        "fork, fast path off",
        "the fork's `deallocate_module` with TORCHTRT_OFFLOAD_PINNED_BOUNCE=0 (`tensor.to`)",
        _fork(fast_path=False),
    ),
    "fork-lock-fails": Strategy(
        "fork, page-locking refused",
        "the fork where every `cudaHostRegister` fails (it falls back to `tensor.to`)",
        _fork_lock_refused,
    ),
    "fork-thp-never": Strategy(
        "fork, THP never",
        "the fork with transparent huge pages off for the process",
        _fork(),
        thp_never=True,
    ),
    "fork-plain-thp-never": Strategy(
        "fork, fast path off, THP never",
        "the fork's plain path with transparent huge pages off for the process",
        _fork(fast_path=False),
        thp_never=True,
    ),
}

# (GiB, tensor mix, strategy, probed, timed runs): the README's and docs' figures, most
# wanted first (a run cut short keeps the cases it finished).
PLAN: List[Tuple[int, str, str, bool, int]] = [
    (24, "llm", "fork", True, 3),
    (24, "llm", "upstream", True, 1),
    (24, "llm", "step-1GiB-plain", True, 1),
    (24, "small", "fork", True, 2),
    (14, "llama-tied", "fork", True, 1),
    (8, "llm", "fork-plain", False, 1),
    (8, "llm", "fork-thp-never", False, 1),
    (8, "llm", "fork-plain-thp-never", False, 1),
    (8, "llm", "fork-lock-fails", False, 1),
    (60, "llm", "fork", True, 1),
    (15, "llama-untied", "fork", True, 1),
    (61, "qwen2", "fork", False, 1),
    (60, "small", "fork", False, 1),
]


def warm_host_memory(gib: int) -> float:
    """Touch ``gib`` GiB of host memory once, so that no case pays for the VM's first touch
    (memory that grows on use is backed at about 3 GB/s on first touch); returns its seconds."""
    import torch

    began = time.perf_counter()
    block = torch.ones(gib * GiB, dtype=torch.uint8)
    del block
    return time.perf_counter() - began


# ------------------------------------------------------------------------------------------
# One case, in its own process
# ------------------------------------------------------------------------------------------


def build_model(size_gib: int, mix: str) -> Any:
    """A module of about ``size_gib`` GiB on the GPU, of the mix named (the docs list them)."""
    if mix in TRANSFORMERS_MIXES:
        return build_transformers_model(size_gib, mix)
    import torch

    total = size_gib * GiB
    module = torch.nn.Module()
    hidden = 4096

    def add(name: str, *shape: int, dtype: Any = torch.float16) -> None:
        weight = torch.randn(*shape, dtype=dtype, device="cuda")
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
    elif mix == "small":
        add("large", GiB // 2 // hidden, hidden)
        used = GiB
        index = 0
        generator = torch.Generator().manual_seed(0)
        while used < total - 100 * MiB:
            if index % 40 == 39:
                elements = 50 * MiB
            else:
                elements = int(torch.randint(MiB, 3 * MiB, (1,), generator=generator))
            add(f"t{index}", elements)
            used += 2 * elements
            index += 1
    else:
        raise harness.BenchmarkError(f"unknown mix {mix!r}: see the module's docstring")
    return module


# transformers models: (config class, config arguments)
_LLAMA = dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32)
_LLAMA.update(num_key_value_heads=8, vocab_size=128256)
_QWEN2 = dict(hidden_size=5120, intermediate_size=27648, num_attention_heads=40)
_QWEN2.update(num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False)
TRANSFORMERS_MIXES = {
    "llama-untied": ("LlamaConfig", {**_LLAMA, "tie_word_embeddings": False}),
    "llama-tied": ("LlamaConfig", {**_LLAMA, "tie_word_embeddings": True}),
    "qwen2": ("Qwen2Config", _QWEN2),
}


def build_transformers_model(size_gib: int, mix: str) -> Any:
    """A transformers decoder of about ``size_gib`` GiB in bf16, built as users build one.

    Weights are initialised in fp32 on the GPU, then the model is converted with
    ``.to(torch.bfloat16)``: the bf16 tensors then sit in the caching allocator's segments
    that the fp32 ones left, several to a segment.
    """
    import torch
    import transformers

    class_name, arguments = TRANSFORMERS_MIXES[mix]
    config = getattr(transformers, class_name)(num_hidden_layers=1, **arguments)
    hidden, inner = config.hidden_size, config.intermediate_size
    kv = config.num_key_value_heads * hidden // config.num_attention_heads
    layer_bytes = 2 * (2 * hidden * hidden + 2 * kv * hidden + 3 * hidden * inner)
    embeddings = (1 if config.tie_word_embeddings else 2) * 2 * config.vocab_size * hidden
    layers = max(1, round((size_gib * GiB - embeddings) / layer_bytes))
    # Made again rather than changed: newer transformers derive per-layer settings
    # (``layer_types``) from num_hidden_layers when the config is made.
    config = getattr(transformers, class_name)(num_hidden_layers=layers, **arguments)
    model_class = getattr(transformers, class_name.replace("Config", "ForCausalLM"))
    with torch.device("cuda"):
        model = model_class(config)
    return model.to(torch.bfloat16)


def run_case(size_gib: int, mix: str, strategy: str, probes: bool = True) -> Dict[str, Any]:
    """Build the model, move it with the strategy, and return every figure.

    With ``probes`` off, only the time is measured: the probes' own work (a driver call and a
    read of /proc after every copy, a sampler thread) slows the moves they watch.
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    chosen = STRATEGIES[strategy]
    if chosen.thp_never and ctypes.CDLL(None).prctl(41, 1, 0, 0, 0) != 0:
        raise harness.BenchmarkError("prctl(PR_SET_THP_DISABLE) failed")
    overlay = load_overlay()
    move = chosen.prepare(overlay)
    devices = list(range(torch.cuda.device_count()))

    # Warm up CUDA, the copy engines and the host allocator outside the measured window.
    warm = torch.randn(16 * MiB, device="cuda")
    warm.cpu()
    del warm

    module = build_model(size_gib, mix)
    tensors = {t.data_ptr(): t.nbytes for t in module.state_dict().values() if t.is_cuda}
    device_count = len({t.device for t in module.state_dict().values() if t.is_cuda})
    weight_bytes = sum(p.nbytes for p in module.parameters())
    largest = max(p.nbytes for p in module.parameters())
    for device in devices:
        torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    segments = segment_figures(tensors)

    def combined() -> int:
        # cudaMemGetInfo is a cheap driver call; torch.cuda.memory_reserved() builds the whole
        # statistics dict, and calling it every millisecond slowed the moves 3-4x.
        used = 0
        for device in devices:
            free, total = torch.cuda.mem_get_info(device)
            used += total - free
        return memory.process_bytes() + used

    copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}
    peak = {"ops": 0, "sampler": 0}
    host_peak = [0]

    class PerMove(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
            out = func(*args, **(kwargs or {}))
            if func in copies:
                peak["ops"] = max(peak["ops"], combined())
                host_peak[0] = max(host_peak[0], memory.process_bytes())
            return out

    probe_warm_up_bytes = 0
    if probes:
        # The first use of a dispatch mode initialises torch's Python dispatch machinery once
        # per process, about 72 MiB of host memory that stays: the probe's own cost, not the
        # move's, so it is paid before the start is read (and recorded here).
        before = memory.process_bytes()
        with PerMove():
            torch.ones(4, device="cuda").cpu()
        probe_warm_up_bytes = memory.process_bytes() - before
    start = combined()
    peak = {"ops": start, "sampler": start}
    host_start = memory.process_bytes()
    host_peak[0] = host_start

    stop = threading.Event()
    samples = [0]

    def sampler() -> None:
        while not stop.is_set():
            peak["sampler"] = max(peak["sampler"], combined())
            samples[0] += 1
            time.sleep(0.001)

    thread = threading.Thread(target=sampler, daemon=True)
    rss_start = memory.process_bytes()
    if probes:
        thread.start()
    began = time.perf_counter()
    if probes:
        with PerMove():
            move(module)
    else:
        move(module)
    for device in devices:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - began
    stop.set()
    if probes:
        thread.join()
    assert all(p.device.type == "cpu" for p in module.parameters())
    assert not any(p.is_pinned() for p in module.parameters()), "memory left page-locked"
    overshoot = max(peak.values()) - start
    floor = max(largest, segments["largest_segment_live_bytes"])
    return {
        "size_gib": size_gib,
        "mix": mix,
        "strategy": strategy,
        "probes": probes,
        "torch_threads": torch.get_num_threads(),
        **segments,
        "overshoot_floor_bytes": floor,
        "overshoot_over_floor_MiB": (overshoot - floor) / MiB,
        "devices": device_count,
        "W_bytes": weight_bytes,
        "largest_tensor_bytes": largest,
        "tensors": sum(1 for _ in module.parameters()),
        "overshoot_bytes": overshoot,
        "overshoot_W": overshoot / weight_bytes,
        "overshoot_over_largest_MiB": (overshoot - largest) / MiB,
        "overshoot_ops_bytes": peak["ops"] - start,
        "overshoot_sampler_bytes": peak["sampler"] - start,
        "host_rise_at_copies_bytes": host_peak[0] - host_start,
        "probe_warm_up_host_bytes": probe_warm_up_bytes,
        "sampler_samples": samples[0],
        "seconds": seconds,
        "GBps": weight_bytes / seconds / 1e9,
        "host_after_minus_W_MiB": (memory.process_bytes() - rss_start - weight_bytes) / MiB,
        "cuda_reserved_after_MiB": torch.cuda.memory_reserved() / MiB,
    }


def segment_figures(tensors: Dict[int, int]) -> Dict[str, Any]:
    """The caching allocator's segments that hold the model's tensors (address: bytes).

    A segment's memory goes back to the driver only when every block in it is free, so the
    live bytes of the fullest segment bound what any tensor-by-tensor offload can hand back
    before all of its tensors have moved.
    """
    import bisect

    import torch

    addresses = sorted(tensors)
    largest_live = largest_size = shared = 0
    count = 0
    for segment in torch.cuda.memory_snapshot():
        begin, size = segment["address"], segment["total_size"]
        inside = addresses[
            bisect.bisect_left(addresses, begin) : bisect.bisect_left(addresses, begin + size)
        ]
        live = sum(tensors[address] for address in inside)
        if not live:
            continue
        count += 1
        shared += len(inside) > 1
        if live > largest_live:
            largest_live, largest_size = live, size
    return {
        "segments": count,
        "segments_shared": shared,
        "largest_segment_live_bytes": largest_live,
        "largest_segment_bytes": largest_size,
    }


# ------------------------------------------------------------------------------------------
# The driver: one process per case, a table, a JSON file
# ------------------------------------------------------------------------------------------


def copy_ceiling(repeats: int = 5) -> Dict[str, Any]:
    """The host's CPU-copy ceiling: 1 GiB from page-locked memory into fresh huge pages, with
    every core, as an offload's bounce path writes (``measures``: ``ceiling_GBps``). The source
    is unlocked after, so the cases see no page-locked memory of this process."""
    import torch

    overlay = load_overlay()
    source = torch.ones(GiB, dtype=torch.uint8)
    cudart = torch.cuda.cudart()
    assert int(cudart.cudaHostRegister(source.data_ptr(), GiB, 0)) == 0
    threads = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    rates = []
    try:
        for _ in range(repeats):
            destination = torch.empty(GiB, dtype=torch.uint8)
            overlay._advise_huge_pages(destination)
            began = time.perf_counter()
            destination.copy_(source)
            rates.append(GiB / (time.perf_counter() - began) / 1e9)
            del destination
    finally:
        torch.set_num_threads(threads)
        cudart.cudaHostUnregister(source.data_ptr())
    return {
        "GBps": max(rates),
        "median_GBps": statistics.median(rates),
        "samples_GBps": rates,
        "threads": os.cpu_count(),
        "bytes": GiB,
    }


def host_limit(repeats: int = 3) -> Dict[str, Any]:
    """The host's own limit: its memory bandwidth with every core, and what the offload's
    steps take of it (each figure's ``measures`` entry says how it is taken)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    overlay = load_overlay()
    cores = os.cpu_count() or 1
    threads = torch.get_num_threads()
    torch.set_num_threads(cores)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    pool = ThreadPoolExecutor(cores)
    cudart = torch.cuda.cudart()

    def best(action: Any, nbytes: int) -> float:
        rates = []
        for _ in range(repeats):
            torch.cuda.synchronize()
            began = time.perf_counter()
            action()
            torch.cuda.synchronize()
            rates.append(nbytes / (time.perf_counter() - began) / 1e9)
        return max(rates)

    def fresh(nbytes: int) -> Any:
        tensor = torch.empty(nbytes, dtype=torch.uint8)
        overlay._advise_huge_pages(tensor)
        return tensor

    def fault_in() -> None:
        tensor = fresh(GiB)
        start = -(-tensor.data_ptr() // 4096) * 4096
        end = tensor.data_ptr() + GiB
        share = -(-(end - start) // cores // (2 * MiB)) * 2 * MiB
        parts = [(a, min(share, end - a)) for a in range(start, end, share)]
        list(pool.map(lambda part: libc.madvise(part[0], part[1], 23), parts))

    figures: Dict[str, Any] = {"threads": cores}
    try:
        source = torch.ones(2 * GiB, dtype=torch.uint8)
        target = torch.zeros(2 * GiB, dtype=torch.uint8)
        figures["copy_GBps"] = best(lambda: target.copy_(source), 2 * GiB)
        figures["read_GBps"] = best(lambda: source.view(torch.float32).sum(), 2 * GiB)
        figures["write_GBps"] = best(lambda: target.fill_(7), 2 * GiB)
        del source, target
        figures["fault_in_GBps"] = best(fault_in, GiB)
        device_source = torch.ones(GiB, dtype=torch.uint8, device="cuda")
        pinned = torch.empty(GiB, dtype=torch.uint8)
        assert int(cudart.cudaHostRegister(pinned.data_ptr(), GiB, 0)) == 0
        try:
            figures["dma_pinned_GBps"] = best(
                lambda: pinned.copy_(device_source, non_blocking=True), GiB
            )
            chunk = pinned[: 16 * MiB]
            prefaulted = torch.ones(GiB, dtype=torch.uint8)

            def chunked(destination: Any) -> None:
                for offset in range(0, GiB, 16 * MiB):
                    destination[offset : offset + 16 * MiB].copy_(chunk)

            figures["chunked_copy_fresh_GBps"] = best(lambda: chunked(fresh(GiB)), GiB)
            figures["chunked_copy_prefaulted_GBps"] = best(lambda: chunked(prefaulted), GiB)
            del prefaulted
        finally:
            cudart.cudaHostUnregister(pinned.data_ptr())
        del device_source, pinned
        torch.cuda.empty_cache()
    finally:
        torch.set_num_threads(threads)
        pool.shutdown()
    figures["bandwidth_GBps"] = max(2 * figures["copy_GBps"], figures["read_GBps"])
    figures["limit_GBps"] = {str(TRAFFIC): figures["bandwidth_GBps"] / TRAFFIC}
    return figures


def add_fractions(case: Dict[str, Any], ceiling: Dict[str, Any], limit: Dict[str, Any]) -> None:
    """The case's GB/s as a fraction of the same run's CPU-copy ceiling (best and median) and
    of the host's limit for its strategy's traffic (:func:`host_limit`)."""
    case["fraction_of_copy_ceiling"] = case["GBps"] / ceiling["GBps"]
    case["fraction_of_median_copy_ceiling"] = case["GBps"] / ceiling["median_GBps"]
    case["traffic_bytes_per_byte"] = TRAFFIC
    case["host_limit_GBps"] = limit["limit_GBps"][str(TRAFFIC)]
    case["fraction_of_host_limit"] = case["GBps"] / case["host_limit_GBps"]


# What each figure of a case or of the run's ceilings is (the result file carries it).
MEASURES = (
    Measure("W_bytes", "model size W", "bytes", "bytes of the model's parameters and buffers"),
    Measure("tensors", "tensors", "", "tensors the model holds"),
    Measure(
        "largest_tensor_bytes", "largest tensor", "bytes", "bytes of the model's largest tensor"
    ),
    Measure(
        "segments",
        "segments",
        "",
        "CUDA caching allocator segments holding the model before the move",
    ),
    Measure("segments_shared", "shared segments", "", "segments holding more than one tensor"),
    Measure(
        "largest_segment_live_bytes",
        "fullest segment",
        "bytes",
        "most bytes of tensors in one segment, which no tensor-by-tensor move hands back before "
        "all of them moved",
    ),
    Measure("largest_segment_bytes", "largest segment", "bytes", "bytes of the largest segment"),
    Measure(
        "overshoot_floor_bytes",
        "overshoot floor",
        "bytes",
        "the larger of the largest tensor and the fullest segment",
    ),
    Measure(
        "overshoot_bytes",
        "overshoot",
        "bytes",
        "peak of host RSS + CUDA reserved memory during the move, above its value at the start "
        "(probed runs)",
    ),
    Measure(
        "overshoot_W",
        "overshoot (W)",
        "W",
        "the overshoot in multiples of the model size W: the memory held twice",
    ),
    Measure(
        "overshoot_over_floor_MiB",
        "overshoot - floor",
        "MiB",
        "the overshoot less its floor (target: at most 64 MiB)",
    ),
    Measure(
        "overshoot_over_largest_MiB",
        "overshoot - largest tensor",
        "MiB",
        "the overshoot less the largest tensor",
    ),
    Measure(
        "overshoot_ops_bytes",
        "overshoot, per operation",
        "bytes",
        "the overshoot as the probe after every tensor operation saw it",
    ),
    Measure(
        "overshoot_sampler_bytes",
        "overshoot, sampled",
        "bytes",
        "the overshoot as the 1 ms sampler thread saw it",
    ),
    Measure(
        "host_rise_at_copies_bytes",
        "host rise at copies",
        "bytes",
        "host RSS rise seen at the tensor copies",
    ),
    Measure(
        "probe_warm_up_host_bytes",
        "probe warm-up",
        "bytes",
        "host memory the probes took before the move (left out of the overshoot)",
    ),
    Measure("sampler_samples", "samples", "", "samples the sampler thread took"),
    Measure("seconds", "seconds", "s", "wall time of the move"),
    Measure("GBps", "speed", "GB/s", "model size W / seconds of the move (GB = 1e9 bytes)"),
    Measure(
        "host_after_minus_W_MiB",
        "host after - W",
        "MiB",
        "host RSS after the move less W, above the start",
    ),
    Measure(
        "cuda_reserved_after_MiB",
        "CUDA reserved after",
        "MiB",
        "memory the CUDA caching allocator still reserves after the move",
    ),
    Measure(
        "fraction_of_copy_ceiling",
        "of copy ceiling",
        "",
        "speed / the run's copy ceiling (target 0.75; 0.6 for the small mix's 2-6 MiB tensors)",
    ),
    Measure(
        "fraction_of_median_copy_ceiling",
        "of median copy ceiling",
        "",
        "speed / the median of the copy ceiling's samples",
    ),
    Measure(
        "host_limit_GBps",
        "host limit",
        "GB/s",
        "the host's memory bandwidth over the strategy's bytes of traffic per moved byte",
    ),
    Measure(
        "fraction_of_host_limit", "of host limit", "", "speed / the host limit for the strategy"
    ),
    Measure(
        "ceiling_GBps",
        "copy ceiling",
        "GB/s",
        "1 GiB from page-locked memory into fresh huge pages with every core, best of the "
        "samples",
    ),
    Measure(
        "ceiling_median_GBps", "copy ceiling, median", "GB/s", "the median of the same samples"
    ),
    Measure(
        "copy_GBps", "plain copy", "GB/s", "a large copy between pre-faulted buffers, every core"
    ),
    Measure(
        "read_GBps",
        "read-only pass",
        "GB/s",
        "a read-only pass over pre-faulted memory, every core",
    ),
    Measure("write_GBps", "write pass", "GB/s", "a write pass over pre-faulted memory, every core"),
    Measure("fault_in_GBps", "fault-in", "GB/s", "fresh huge pages faulted in from every core"),
    Measure("dma_pinned_GBps", "DMA into pinned", "GB/s", "a DMA into a reused page-locked buffer"),
    Measure(
        "chunked_copy_fresh_GBps",
        "chunked copy, fresh",
        "GB/s",
        "the fast path's 16 MiB chunked copy into fresh memory",
    ),
    Measure(
        "chunked_copy_prefaulted_GBps",
        "chunked copy, pre-faulted",
        "GB/s",
        "the same copy into memory faulted in before",
    ),
    Measure(
        "bandwidth_GBps",
        "memory bandwidth",
        "GB/s",
        "the larger of 2 x the plain copy and the read-only pass",
    ),
    Measure(
        "limit_2_GBps",
        "limit at 2 bytes of traffic",
        "GB/s",
        "bandwidth / 2 (DMA into the destination)",
    ),
    Measure(
        "limit_4_GBps",
        "limit at 4 bytes of traffic",
        "GB/s",
        "bandwidth / 4 (a path through page-locked chunks)",
    ),
)
# A case's settings, not its figures.
PARAMETERS = ("size_gib", "mix", "strategy", "probes", "repeat", "torch_threads", "devices")
PARAMETERS += ("traffic_bytes_per_byte",)


def _ceiling_case(case_id: str, label: str, ceiling: Dict[str, Any]) -> Dict[str, Any]:
    figures = {"ceiling_GBps": ceiling["GBps"], "ceiling_median_GBps": ceiling["median_GBps"]}
    parameters = {"kind": "ceiling", "threads": ceiling["threads"], "bytes": ceiling["bytes"]}
    series = {"samples_GBps": ceiling["samples_GBps"]}
    return result.case(case_id, label, figures, parameters=parameters, series=series)


def _move_case(raw: Dict[str, Any]) -> Dict[str, Any]:
    """One moved model's case, labelled from :data:`STRATEGIES`."""
    size, mix, name = raw["size_gib"], raw["mix"], raw["strategy"]
    repeat = f"-r{raw['repeat']}" if raw.get("repeat") else ""
    strategy = STRATEGIES[name]
    label = f"{size} GiB {mix}, {strategy.label} (`{name}`)"
    figures = {k: v for k, v in raw.items() if k not in PARAMETERS}
    parameters = {k: raw[k] for k in PARAMETERS if k in raw}
    case_id = f"{size}gib-{mix}-{name}{repeat}"
    return result.case(case_id, label, figures, headline=strategy.headline, parameters=parameters)


def offload_result(
    record: Dict[str, Any],
    cases: List[Dict[str, Any]],
    ceiling: Dict[str, Any],
    limit: Dict[str, Any],
    settings: Dict[str, Any],
) -> Dict[str, Any]:
    """The result file of one run's probed (or timed) cases, with the run's ceilings and the
    host's limit as cases of their own (``parameters.kind``)."""
    entries = [_move_case(raw) for raw in cases]
    entries.append(_ceiling_case("copy-ceiling", "copy ceiling, before the cases", ceiling))
    if "after_cases" in ceiling:
        after = ceiling["after_cases"]
        entries.append(_ceiling_case("copy-ceiling-after", "copy ceiling, after the cases", after))
    figures = {k: v for k, v in limit.items() if k.endswith("_GBps") and k != "limit_GBps"}
    for count, value in limit["limit_GBps"].items():
        figures[f"limit_{count}_GBps"] = value
    parameters = {"kind": "limit", "threads": limit["threads"]}
    entries.append(result.case("host-limit", "the host's limit", figures, parameters=parameters))
    used = dict.fromkeys(raw["strategy"] for raw in cases)
    described = (f"`{n}`: {STRATEGIES[n].description}" for n in used)
    notes = ["Strategies: " + "; ".join(described) + "."]
    notes.append("Cases that share a label are timed repeats of one configuration.")
    probed = any(case.get("probes", True) for case in cases)
    what = "host + GPU memory held during the move (memory probes on)"
    what = what if probed else "speed of the move (no memory probes)"
    title = f"Offloading a model from the GPU to the CPU: {what}, per model and strategy"
    return result.result(
        "offload", title, record, MEASURES, entries, notes=notes, settings=settings
    )


def run_one(size: int, mix: str, strategy: str, probes: bool) -> Optional[Dict[str, Any]]:
    """One case in a fresh process, without the fast-path switch of the caller's shell."""
    env = {k: v for k, v in os.environ.items() if k != FAST_PATH_SWITCH}
    case = f"{size}:{mix}:{strategy}:{int(probes)}"
    command = ["-m", "benchmarks.offload.run", "--case", case]
    try:
        return harness.run_in_fresh_process(command, env)
    except harness.CaseFailed as error:
        print(f"{size} GiB {mix} {strategy}: failed: {error}", file=sys.stderr, flush=True)
        return None


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run offload", description=__doc__.splitlines()[0]
    )
    add = parser.add_argument
    add("--case", help=argparse.SUPPRESS)
    add("--plan", choices=["headline"], default="headline", help="the cases to run")
    add("--out", type=Path, default=DEFAULT_OUT, help="the probed cases' JSON file")
    add("--timing-out", type=Path, default=DEFAULT_TIMING_OUT, help="the timed runs' file")
    return parser.parse_args(argv)


def run(argv: Optional[List[str]] = None) -> int:
    """Run the plan's cases, each in a fresh process (or, with ``--case``, one in this one)."""
    args = parse_args(argv)
    if args.case:
        size, mix, strategy, probes = args.case.split(":")
        harness.print_case_result(run_case(int(size), mix, strategy, probes == "1"))
        return 0

    record = result.provenance()
    began = time.perf_counter()
    warm_up_s = warm_host_memory(max(size for size, *_ in PLAN) + 8)
    ceiling = copy_ceiling()
    print(f"CPU-copy ceiling: {ceiling['GBps']:.2f} GB/s (median {ceiling['median_GBps']:.2f})")
    limit = host_limit()
    figures = [f"{k} {v:.1f}" for k, v in limit.items() if isinstance(v, float)]
    print(f"host limit: {', '.join(figures)}; per traffic count {limit['limit_GBps']}")
    probed: List[Dict[str, Any]] = []
    timed: List[Dict[str, Any]] = []

    def save() -> None:
        settings = {"host_warm_up_s": warm_up_s, "total_seconds": time.perf_counter() - began}
        for path, done in ((args.out, probed), (args.timing_out, timed)):
            if done:
                document = offload_result(record, done, ceiling, limit, settings)
                result.save(path, document)

    for size, mix, strategy, probe, timed_runs in PLAN:
        runs = ([(True, 0)] if probe else []) + [(False, repeat) for repeat in range(timed_runs)]
        for probes, repeat in runs:
            case = run_one(size, mix, strategy, probes)
            if case is None:
                continue
            case["repeat"] = repeat
            add_fractions(case, ceiling, limit)
            (probed if probes else timed).append(case)
            kind = "probed" if probes else "timed"
            print(f"{size} GiB {mix} {strategy} {kind}: {case['overshoot_W']:.3f} W,", end=" ")
            print(f"{case['GBps']:.2f} GB/s", flush=True)
            save()
    ceiling["after_cases"] = copy_ceiling()
    save()
    return 0


if __name__ == "__main__":
    sys.exit(run())
