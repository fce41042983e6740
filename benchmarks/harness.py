"""The benchmarks' one harness: a result's provenance and shape, saved atomically.

Every benchmark (``python -m benchmarks run NAME``) makes its document with :func:`result`
and :func:`provenance` and writes it with :func:`save_result`; the shape is the JSON Schema
``docsrc/_data/result.schema.json``, checked by ``docsrc/_ext/results.py``, which the benchmarks
never import. A result file is
never edited after its run. :func:`run_in_fresh_process` runs one case in a process of its
own, so that no case inherits another's allocator state. Standard library only (torch only
where a record asks for it).
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Mapping, Optional, Sequence

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "benchmarks" / "results"
OVERLAY = REPOSITORY / "py" / "torch_tensorrt" / "dynamo" / "utils.py"
# Where a copy of the repository without git keeps the revision it was copied from (the
# build tool writes it: ``python tools/patched_wheel provenance``).
REVISION_FILE = REPOSITORY / ".source-revision.json"
OVERLAY_MODULE_NAME = "torchtrt_fork_overlay_utils"

logger = logging.getLogger(__name__)

# The line prefix a case's process prints its figures after (other output may precede it).
CASE_RESULT_PREFIX = "BENCHMARK_CASE_RESULT "


class BenchmarkError(Exception):
    """A benchmark cannot run as asked; the dispatcher prints it as one ``error:`` line and
    exits 1 (the benchmarks' one error type: library code never exits the process)."""


class CaseFailed(BenchmarkError):
    """A case's process exited with an error or printed no result line."""


def overlay_sha256() -> str:
    """The hex sha256 of the overlay's bytes as they are on disk (as the build computes it)."""
    return hashlib.sha256(OVERLAY.read_bytes()).hexdigest()


def load_overlay() -> ModuleType:
    """The overlay, imported once per process from ``py/`` (later calls return the same one).

    Why by file location: ``py/torch_tensorrt`` is a part of a package whose other modules
    need TensorRT; putting ``py`` on ``sys.path`` would make ``import torch_tensorrt`` find
    that part instead of the installed package. The repository's one such loader.
    """
    loaded = sys.modules.get(OVERLAY_MODULE_NAME)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(OVERLAY_MODULE_NAME, OVERLAY)
    if spec is None or spec.loader is None:
        raise BenchmarkError(f"cannot import the overlay {str(OVERLAY)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[OVERLAY_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:  # a failed import is not kept for the next caller
        del sys.modules[OVERLAY_MODULE_NAME]
        raise
    return module


def _git(*args: str) -> Optional[str]:
    try:
        return subprocess.run(
            ["git", "-C", str(REPOSITORY), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None


def source_revision() -> Dict[str, Any]:
    """``revision`` and ``dirty`` of this tree.

    From git where the checkout is clean. Where it is not, or where there is no git, from the
    revision file if one was written (a tree copied to another machine travels with it, and
    may land on an older checkout there, which git would call dirty); else git's answer, dirty;
    else unknown.
    """
    head = _git("rev-parse", "--verify", "HEAD") if (REPOSITORY / ".git").exists() else None
    status = _git("status", "--porcelain", "--untracked-files=no") if head else None
    if head and status is not None and not status.strip():
        return {"revision": head.strip(), "dirty": False}
    try:
        recorded = json.loads(REVISION_FILE.read_text(encoding="utf-8"))
        return {"revision": str(recorded["revision"]), "dirty": recorded["dirty"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    if head:
        return {"revision": head.strip(), "dirty": True}
    return {"revision": "unknown", "dirty": None}


def read_text(path: Any) -> Optional[str]:
    """A small file of ``/proc`` or ``/sys``, stripped; ``None`` where it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _first_field(text: Optional[str], key: str) -> Optional[str]:
    for line in (text or "").splitlines():
        if line.startswith(key):
            return line.split(":", 1)[1].strip()
    return None


def meminfo_bytes(key: str) -> Optional[int]:
    """A figure of ``/proc/meminfo`` (``MemTotal``, ``MemAvailable``), in bytes."""
    value = _first_field(read_text("/proc/meminfo"), key)
    return int(value.split()[0]) * 1024 if value else None


def _nvidia_driver() -> Optional[str]:
    """The NVIDIA kernel driver's version (``580.159.04``), or ``None`` without one."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else None


def _torch_record() -> Dict[str, Optional[str]]:
    """torch's version, its CUDA and the first GPU's name, without importing torch if absent."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return {"torch": None, "cuda": None, "device": None}
    import torch

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else None
    return {"torch": version, "cuda": torch.version.cuda, "device": device}


def _device_count() -> Optional[int]:
    if "torch" not in sys.modules:
        return None
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def host_record() -> Dict[str, Any]:
    """The machine and software a figure was measured on (``provenance.host``)."""
    cpu_info = read_text("/proc/cpuinfo")
    return {
        "kernel": platform.release(),
        **_torch_record(),
        "driver": _nvidia_driver(),
        "devices": _device_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "glibc": platform.libc_ver()[1] or None,
        "cpu": _first_field(cpu_info, "model name") or platform.processor() or None,
        "cpus": os.cpu_count(),
        "mem_total_bytes": meminfo_bytes("MemTotal"),
        "transparent_hugepage": read_text("/sys/kernel/mm/transparent_hugepage/enabled"),
        "numa_nodes": len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or None,
    }


def provenance(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Which code, command, date and host made a result file. ``command`` is the interpreter's
    own command line (``sys.orig_argv``): ``python -m benchmarks run NAME ...``."""
    arguments = list(sys.argv if argv is None else argv)
    invoked = list(getattr(sys, "orig_argv", [])[1:]) if argv is None else arguments
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "overlay_sha256": overlay_sha256(),
        **source_revision(),
        "argv": arguments,
        "command": shlex.join(["python", *(invoked or arguments)]),
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_record(),
    }


def measures(table: str) -> Dict[str, Dict[str, str]]:
    """What each figure of a result is, from a table a line per measure:
    ``key | label | unit | description``; a line that starts with spaces continues the
    description of the line above."""
    found: Dict[str, Dict[str, str]] = {}
    for line in table.strip("\n").splitlines():
        if line.startswith(" "):
            found[key]["description"] += " " + line.strip()
            continue
        key, label, unit, description = (part.strip() for part in line.split("|"))
        found[key] = {"label": label, "unit": unit, "description": description}
    return found


def case(
    case_id: str,
    label: str,
    figures: Mapping[str, Any],
    *,
    headline: bool = False,
    parameters: Optional[Mapping[str, Any]] = None,
    series: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """One case of a result file (the shape in ``docsrc/_ext/results.py``)."""
    entry = {"id": case_id, "label": label, "headline": headline}
    entry.update(parameters=dict(parameters or {}), figures=dict(figures))
    return {**entry, "series": dict(series)} if series else entry


def result(
    benchmark: str,
    title: str,
    record: Mapping[str, Any],
    measures: Mapping[str, Mapping[str, str]],
    cases: Sequence[Mapping[str, Any]],
    **optional: Any,
) -> Dict[str, Any]:
    """A result document: what a reader needs to present it, with nothing else to import.

    ``optional``: ``notes`` (sentences a reader needs) and ``settings`` (run-wide parameters).
    Only the measures the cases use are kept, so a run of a few cases describes no others.
    """
    used = {key for entry in cases for key in entry["figures"]}
    kept = {key: dict(measure) for key, measure in measures.items() if key in used}
    document = {"benchmark": benchmark, "title": title, "provenance": dict(record)}
    document.update(measures=kept, cases=list(cases))
    return {**document, **{key: value for key, value in optional.items() if value}}


def save_result(path: Path, document: Mapping[str, Any]) -> None:
    """Write one result file (:func:`result` makes it) under a temporary name beside it, then
    rename it, so a reader never sees half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def print_case_result(figures: Mapping[str, Any]) -> None:
    """How a case's process hands its figures to the driver (:func:`run_in_fresh_process`)."""
    print(CASE_RESULT_PREFIX + json.dumps(figures), flush=True)


def run_in_fresh_process(
    command: List[str], env: Optional[Mapping[str, str]] = None, timeout_s: float = 3600.0
) -> Dict[str, Any]:
    """Run one case's ``command`` (Python's arguments: a script, or ``-m`` and a module) in a
    process of its own, from the repository's root.

    Returns the figures it printed with :func:`print_case_result`. Raises :class:`CaseFailed`
    with the end of its error output when it fails.
    """
    done = subprocess.run(
        [sys.executable, *command],
        env=dict(os.environ if env is None else env),
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(CASE_RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise CaseFailed(f"exit {done.returncode}: {done.stderr.strip()[-3000:]}")
    figures: Dict[str, Any] = json.loads(lines[-1][len(CASE_RESULT_PREFIX) :])
    return figures
