"""Import an installed patched ``torch_tensorrt`` and record what the tests check, as JSON.

Run by the installed-package tests in a subprocess of its own per release, so that each
release's ``torch_tensorrt`` and the answers below never meet another test's modules::

    PYTHONPATH=TARGET:STAND_IN python probe.py --overlay PATH --out FILE [--gpu-bytes N]

The caller puts the installed package (the ``--target`` folder pip installed it into) and the
stand-in ``tensorrt`` first on the import path (``PYTHONPATH``). Where CUDA is not available it also answers the three
questions upstream's import asks of a GPU that is not there: ``torch.cuda.get_device_capability``
and ``torch.cuda.current_device`` (an H200's answers) and, on a CPU build of torch, the class
``torch._C._CudaDeviceProperties`` that upstream's annotations name. These stand for what the
machine lacks; the code under test (the spliced ``torch_tensorrt/dynamo/utils.py`` and the
upstream modules that call it) runs as installed.

The JSON holds facts, not verdicts; the tests assert on them. An import that fails is
recorded with its traceback.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dis
import gc
import importlib
import inspect
import json
import os
import platform
import runpy
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

# The modules of upstream that call the fork's functions, as each release names them.
CALLERS = (
    "torch_tensorrt.dynamo._compiler",
    "torch_tensorrt.dynamo.conversion._TRTInterpreter",
    "torch_tensorrt.dynamo.runtime._MutableTorchTensorRTModule",
    "torch_tensorrt.dynamo.conversion._conversion",
)
UTILS = "torch_tensorrt.dynamo.utils"
# Where a fix not in utils puts its definitions (patch.FIXES' targets, as modules).
CONVERSION = "torch_tensorrt.dynamo.conversion._conversion"
TRIM_VARIABLE = "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"


def answer_for_missing_cuda(torch: Any) -> List[str]:
    """Give the answers upstream's import needs from a GPU this machine lacks; say which."""
    if torch.cuda.is_available():
        return []
    torch.cuda.get_device_capability = lambda device=None: (9, 0)
    torch.cuda.current_device = lambda: 0
    answered = ["torch.cuda.get_device_capability", "torch.cuda.current_device"]
    if not hasattr(torch._C, "_CudaDeviceProperties"):
        torch._C._CudaDeviceProperties = type("_CudaDeviceProperties", (), {})
        answered.append("torch._C._CudaDeviceProperties")
    return answered


def load_overlay(path: Path) -> types.ModuleType:
    """The overlay run from its file (it is not a module of any package here), as a module of
    its own: the installed definitions are compared with its."""
    module = types.ModuleType("torchtrt_fork_overlay_probe")
    module.__dict__.update(runpy.run_path(str(path), run_name=module.__name__))
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # where inspect looks for its source
    return module


def overlay_definitions(path: Path) -> List[str]:
    """Names of the overlay's top-level functions and classes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node.name for node in tree.body if isinstance(node, kinds)]


def code_objects(definition: Any) -> Iterator[types.CodeType]:
    """Every code object of a function or class, nested functions included."""
    if inspect.isclass(definition):
        for member in vars(definition).values():
            function = getattr(member, "__func__", member)
            if inspect.isfunction(function):
                yield from code_objects(function)
        return
    pending = [inspect.unwrap(definition).__code__]
    while pending:
        code = pending.pop()
        yield code
        pending.extend(const for const in code.co_consts if isinstance(const, types.CodeType))


def global_names(definition: Any) -> List[str]:
    """The global names a definition's code loads."""
    names = set()
    for code in code_objects(definition):
        for instruction in dis.get_instructions(code):
            if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names.add(str(instruction.argval))
    return sorted(names)


def installed_definitions(modules: List[Any], names: List[str]) -> Dict[str, Any]:
    """Each name's definition in the first of ``modules`` that has it (``None`` in none)."""
    found = {name: next((m for m in modules if hasattr(m, name)), None) for name in names}
    return {name: module and getattr(module, name) for name, module in found.items()}


