"""Compile benchmark: host and GPU memory of a real ``torch_tensorrt.compile``, official wheel
against the fork's, on TensorRT-RTX (the fork's benchmark of record).

Each case is one compile in a fresh process (``case.py``) while a sampler process
(``sampler.py``) reads its resident set and the GPU's used memory every 2 ms: the peaks of
host, GPU and host + GPU at one instant above the values before the compile (bytes, and W,
the model's size), what the process keeps, the seconds, the compiled module's and the
original model's error, and the phase timeline (``case.PHASES``).

Wheels are named folders, each a ``pip install --target`` of one ``torch_tensorrt`` wheel
(``--wheels official=DIR fork=DIR``), TensorRT-RTX sits in ``--trt DIR``. Repeats alternate the
wheels' order. ``trim=off`` sets ``TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM=0``, which changes only
the fork, so the official wheel skips it. Which wheels to fetch, how they reach the GPU
machine (no network there) and the command: the docs' benchmarks page, section "A real
compile". ``--plan record`` took 9 minutes on an H200 host.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Set, Tuple

from benchmarks import harness
from benchmarks.compile.case import MODELS
from evidence import RESULTS, result
from evidence.result import Measure

DEFAULT_OUT = RESULTS / "compile.json"


class Setting(NamedTuple):
    """One case of a plan, run once per wheel: model, offload, trim, the runtime (``cpp``, the
    default, or ``python``: ``use_python_runtime=True``), more compile options."""

    model: str
    offload: str
    trim: str = "default"
    runtime: str = "cpp"
    options: Tuple[Tuple[str, Any], ...] = ()
    save: bool = False


PLANS: Dict[str, List[Setting]] = {
    "smoke": [Setting("mlp-3gib", "on")],
    "record": [
        Setting("mlp-3gib", "on", save=True),
        Setting("mlp-3gib", "on", runtime="python"),
        Setting("mlp-3gib", "on", "off"),
        Setting("mlp-3gib", "off"),
        Setting("mlp-12gib", "on"),
        Setting("mlp-12gib", "on", runtime="python"),
    ],
    # one plan each: a call on the GPU machine may run 10 minutes
    "llama-8b": [Setting("llama-8b", "on")],
    "mlp-24gib": [Setting("mlp-24gib", "on")],
    # upstream's settings that change where the engine's bytes live, at their cost
    "settings": [
        Setting("mlp-3gib", "on", runtime="python"),
        Setting("mlp-3gib", "on", options=(("immutable_weights", False),)),
        Setting(
            "mlp-3gib", "on", options=(("immutable_weights", False), ("strip_engine_weights", True))
        ),
    ],
}

MEASURES = (
    Measure(
        "sum_peak_w",
        "host + GPU peak",
        "W",
        "the largest sum of host RSS and GPU used memory at one sample, above the sum before "
        "the compile, in multiples of the model's size W",
    ),
    Measure("host_peak_w", "host peak", "W", "host RSS peak above its value before"),
    Measure("gpu_peak_w", "GPU peak", "W", "GPU used memory peak above its value before"),
    Measure(
        "sum_kept_w",
        "host + GPU kept",
        "W",
        "host + GPU after the compile (after gc and a CUDA cache release), above the sum before",
    ),
    Measure("host_kept_w", "host kept", "W", "host RSS after the compile, above before"),
    Measure("gpu_kept_w", "GPU kept", "W", "GPU used memory after the compile, above before"),
    Measure("sum_peak_bytes", "host + GPU peak", "bytes", "as sum_peak_w"),
    Measure("host_peak_bytes", "host peak", "bytes", "as host_peak_w"),
    Measure("gpu_peak_bytes", "GPU peak", "bytes", "as gpu_peak_w"),
    Measure("compile_s", "compile", "s", "seconds of torch_tensorrt.compile"),
    Measure("model_gib", "W", "GiB", "the model's parameters and buffers"),
    Measure(
        "max_abs_error",
        "max error",
        "",
        "largest absolute difference of the compiled module's output from PyTorch's",
    ),
    Measure("mean_abs_error", "mean error", "", "its mean"),
    Measure("reference_mean_abs", "output scale", "", "mean absolute value of PyTorch's output"),
    Measure(
        "original_max_abs_error",
        "original model's max error",
        "",
        "the user's model run after the compile (on the CPU after an offload) against its "
        "output before",
    ),
    Measure(
        "save_ep_peak_w",
        "save, exported program: peak",
        "W",
        "host + GPU peak while torch_tensorrt.save writes the compiled module as an exported "
        "program, above the value just before the save",
    ),
    Measure("save_ts_peak_w", "save, TorchScript: peak", "W", "the same for TorchScript"),
    Measure("save_ep_s", "save, exported program", "s", "seconds of that save"),
    Measure("save_ts_s", "save, TorchScript", "s", "seconds of that save"),
    Measure(
        "load_ep_peak_w",
        "load, exported program: peak",
        "W",
        "host + GPU peak of torch_tensorrt.load of the exported-program save and one run, in a "
        "fresh process, above the value once torch_tensorrt is imported and CUDA is up",
    ),
    Measure("load_ts_peak_w", "load, TorchScript: peak", "W", "the same for TorchScript"),
    Measure(
        "load_ep_kept_w",
        "load, exported program: kept",
        "W",
        "host + GPU after that load and run, above the value before",
    ),
    Measure("load_ts_kept_w", "load, TorchScript: kept", "W", "the same for TorchScript"),
    Measure("load_ep_s", "load, exported program", "s", "seconds of that load and run"),
    Measure("load_ts_s", "load, TorchScript", "s", "seconds of that load and run"),
    Measure(
        "load_ep_equal",
        "load, exported program: same outputs",
        "",
        "1 where the loaded module's output equals the compiled module's, else 0",
    ),
    Measure("load_ts_equal", "load, TorchScript: same outputs", "", "the same for TorchScript"),
)
NOTES = [
    "W is the model's size (its parameters and buffers); every figure is above the value just "
    "before the compile, with the model on the GPU.",
    "Measured with TensorRT-RTX; the standard TensorRT builder (build_engine_with_config) is not "
    "measurable here.",
]


def _case_environment(wheel_dir: Path, trt_dir: Optional[Path], trim: str) -> Dict[str, str]:
    env = dict(os.environ)
    paths = [str(wheel_dir), *([str(trt_dir)] if trt_dir else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env.pop("TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM", None)
    if trim == "off":
        env["TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"] = "0"
    return env


def cases_of(plan: Sequence[Setting], wheels: Sequence[str], repeats: int) -> List[Dict[str, Any]]:
    """The plan's cases in run order: per repeat, per setting, every wheel (the order of the
    wheels reversed on every other repeat); the official wheel skips ``trim=off``. A case's id
    is its label's words joined by dashes, and the repeat."""
    cases = []
    for repeat in range(1, repeats + 1):
        for setting in plan:
            for wheel in wheels if repeat % 2 else list(reversed(wheels)):
                if wheel == "official" and setting.trim == "off":
                    continue
                words = [wheel, setting.model, f"offload {setting.offload}"]
                words += ["trim off"] * (setting.trim == "off")
                words += ["Python runtime"] * (setting.runtime == "python")
                words += [f"{key}={value}" for key, value in setting.options]
                label = ", ".join(words)
                slug = re.sub(r"[^a-z0-9]+", "-", label.lower())
                parameters = {"wheel": wheel, **setting._asdict(), "repeat": repeat}
                parameters["options"] = dict(setting.options)
                headline = setting.offload == "on" and label == ", ".join(words[:3])
                cases.append(
                    result.case(
                        f"{slug}-r{repeat}", label, {}, headline=headline, parameters=parameters
                    )
                )
    return cases


