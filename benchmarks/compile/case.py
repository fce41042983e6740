"""One case of the compile benchmark, in a process of its own (the driver, ``run.py``, starts it).

It builds the model on the GPU, takes PyTorch's output as the reference, starts the sampler
(``sampler.py``) beside itself, wraps upstream's functions so that each call leaves a phase
mark, and compiles with ``torch_tensorrt.compile(model, ir="dynamo", ...)``. Then it measures
what the process keeps (after garbage collection and a release of PyTorch's CUDA cache),
compares the compiled module's output and the original model's (where it was offloaded, on
the CPU, as upstream documents) with the reference, and prints its figures for the driver.

The wheel (official or patched) is whichever ``torch_tensorrt`` the driver put first on
``PYTHONPATH``; the trim setting is the environment's ``TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM``.
"""

from __future__ import annotations

import functools
import gc
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from benchmarks import harness
from benchmarks.compile import sampler
from benchmarks.compile.timeline import Mark, analyse
from evidence import REPOSITORY, memory

GiB = 1 << 30
INTERVAL_S = 0.002  # between two memory samples

# model name: (width, layers) of an fp16 MLP of Linear(width, width) + ReLU, or "llama-8b".
MLPS: Dict[str, Tuple[int, int]] = {
    "mlp-3gib": (4096, 96),
    "mlp-12gib": (8192, 96),
    "mlp-24gib": (8192, 192),
}
MODELS = (*MLPS, "llama-8b")

# Each phase and the upstream callables whose calls mark it: ``phase | module | attribute``. A
# callable that a release lacks is left out (the result lists the phases found).
PHASES = [tuple(part.strip() for part in line.split("|")) for line in """
export | torch_tensorrt.dynamo._tracer | trace
decompositions | torch.export | ExportedProgram.run_decompositions
lowering | torch_tensorrt.dynamo.lowering | post_lowering
offload | torch_tensorrt.dynamo.utils | deallocate_module
partition and convert | torch_tensorrt.dynamo._compiler | compile_module
interpret | torch_tensorrt.dynamo.conversion._conversion | interpret_module_to_result
network | torch_tensorrt.dynamo.conversion._TRTInterpreter | TRTInterpreter._construct_trt_network_def
engine build | tensorrt | Builder.build_serialized_network
engine build | tensorrt | Builder.build_engine_with_config
deserialize | tensorrt | Runtime.deserialize_cuda_engine
serialize | tensorrt | ICudaEngine.serialize
trim | torch_tensorrt.dynamo.utils | release_host_and_device_memory
module creation | torch_tensorrt.dynamo.runtime | TorchTensorRTModule.__init__
module creation | torch_tensorrt.dynamo.runtime | PythonTorchTensorRTModule.__init__
module creation | torch_tensorrt.dynamo.conversion._conversion | _cpp_engine_from_info
""".strip().splitlines()]
# Llama-3.1-8B's shapes (transformers' LlamaConfig), random weights.
LLAMA_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32)
LLAMA_8B.update(num_attention_heads=32, num_key_value_heads=8, vocab_size=128256)
LLAMA_8B.update(rope_theta=500000.0, tie_word_embeddings=False, use_cache=False)


def build_model(name: str) -> Tuple[Any, Tuple[Any, ...]]:
    """The model on the GPU and its example input (``MODULE:FUNCTION``: what that returns).

    The MLPs are He-initialised so that their output keeps its scale through 96 or 192 fp16
    layers (a model whose output is zero would hide any error); the LLM is transformers'
    ``LlamaForCausalLM`` with Llama-3.1-8B's shapes and random weights, built as users build it
    (fp32 on the GPU, then ``.to(torch.bfloat16)``), returning its logits.
    """
    import torch

    torch.manual_seed(0)
    if ":" in name:  # a user's own model: MODULE:FUNCTION returns (model, inputs)
        module_name, function = name.split(":", 1)
        model, inputs = getattr(importlib.import_module(module_name), function)()
        return model, tuple(inputs)
    if name in MLPS:
        width, depth = MLPS[name]
        layers: List[torch.nn.Module] = []
        with torch.device("cuda"):
            for _ in range(depth):
                linear = torch.nn.Linear(width, width, dtype=torch.float16)
                torch.nn.init.kaiming_normal_(linear.weight, nonlinearity="relu")
                torch.nn.init.zeros_(linear.bias)
                layers += [linear, torch.nn.ReLU()]
            return torch.nn.Sequential(*layers).eval(), (
                torch.randn(8, width, dtype=torch.float16),
            )
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**LLAMA_8B)
    with torch.device("cuda"):
        llm = LlamaForCausalLM(config).to(torch.bfloat16).eval()

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.llm = llm

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.llm(input_ids=input_ids, use_cache=False).logits

    ids = torch.randint(0, config.vocab_size, (1, 64), device="cuda")
    return Logits().eval(), (ids,)


def _resolve(module_name: str, path: str) -> Optional[Tuple[Any, str, Any]]:
    """(owner, attribute, callable) for ``module_name`` + ``path``, or None if absent."""
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    *parents, attribute = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent, None)
    target = getattr(owner, attribute, None) if owner is not None else None
    return (owner, attribute, target) if callable(target) else None


