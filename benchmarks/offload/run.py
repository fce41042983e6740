"""Offload benchmark: host + GPU memory and time of moving a large fp16 model to the CPU.

For each model and strategy, a fresh process builds the model on the GPU, empties the CUDA
cache, and moves the model to the CPU while two probes record host RSS + CUDA reserved
memory: a dispatch mode after every tensor operation (so after every tensor move) and a
sampler thread every millisecond. The overshoot is the peak of that sum above its value at
the start; with the model on the GPU at the start, upstream's ``module.to("cpu")`` overshoots
by about the model size W.

Strategies are named in ``benchmarks/strategies.py`` (``OFFLOAD_STRATEGIES``: ``upstream``,
``step-1GiB-plain``, ``fork``, ``fork-plain``, the other release steps, THP off, page-locking
refused); a new one is an entry there.

Tensor mixes (``--plan shapes`` runs the shapes of issue 10, each probed and unprobed):

* ``llm``: an LLM-like fp16 model, untied 0.98 GiB embedding and output matrix;
* ``small``: one 1 GiB tensor, then fp16 tensors of 2-6 MiB with a 100 MiB one every 40;
* ``fp32-64MiB``: fp32 layers of 64 MiB each;
* ``llama-untied``, ``llama-tied``: transformers ``LlamaForCausalLM`` of the 8B class (hidden
  4096, 14336 MLP, 8 KV heads, 128256 tokens), as many layers as the size allows, built as
  users build it: initialised in fp32 on the GPU, then ``.to(torch.bfloat16)``;
* ``qwen2``: transformers ``Qwen2ForCausalLM`` of the 32B class (hidden 5120, 27648 MLP),
  built the same way;
* ``llm-2gpu``: ``llm`` with every other layer on a second GPU.

Each case also reads the CUDA caching allocator's segments before the move
(``torch.cuda.memory_snapshot()``): ``largest_segment_live_bytes`` is the most memory of
tensors in one segment, which no tensor-by-tensor offload can hand back before all of them
have moved. ``overshoot_floor_bytes``, the larger of it and the largest tensor, is the
overshoot to expect where tensors share segments; it is not a strict bound, since segments
freed earlier also hand back their free blocks, which the start counted.

The driver measures the host's CPU-copy ceiling (:func:`copy_ceiling`) in its own process
before the cases and again after them, and gives each case its fraction of it
(``fraction_of_copy_ceiling``). Result files carry ``provenance`` (``benchmarks/harness.py``).

Usage (on a machine with a GPU; each case runs in a process of its own)::

    python benchmarks/offload/run.py                       # every case, saves the JSON
    python benchmarks/offload/run.py --sizes 3 --out /tmp/offload.json
    python benchmarks/offload/run.py --plan headline --repeats 3 --probe-strategies fork \
        --out offload_headline.json --timing-out offload_headline_timing.json
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness  # noqa: E402  (benchmarks/harness.py: provenance, atomic save, fresh processes)
import strategies  # noqa: E402  (benchmarks/strategies.py: the registry of strategies)
from patched_wheel.splice import load_overlay  # noqa: E402

DEFAULT_OUT = harness.RESULTS / "offload.json"

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

# The shapes of issue 10: each case runs twice, with and without the memory probes.
SHAPES_PLAN: List[Tuple[int, str, List[str]]] = [
    (24, "llm", ["fork"]),
    (64, "llm", ["fork"]),
    (24, "small", ["fork"]),
    (60, "small", ["fork"]),
    (24, "fp32-64MiB", ["fork"]),
    (15, "llama-untied", ["fork"]),
    (14, "llama-tied", ["fork"]),
    (61, "qwen2", ["fork"]),
    (8, "llm", ["fork", "fork-plain", "fork-thp-never", "fork-plain-thp-never", "fork-lock-fails"]),
]

# Several GPUs: run with --plan two-gpus on a machine with two.
TWO_GPUS_PLAN: List[Tuple[int, str, List[str]]] = [(24, "llm-2gpu", ["fork", "fork-plain"])]

# Issue 19 and the README's headline tables, in one run beside the same run's CPU-copy ceiling:
# (size GiB, mix, strategy, probed run, timed runs), most wanted first, since a run cut short
# keeps the cases it finished. The fork against `module.to` and the 1 GiB-step plain move at
# 24 GiB; every shape of issue 19; at 8 GiB, THP off and page-locking refused against the plain
# path.
HEADLINE_CASES: List[Tuple[int, str, str, bool, int]] = [
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

PLANS = {
    "issue": PLAN,
    "shapes": SHAPES_PLAN,
    "two-gpus": TWO_GPUS_PLAN,
}


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
    """A module on the GPU of about ``size_gib`` GiB, of the tensor mix named (module doc)."""
    if mix in TRANSFORMERS_MIXES:
        return build_transformers_model(size_gib, mix)
    import torch

    total = size_gib * GiB
    module = torch.nn.Module()
    hidden = 4096
    devices = [torch.device("cuda", 0)]
    if mix == "llm-2gpu":
        devices.append(torch.device("cuda", 1))

    def add(name: str, *shape: int, dtype: Any = torch.float16, device: int = 0) -> None:
        weight = torch.randn(*shape, dtype=dtype, device=devices[device])
        module.register_parameter(name, torch.nn.Parameter(weight))

    if mix in ("llm", "llm-2gpu"):
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
                add(f"l{layer}_{name}", *shape, device=layer % len(devices))
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
    elif mix == "fp32-64MiB":
        for index in range(total // (64 * MiB)):
            add(f"layer{index}", hidden, hidden, dtype=torch.float32)
    else:
        raise SystemExit(f"unknown mix {mix!r}: see the module's docstring")
    return module


# transformers models: (config class, config arguments, bytes of one layer in bf16)
TRANSFORMERS_MIXES = {
    "llama-untied": (
        "LlamaConfig",
        dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
             num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False),
    ),
    "llama-tied": (
        "LlamaConfig",
        dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
             num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=True),
    ),
    "qwen2": (
        "Qwen2Config",
        dict(hidden_size=5120, intermediate_size=27648, num_attention_heads=40,
             num_key_value_heads=8, vocab_size=152064, tie_word_embeddings=False),
    ),
}  # fmt: skip


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

    chosen = strategies.offload_strategy(strategy)
    if chosen.thp_never:
        strategies.disable_huge_pages_for_this_process()
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
        return host_rss() + used

    copies = {torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default}
    peak = {"ops": 0, "sampler": 0}
    host_peak = [0]

    class PerMove(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:  # type: ignore[override]
            result = func(*args, **(kwargs or {}))
            if func in copies:
                peak["ops"] = max(peak["ops"], combined())
                host_peak[0] = max(host_peak[0], host_rss())
            return result

    probe_warm_up_bytes = 0
    if probes:
        # The first use of a dispatch mode initialises torch's Python dispatch machinery once
        # per process, about 72 MiB of host memory that stays: the probe's own cost, not the
        # move's, so it is paid before the start is read (and recorded here).
        before = host_rss()
        with PerMove():
            torch.ones(4, device="cuda").cpu()
        probe_warm_up_bytes = host_rss() - before
    start = combined()
    peak = {"ops": start, "sampler": start}
    host_start = host_rss()
    host_peak[0] = host_start

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
        "host_after_minus_W_MiB": (host_rss() - rss_start - weight_bytes) / MiB,
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


def print_table(cases: List[Dict[str, Any]]) -> None:
    header = f"{'model':>17} {'strategy':>20} {'overshoot':>10} {'x W':>6} {'-largest':>9} {'-floor':>9} {'time':>7} {'GB/s':>6} {'host-W':>7}"
    print(header)
    print("-" * len(header))
    for c in cases:
        print(
            f"{c['size_gib']:>4} GiB {c['mix']:>8.8s} {c['strategy']:>20}"
            f" {c['overshoot_bytes'] / GiB:>6.2f} GiB {c['overshoot_W']:>6.2f}"
            f" {c['overshoot_over_largest_MiB']:>5.0f} MiB"
            f" {c.get('overshoot_over_floor_MiB', float('nan')):>5.0f} MiB"
            f" {c['seconds']:>6.2f}s {c['GBps']:>6.2f}"
            f" {c['host_after_minus_W_MiB']:>4.0f} MiB"
        )


def copy_ceiling(repeats: int = 5) -> Dict[str, Any]:
    """The host's CPU-copy ceiling: 1 GiB from page-locked memory into fresh huge pages.

    ``copy_`` with every core (torch threads set to ``os.cpu_count()``) into new memory advised
    ``MADV_HUGEPAGE``, each time fresh, as an offload's destinations are: the CPU side of a
    path that bounces through page-locked memory, and the ceiling issue 19 measures the
    offload against. The source is page-locked with ``cudaHostRegister`` on memory of our own
    and unlocked after, so the cases that follow see no page-locked memory of this process.
    """
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


def add_fractions(case: Dict[str, Any], ceiling: Dict[str, Any]) -> None:
    """The case's GB/s as a fraction of the same run's CPU-copy ceiling (best and median)."""
    case["fraction_of_copy_ceiling"] = case["GBps"] / ceiling["GBps"]
    case["fraction_of_median_copy_ceiling"] = case["GBps"] / ceiling["median_GBps"]


def run_one(size: int, mix: str, strategy: str, probes: bool) -> Optional[Dict[str, Any]]:
    """One case in a fresh process, without the fast-path switch of the caller's shell."""
    env = {k: v for k, v in os.environ.items() if k != strategies.FAST_PATH_SWITCH}
    command = [__file__, "--case", f"{size}:{mix}:{strategy}"] + ([] if probes else ["--no-probes"])
    try:
        return harness.run_in_fresh_process(command, env)
    except harness.CaseFailed as error:
        print(f"{size} GiB {mix} {strategy}: failed: {error}", file=sys.stderr, flush=True)
        return None


