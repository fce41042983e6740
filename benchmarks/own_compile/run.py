"""Measure the compile of your own model on your GPU machine, as the benchmark of record
measures its own.

Usage: ``python -m benchmarks run own-compile MODULE:FUNCTION [options]``.

``FUNCTION`` of ``MODULE`` (imported from the folder the command runs in, or from
``PYTHONPATH``) takes no arguments and returns the model, on the GPU as you would compile it,
and its example inputs (a tuple or list of tensors). The compile runs once, in a fresh process,
with the ``torch_tensorrt`` installed in the running Python (the patched wheel or the official
one) and the compile benchmark's own case (``benchmarks/compile/case.py``): the same sampler
process (host RSS and the GPU's used memory every 2 ms), the same phase marks, the same figures.
It prints the peaks, what the compile keeps, the seconds and the phase table, and writes a
result file of the shape every benchmark writes (``--out``, by default ``own_compile.json`` in
the current folder, outside ``benchmarks/results``: the docs read only the benchmark of record).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from benchmarks import harness
from benchmarks.compile.run import MEASURES, NOTES
from evidence import result

DEFAULT_OUT = Path("own_compile.json")
# Keywords of torch_tensorrt.compile that the case sets itself (benchmarks/compile/case.py).
SET_BY_THE_COMMAND = ("ir", "inputs", "min_block_size", "offload_module_to_cpu")
SET_BY_THE_COMMAND += ("use_python_runtime",)
# Printed beside the figures: what the docs' sizing counts that the figures do not.
COUNTING_NOTE = (
    "above the moment just before the compile, with the model on the GPU; the docs' sizing "
    "counts the model too: {shared:.2f} W of host + GPU"
)


def _parse_option(text: str) -> Any:
    """A compile option's value as JSON (``true``, ``0``, ``"fp16"``), else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run own-compile",
        description=__doc__.split("\n\n")[0],
        epilog="Example, a transformers model with random weights: "
        "python -m benchmarks run own-compile benchmarks.own_compile.example:small_llama",
    )
    parser.add_argument("model", metavar="MODULE:FUNCTION", help="returns (model, inputs)")
    parser.add_argument("--offload", choices=["on", "off"], default="off")
    parser.add_argument("--runtime", choices=["cpp", "python"], default="cpp")
    parser.add_argument(
        "--trim", choices=["default", "off"], default="default", help="off: the fork's trim off"
    )
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="another keyword of torch_tensorrt.compile, VALUE as JSON (repeatable)",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds the compile may take"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    module, _, function = args.model.partition(":")
    if not module or not function.isidentifier():
        parser.error(
            f"the model must be MODULE:FUNCTION, such as my_model:build, not {args.model!r}"
        )
    bad = [option for option in args.option if "=" not in option]
    if bad:
        parser.error(f"--option takes NAME=VALUE, such as workspace_size=0, not {bad[0]!r}")
    taken = [o for o in args.option if o.split("=", 1)[0] in SET_BY_THE_COMMAND]
    if taken:
        parser.error(
            f"--option {taken[0]!r}: the command sets it (--offload, --runtime), as the "
            "compile benchmark does (ir=dynamo, min_block_size=1, the model's inputs)"
        )
    return args


def _importable(module: str) -> bool:
    """Whether ``module``'s top-level package can be found from the current folder and
    ``PYTHONPATH``, without importing it (the case's process does that)."""
    top = module.split(".")[0]
    return importlib.machinery.PathFinder.find_spec(top, [os.getcwd(), *sys.path]) is not None


def phase_lines(phases: Sequence[Dict[str, Any]]) -> List[str]:
    """The phase table as text: each phase's span and its host and GPU at its start and the
    host + GPU peak inside it, in W above the moment before the compile."""
    lines = [f"{'phase':<22} {'start s':>8} {'end s':>8} {'host':>7} {'GPU':>7} {'peak':>7}"]
    for phase in phases:
        lines.append(
            f"{phase['name']:<22} {phase['start_s']:>8.2f} {phase['end_s']:>8.2f} "
            f"{phase['host_start_w']:>6.2f}W {phase['gpu_start_w']:>6.2f}W "
            f"{phase['sum_peak_w']:>6.2f}W"
        )
    return lines


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Compile the model once in a fresh process, print what it measured, write the result."""
    args = parse_args(argv)
    module = args.model.partition(":")[0]
    if not _importable(module):
        raise harness.BenchmarkError(
            f"no module {module!r} in {os.getcwd()} or on PYTHONPATH: run the command from the "
            "folder that holds it, or add that folder to PYTHONPATH"
        )
    options = {name: _parse_option(value) for name, value in (o.split("=", 1) for o in args.option)}
    if args.runtime == "python":
        options["use_python_runtime"] = True
    record = result.provenance()

    # The case, as the compile benchmark runs its own: its process imports the model from the
    # current folder, finds torch_tensorrt where the running Python does, and sets the trim.
    spec = {"model": args.model, "offload": args.offload == "on", "options": options}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    env.pop("TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM", None)
    if args.trim == "off":
        env["TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"] = "0"
    command = ["-m", "benchmarks.compile.case", json.dumps(spec)]
    print(f"compiling {args.model} (offload {args.offload}, {args.runtime} runtime)", flush=True)
    try:
        measured = harness.run_in_fresh_process(command, env=env, timeout_s=args.timeout)
    except (harness.CaseFailed, subprocess.TimeoutExpired) as error:
        raise harness.BenchmarkError(f"the compile failed, nothing written: {error}") from None

    # What it measured, then the result file.
    figures = measured.pop("figures")
    counted = {"shared": figures["sum_peak_w"] + 1}
    phase = measured["peak_phase"] or "no phase marked"
    print(
        f"W = {figures['model_gib']:.3f} GiB; host + GPU peak {figures['sum_peak_w']:.2f} W "
        f"(host {figures['host_peak_w']:.2f} W, GPU {figures['gpu_peak_w']:.2f} W), "
        + COUNTING_NOTE.format(**counted),
        f"kept after the compile: host + GPU {figures['sum_kept_w']:.2f} W "
        f"(host {figures['host_kept_w']:.2f} W, GPU {figures['gpu_kept_w']:.2f} W)",
        f"compile {figures['compile_s']:.1f} s; the peak in {phase}",
        *phase_lines(measured["series"]["phases"]),
        sep="\n",
    )
    parameters = {"wheel": "installed", "model": args.model, "offload": args.offload}
    parameters.update(trim=args.trim, runtime=args.runtime, options=options, repeat=1)
    label = f"{args.model}, offload {args.offload}, {args.runtime} runtime"
    case = result.case("own", label, figures, parameters=parameters)
    title = f"host and GPU memory of torch_tensorrt.compile of {args.model}"
    document = result.result(
        "own-compile", title, record, MEASURES, [{**case, **measured}], notes=NOTES[:1]
    )
    result.save(args.out, document)
    print(f"written: {args.out}")
    return 0