def _marking(original: Callable[..., Any], phase: str, marks: List[Mark]) -> Callable[..., Any]:
    """``original``, appending a :class:`Mark` of ``phase`` to ``marks`` at each return."""

    @functools.wraps(original)
    def marked(*args: Any, **kwargs: Any) -> Any:
        start = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            marks.append(Mark(phase, start, time.monotonic()))

    return marked


def install_marks(marks: List[Mark]) -> List[str]:
    """Wrap every callable of :data:`PHASES` so that each call appends a :class:`Mark`.

    A function imported by name into other modules (``from .utils import deallocate_module``)
    is replaced there too, wherever ``sys.modules`` holds the same object. Returns the phases
    found.
    """
    found = []
    for phase, module_name, path in PHASES:
        resolved = _resolve(module_name, path)
        if resolved is None:
            continue
        owner, attribute, original = resolved
        wrapper = _marking(original, phase, marks)
        setattr(owner, attribute, wrapper)
        for module in list(sys.modules.values()):
            if getattr(module, "__name__", "").startswith("torch_tensorrt"):
                for name, value in list(vars(module).items()):
                    if value is original:
                        setattr(module, name, wrapper)
        found.append(phase)
    return list(dict.fromkeys(found))


def _compare(output: Any, reference: Any) -> Dict[str, float]:
    import torch

    output = output[0] if isinstance(output, (tuple, list)) else output
    difference = (output.float().cpu() - reference).abs()
    return {"max_abs_error": float(difference.max()), "mean_abs_error": float(difference.mean())}


# What a user saves a compiled module as: torch_tensorrt.save's output_format, and the file.
SAVE_FORMATS = {"exported_program": "module.ep", "torchscript": "module.ts"}


def _peak_above(samples: Sequence[Tuple[float, int, int]], start: float, end: float) -> int:
    """The largest host + GPU of the samples within ``start..end``, above the last before it."""
    earlier = [h + g for t, h, g in samples if t <= start]
    within = [h + g for t, h, g in samples if start <= t <= end]
    if not earlier or not within:
        return 0
    return max(within) - earlier[-1]


def _save_each_format(
    compiled: Any, inputs: Sequence[Any], folder: Path, python_runtime: bool
) -> Dict[str, Tuple[float, float, Optional[str]]]:
    """Save ``compiled`` in each of :data:`SAVE_FORMATS` (TorchScript only for the C++ runtime's
    modules): ``format: (start, end, error)``."""
    import torch_tensorrt

    spans: Dict[str, Tuple[float, float, Optional[str]]] = {}
    for output_format, name in SAVE_FORMATS.items():
        if output_format == "torchscript" and python_runtime:
            continue
        start, error = time.monotonic(), None
        try:
            torch_tensorrt.save(
                compiled, str(folder / name), output_format=output_format, arg_inputs=list(inputs)
            )
        except Exception as failure:  # a save that fails is a figure too (the official wheel's)
            error = f"{type(failure).__name__}: {failure}"[:500]
        spans[output_format] = (start, time.monotonic(), error)
        time.sleep(0.3)
    return spans


def _start_sampler() -> Tuple["subprocess.Popen[bytes]", Path]:
    """The sampler process beside this one (``sampler.py``), and the file it will write."""
    samples_file = Path(tempfile.mkdtemp()) / "samples.txt"
    sampling = [str(os.getpid()), str(INTERVAL_S), str(samples_file)]
    watcher = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.compile.sampler", *sampling], cwd=REPOSITORY
    )
    return watcher, samples_file


def _stop_sampler(
    watcher: "subprocess.Popen[bytes]", samples_file: Path
) -> List[Tuple[float, int, int]]:
    """Stop the sampler and read what it wrote."""
    watcher.terminate()
    watcher.wait(timeout=60)
    return sampler.read_samples(samples_file)


def load_case(path: str, inputs_file: str) -> Dict[str, Any]:
    """``torch_tensorrt.load`` of a saved module in this fresh process, then one run: the
    host + GPU peak above the values once torch_tensorrt is imported and CUDA is up, and
    whether the outputs equal those saved beside the inputs."""
    import torch
    import torch_tensorrt

    data = torch.load(inputs_file)
    torch.cuda.init()
    gpu_used = sampler.gpu_used_reader()
    watcher, samples_file = _start_sampler()
    time.sleep(0.5)
    before = memory.process_bytes() + gpu_used()
    start = time.monotonic()
    loaded = torch_tensorrt.load(path)
    module = loaded.module() if hasattr(loaded, "module") else loaded
    with torch.no_grad():
        output = module(*data["inputs"])
    torch.cuda.synchronize()
    end = time.monotonic()
    time.sleep(0.5)
    kept = memory.process_bytes() + gpu_used() - before
    samples = _stop_sampler(watcher, samples_file)
    peak = max([h + g for t, h, g in samples if start <= t <= end] or [before]) - before
    output = output[0] if isinstance(output, (tuple, list)) else output
    return {
        "peak_bytes": peak,
        "kept_bytes": kept,
        "seconds": round(end - start, 2),
        "equal": bool(torch.equal(output, data["expected"])),
    }