def selected_cases(args: argparse.Namespace) -> List[Tuple[int, str, str, bool, int]]:
    """(size, mix, strategy, probed run, timed runs) of the plan, as the options select them.

    Timed runs need a file of their own (``--timing-out``) unless nothing is probed
    (``--no-probes``): otherwise they would overwrite the probed cases in ``--out``.
    """
    if args.plan == "headline":
        cases = HEADLINE_CASES
    else:
        cases = [
            (size, mix, strategy, True, args.repeats)
            for size, mix, names in PLANS[args.plan]
            for strategy in names
        ]
    timed_file = bool(args.no_probes or args.timing_out)
    return [
        (
            size,
            mix,
            strategy,
            probed and not args.no_probes and probe_wanted(args, strategy),
            timed if timed_file else 0,
        )
        for size, mix, strategy, probed, timed in cases
        if (not args.sizes or size in args.sizes)
        and (not args.mixes or mix in args.mixes)
        and (not args.strategies or strategy in args.strategies)
    ]


def probe_wanted(args: argparse.Namespace, strategy: str) -> bool:
    return args.probe_strategies is None or strategy in args.probe_strategies


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument(
        "--plan", choices=sorted([*PLANS, "headline"]), default="issue", help="cases to run"
    )
    parser.add_argument("--sizes", type=int, nargs="*", help="model sizes (GiB) to run")
    parser.add_argument("--mixes", nargs="*", help="tensor mixes to run")
    parser.add_argument(
        "--strategies",
        nargs="*",
        choices=list(strategies.OFFLOAD_BY_NAME),
        help="strategies to run (benchmarks/strategies.py)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON file to write")
    parser.add_argument(
        "--no-probes", action="store_true", help="measure time only, without the memory probes"
    )
    parser.add_argument(
        "--timing-out",
        type=Path,
        help="also run every case without probes and write those cases to this file",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs of each timed case, side by side (the headline plan sets its own)",
    )
    parser.add_argument(
        "--probe-strategies",
        nargs="*",
        help="with --timing-out: probe only these strategies (default: every one)",
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.case:
        size, mix, strategy = args.case.split(":")
        harness.print_case_result(run_case(int(size), mix, strategy, probes=not args.no_probes))
        return 0

    record = harness.provenance()
    began = time.perf_counter()
    cases = selected_cases(args)
    warm_up_s = warm_host_memory(max(size for size, *_ in cases) + 8)
    ceiling = copy_ceiling()
    print(f"CPU-copy ceiling: {ceiling['GBps']:.2f} GB/s (median {ceiling['median_GBps']:.2f})")
    probed: List[Dict[str, Any]] = []
    timed: List[Dict[str, Any]] = []
    timing_out = args.timing_out or args.out

    def save() -> None:
        body = {
            "host_warm_up_s": warm_up_s,
            "copy_ceiling": ceiling,
            "total_seconds": time.perf_counter() - began,
        }
        if any(case[3] for case in cases):
            harness.save_result(args.out, "offload", {**body, "cases": probed}, record)
        if any(case[4] for case in cases):
            harness.save_result(timing_out, "offload", {**body, "cases": timed}, record)

    for size, mix, strategy, probe, timed_runs in cases:
        runs = ([(True, 0)] if probe else []) + [(False, repeat) for repeat in range(timed_runs)]
        for probes, repeat in runs:
            case = run_one(size, mix, strategy, probes)
            if case is None:
                continue
            case["repeat"] = repeat
            add_fractions(case, ceiling)
            (probed if probes else timed).append(case)
            print(
                f"{size:>3} GiB {mix:>12} {strategy:>20} {'probed' if probes else 'timed':>6}:"
                f" overshoot {case['overshoot_W']:.3f} W"
                f" ({case['overshoot_over_floor_MiB']:+.0f} MiB over the floor),"
                f" {case['GBps']:.2f} GB/s = {case['fraction_of_copy_ceiling']:.2f} x ceiling",
                flush=True,
            )
            save()
    ceiling["after_cases"] = copy_ceiling()
    save()
    print()
    print_table(probed + timed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