def globals_report(installed: Dict[str, Any], overlay: Any) -> Dict[str, Any]:
    """Per fork definition: global names missing from the installed module, or of another kind."""
    unresolved: Dict[str, List[str]] = {}
    different: Dict[str, List[str]] = {}
    checked = 0
    for name, definition in installed.items():
        if definition is None:
            continue
        module = vars(sys.modules[definition.__module__])
        for used in global_names(definition):
            checked += 1
            if used not in module and not hasattr(builtins, used):
                unresolved.setdefault(name, []).append(used)
            elif used in vars(overlay) and type(module[used]) is not type(vars(overlay)[used]):
                different.setdefault(name, []).append(used)
            elif isinstance(vars(overlay).get(used), types.ModuleType):
                if module[used] is not vars(overlay)[used]:
                    different.setdefault(name, []).append(used)
    return {"checked": checked, "unresolved": unresolved, "different": different}


def same_definition(installed: Any, fork: Any) -> Dict[str, bool]:
    """Whether an installed definition is the fork's: its source text and its bytecode."""
    installed_codes = list(code_objects(installed))
    fork_codes = list(code_objects(fork))
    return {
        "module": getattr(installed, "__module__", None),
        "same_source": inspect.getsource(installed) == inspect.getsource(fork),
        "same_bytecode": [c.co_code for c in installed_codes] == [c.co_code for c in fork_codes],
    }


def names_imported_from_utils(module: Any) -> List[str]:
    """Names a caller module imports from ``torch_tensorrt.dynamo.utils``, read from its source."""
    tree = ast.parse(inspect.getsource(module))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == UTILS:
            names.extend(alias.asname or alias.name for alias in node.names)
    return names


def bindings_report(utils: Any, overlay: Any, fork_names: List[str]) -> Dict[str, Any]:
    """Per caller module: each fork function it binds, and whether it is the fork's."""
    report: Dict[str, Any] = {}
    for caller_name in CALLERS:
        caller = importlib.import_module(caller_name)
        bound = [n for n in names_imported_from_utils(caller) if n in fork_names]
        report[caller_name] = {
            name: dict(
                same_definition(getattr(caller, name), getattr(overlay, name)),
                is_utils_attribute=getattr(caller, name) is getattr(utils, name),
            )
            for name in bound
        }
    return report


def trim_report(utils: Any, release: Callable[[], None]) -> Dict[str, Any]:
    """``malloc_trim`` calls made by ``release()`` with the variable unset, ``0`` and ``1``.

    The real glibc ``malloc_trim`` the installed module looks up is wrapped so that each call
    is recorded and still made.
    """
    looked_up = utils._glibc_malloc_trim()
    report: Dict[str, Any] = {"lookup": getattr(looked_up, "__name__", None)}
    if looked_up is None:
        return report
    calls: List[int] = []

    def recording_malloc_trim(pad: int) -> int:
        calls.append(pad)
        return int(looked_up(pad))

    original_lookup = utils._glibc_malloc_trim
    utils._glibc_malloc_trim = lambda: recording_malloc_trim
    try:
        for setting in (None, "0", "1"):
            os.environ.pop(TRIM_VARIABLE, None)
            if setting is not None:
                os.environ[TRIM_VARIABLE] = setting
            calls.clear()
            release()
            report["unset" if setting is None else setting] = list(calls)
    finally:
        utils._glibc_malloc_trim = original_lookup
        os.environ.pop(TRIM_VARIABLE, None)
    return report


def tied_model(torch: Any, device: str, layers: int, width: int) -> Any:
    """A model whose output layer shares the embedding's weight, with a buffer and a small bias."""
    model = torch.nn.Module()
    model.embed = torch.nn.Embedding(width, width, device=device, dtype=torch.float16)
    model.blocks = torch.nn.Sequential(
        *(torch.nn.Linear(width, width, device=device, dtype=torch.float16) for _ in range(layers))
    )
    model.head = torch.nn.Linear(width, width, bias=False, device=device, dtype=torch.float16)
    model.head.weight = model.embed.weight
    model.register_buffer("scale", torch.rand(width, device=device))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.uniform_(-1, 1)
    return model