def _earlier_cases(path: Path, record: Dict[str, Any]) -> Tuple[List[Dict[str, Any]], List[str]]:
    """The cases of the result file at ``path`` that succeeded, and the commands that made
    them; refused unless that file was made by this overlay and revision (a case that failed
    there is left out, to be run again)."""
    earlier = json.loads(path.read_text(encoding="utf-8"))
    made_by = earlier.get("provenance", {})
    for key in ("overlay_sha256", "revision", "dirty"):
        if made_by.get(key) != record.get(key):
            raise harness.BenchmarkError(
                f"--merge: {path} was made with {key} {made_by.get(key)!r}, this run has "
                f"{record.get(key)!r}; merge only runs of one revision, or drop --merge"
            )
    kept = [case for case in earlier.get("cases", []) if "error" not in case]
    commands = [*earlier.get("settings", {}).get("earlier_commands", []), made_by["command"]]
    return kept, commands


def _ids(cases: Sequence[Dict[str, Any]]) -> Set[str]:
    return {case["id"] for case in cases}


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run the plan's cases, saving the result file after each one (once one has succeeded)."""
    args = parse_args(argv)
    wheels = dict(item.split("=", 1) for item in args.wheels)
    plan = [s for s in PLANS[args.plan] if not args.models or s.model in args.models]
    record = result.provenance()
    planned_cases = cases_of(plan, list(wheels), args.repeats)
    done: List[Dict[str, Any]] = []
    settings: Dict[str, Any] = {"plan": args.plan, "wheels": wheels, "trt": str(args.trt)}
    if args.merge and args.out.exists():
        done, settings["earlier_commands"] = _earlier_cases(args.out, record)
    for planned in (case for case in planned_cases if case["id"] not in _ids(done)):
        parameters = planned["parameters"]
        spec = {"model": parameters["model"], "options": dict(parameters["options"])}
        if parameters["runtime"] == "python":
            spec["options"]["use_python_runtime"] = True
        spec.update(offload=parameters["offload"] == "on")
        spec.update(check_original=parameters["model"] == "mlp-3gib", save=parameters["save"])
        command = ["-m", "benchmarks.compile.case", json.dumps(spec)]
        env = _case_environment(Path(wheels[parameters["wheel"]]), args.trt, parameters["trim"])
        print(f"case {len(done) + 1}: {planned['label']}", flush=True)
        try:
            measured = harness.run_in_fresh_process(command, env=env, timeout_s=args.timeout)
        except (harness.CaseFailed, OSError, subprocess.TimeoutExpired) as error:
            done.append({**planned, "figures": {}, "error": str(error)[-2000:]})
            print(f"  failed: {str(error)[-500:]}", flush=True)
        else:
            figures = measured.pop("figures")
            done.append({**planned, "figures": figures, **measured})
            print(
                f"  host + GPU peak {figures['sum_peak_w']:.2f} W, kept "
                f"{figures['sum_kept_w']:.2f} W, {figures['compile_s']:.1f} s, peak in "
                f"{measured['peak_phase']}",
                flush=True,
            )
        # Until a case succeeds, the file on disk (the record) is left as it is: a run that
        # cannot compile at all (no GPU, no torch) must not replace it with failures.
        if any("error" not in case for case in done):
            title = (
                "host and GPU memory of torch_tensorrt.compile on TensorRT-RTX, official and fork"
            )
            document = result.result(
                "compile", title, record, MEASURES, done, notes=NOTES, settings=settings
            )
            result.save(args.out, document)
    failed = sum("error" in case for case in done)
    if failed == len(done):
        print(f"every case failed: {args.out} left as it was", flush=True)
    return 1 if failed else 0


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run compile",
        description=__doc__.split("\n\n")[0],
        epilog="Getting the wheels onto the GPU machine: this module's docstring "
        "(benchmarks/compile/run.py) and the docs' benchmarks page.",
    )
    parser.add_argument("--plan", choices=list(PLANS), default="record")
    parser.add_argument(
        "--wheels",
        nargs="+",
        required=True,
        metavar="NAME=DIR",
        help="torch_tensorrt installs to compare, e.g. official=gpu/official fork=gpu/fork",
    )
    parser.add_argument("--trt", type=Path, help="the folder TensorRT-RTX is installed in")
    parser.add_argument("--models", nargs="*", choices=MODELS, help="only these of the plan")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a case may take")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the cases of --out that succeeded (made by the same overlay and revision "
        "only) and run only the plan's others: one record from several calls, each within a "
        "time limit",
    )
    args = parser.parse_args(argv)
    bad = [w for w in args.wheels if "=" not in w]
    if bad:
        parser.error(f"--wheels takes NAME=DIR, not {bad[0]!r}")
    return args


if __name__ == "__main__":
    sys.exit(run())