def run_case(
    model: str,
    offload: bool,
    check_original: bool = False,
    options: Optional[Dict[str, Any]] = None,
    save: bool = False,
) -> Dict[str, Any]:
    """Compile ``model`` once and return the case's figures (module docstring); with ``save``,
    also save the compiled module in each format and load each save in a fresh process."""
    import torch
    import torch_tensorrt

    module, inputs = build_model(model)
    weights_bytes = sum(
        t.numel() * t.element_size() for t in [*module.parameters(), *module.buffers()]
    )
    with torch.no_grad():
        reference = module(*inputs)
        reference = (reference[0] if isinstance(reference, tuple) else reference).float().cpu()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    gpu_used = sampler.gpu_used_reader()
    watcher, samples_file = _start_sampler()
    marks: List[Mark] = []
    phases = install_marks(marks)
    time.sleep(0.5)
    before = (memory.process_bytes(), gpu_used())
    start = time.monotonic()
    compiled = torch_tensorrt.compile(
        module,
        ir="dynamo",
        inputs=list(inputs),
        min_block_size=1,
        offload_module_to_cpu=offload,
        **(options or {}),
    )
    end = time.monotonic()
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    time.sleep(0.5)
    kept = (memory.process_bytes() - before[0], gpu_used() - before[1])
    folder = Path(tempfile.mkdtemp())
    python_runtime = bool((options or {}).get("use_python_runtime"))
    saves = _save_each_format(compiled, inputs, folder, python_runtime) if save else {}
    samples = _stop_sampler(watcher, samples_file)
    analysed = analyse(
        samples,
        marks,
        before=before,
        window=(start, end),
        weights_bytes=weights_bytes,
    )
    figures: Dict[str, Any] = {
        **analysed["figures"],
        "host_kept_w": round(kept[0] / weights_bytes, 4),
        "gpu_kept_w": round(kept[1] / weights_bytes, 4),
        "sum_kept_w": round(sum(kept) / weights_bytes, 4),
        "compile_s": round(end - start, 2),
        "model_gib": round(weights_bytes / GiB, 3),
        "reference_mean_abs": float(reference.abs().mean()),
    }
    with torch.no_grad():
        figures.update(_compare(compiled(*inputs), reference))
        if check_original:
            device = next(module.parameters()).device
            original = _compare(module(*(t.to(device) for t in inputs)), reference)
            figures["original_max_abs_error"] = original["max_abs_error"]
        expected = compiled(*inputs)
    errors: Dict[str, str] = {}
    if saves:
        import torch

        torch.save({"inputs": inputs, "expected": expected}, folder / "inputs.pt")
    for output_format, (save_start, save_end, error) in saves.items():
        short = "ep" if output_format == "exported_program" else "ts"
        if error is not None:
            errors[f"save {output_format}"] = error
            continue
        figures[f"save_{short}_peak_w"] = round(
            _peak_above(samples, save_start, save_end) / weights_bytes, 4
        )
        figures[f"save_{short}_s"] = round(save_end - save_start, 2)
        saved = str(folder / SAVE_FORMATS[output_format])
        spec = {"load": saved, "inputs": str(folder / "inputs.pt")}
        try:
            loaded = harness.run_in_fresh_process(
                ["-m", "benchmarks.compile.case", json.dumps(spec)],
                env=dict(os.environ),
                timeout_s=600,
            )
        except (harness.CaseFailed, subprocess.TimeoutExpired) as failure:
            errors[f"load {output_format}"] = str(failure)[-500:]
            continue
        figures[f"load_{short}_peak_w"] = round(loaded["peak_bytes"] / weights_bytes, 4)
        figures[f"load_{short}_kept_w"] = round(loaded["kept_bytes"] / weights_bytes, 4)
        figures[f"load_{short}_s"] = loaded["seconds"]
        figures[f"load_{short}_equal"] = int(loaded["equal"])
    trt = importlib.import_module("tensorrt")
    return {
        "round_trip_errors": errors,
        "figures": figures,
        "peak_phase": analysed["peak_phase"],
        "phases_found": phases,
        "series": {"timeline": analysed["timeline"], "phases": analysed["phases"]},
        "versions": {
            "torch": torch.__version__,
            "torch_tensorrt": torch_tensorrt.__version__,
            "tensorrt": getattr(trt, "__version__", None),
            "tensorrt_package": getattr(trt, "_package_name", "tensorrt"),
        },
        "model_device_after": str(next(module.parameters()).device),
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m benchmarks.compile.case SPEC``: SPEC is the JSON of :func:`run_case`'s
    keyword arguments (the driver writes it)."""
    spec = json.loads((sys.argv[1:] if argv is None else argv)[0])
    if "load" in spec:
        harness.print_case_result(load_case(spec["load"], spec["inputs"]))
    else:
        harness.print_case_result(run_case(**spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