def offload_report(
    torch: Any, deallocate_module: Callable[..., None], device: str
) -> Dict[str, Any]:
    """Offload a tied model on ``device`` with ``deallocate_module``; what came out."""
    model = tied_model(torch, device, layers=4, width=256)
    reference = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
    deallocate_module(model)
    deallocate_module(model, delete_module=False)  # the call of releases 2.8-2.10
    state = model.state_dict()
    return {
        "devices": sorted({str(t.device) for t in state.values()}),
        "values_equal": all(torch.equal(state[n], reference[n]) for n in reference),
        "tied": model.head.weight is model.embed.weight,
        "parameters_are_parameters": all(
            isinstance(p, torch.nn.Parameter) for p in model.parameters()
        ),
    }


def upstream_report(torch: Any, utils: Any) -> Dict[str, Any]:
    """Results of a few of upstream's own functions in the spliced module."""
    model = torch.nn.Linear(3, 2)
    tensor = torch.arange(6.0).reshape(2, 3)
    return {
        "get_model_device": str(utils.get_model_device(model)),
        "input_is_dynamic": utils.input_is_dynamic([tensor]),
        "unwrap_tensor_dtype_half": str(utils.unwrap_tensor_dtype(tensor.half())),
        "unwrap_tensor_dtype_int": str(utils.unwrap_tensor_dtype(3)),
        "check_output_equal_same": utils.check_output_equal(tensor, tensor.clone()),
        "check_output_equal_other": utils.check_output_equal(tensor, tensor + 1),
    }


def gpu_offload_report(
    torch: Any, deallocate_module: Callable[..., None], size: int
) -> Dict[str, Any]:
    """Offload a real CUDA model of about ``size`` bytes; values, ties and CUDA memory after."""
    width = 4096
    layers = max(1, size // (width * width * 2))
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    reserved_baseline = torch.cuda.memory_reserved()
    model = tied_model(torch, "cuda", layers=layers, width=width)
    reference = {name: t.detach().cpu().clone() for name, t in model.state_dict().items()}
    torch.cuda.synchronize()
    model_bytes = torch.cuda.memory_allocated() - baseline
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    deallocate_module(model)
    seconds = time.perf_counter() - start
    state = model.state_dict()
    return {
        "model_bytes": model_bytes,
        "seconds": seconds,
        "gb_per_s": model_bytes / seconds / 1e9,
        "peak_allocated_over_model": torch.cuda.max_memory_allocated() - baseline - model_bytes,
        "allocated_after": torch.cuda.memory_allocated() - baseline,
        "reserved_over_baseline_after": torch.cuda.memory_reserved() - reserved_baseline,
        "devices": sorted({str(t.device) for t in state.values()}),
        "values_equal": all(torch.equal(state[n], reference[n]) for n in reference),
        "tied": model.head.weight is model.embed.weight,
    }


def probe(args: argparse.Namespace) -> Dict[str, Any]:
    """Everything the tests check, gathered from the installed package."""
    import torch

    report: Dict[str, Any] = {"answered": answer_for_missing_cuda(torch)}
    overlay_path = Path(args.overlay)
    overlay = load_overlay(overlay_path)
    fork_names = overlay_definitions(overlay_path)
    utils = importlib.import_module(UTILS)
    report["utils_file"] = str(Path(utils.__file__).resolve())
    report["torch_tensorrt_version"] = importlib.import_module("torch_tensorrt").__version__
    conversion = importlib.import_module(CONVERSION)
    installed = installed_definitions([utils, conversion], fork_names)
    report["definitions"] = {
        name: definition and same_definition(definition, getattr(overlay, name))
        for name, definition in installed.items()
    }
    report["globals"] = globals_report(installed, overlay)
    report["bindings"] = bindings_report(utils, overlay, fork_names)
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        report["trim"] = trim_report(utils, conversion.release_host_and_device_memory)
    compiler = importlib.import_module("torch_tensorrt.dynamo._compiler")
    report["offload_cpu"] = offload_report(torch, compiler.deallocate_module, "cpu")
    report["upstream"] = upstream_report(torch, utils)
    if args.gpu_bytes:
        report["offload_gpu"] = gpu_offload_report(
            torch, compiler.deallocate_module, args.gpu_bytes
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--overlay", required=True, help="the overlay file")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--gpu-bytes", type=int, default=0, help="offload a CUDA model this big")
    args = parser.parse_args()
    try:
        report = probe(args)
    except BaseException:
        report = {"error": traceback.format_exc()}
    Path(args.out).write_text(json.dumps(report, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
