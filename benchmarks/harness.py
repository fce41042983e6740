"""The benchmarks' one harness: which machine and code a figure came from, saved atomically.

Every benchmark here (``offload/run.py``, ``host_heap/run.py``, ``build_speed.py`` and the
research scripts) writes its result file through :func:`save_result`, which adds a
``provenance`` object of one shape:

``overlay_sha256``, ``revision``, ``dirty`` (the code, from ``patched_wheel.provenance``:
git where the tree is a checkout, else the ``.source-revision.json`` written before the tree
was copied to another machine), ``argv`` (``sys.argv`` as the program received it),
``command`` (``shlex.join`` of ``python`` and argv), ``date`` (UTC, ``YYYY-MM-DDTHH:MM:SSZ``)
and ``host`` (:func:`host_record`).

The tables compare ``overlay_sha256`` with the current overlay's to mark figures measured on
another overlay; a file without ``provenance`` counts as "overlay unknown". Result files are
never edited after their run: a wrong field is fixed by running again.

:func:`run_in_fresh_process` runs one case of a benchmark in a process of its own and reads
back the one JSON line it prints, so that no case inherits another's allocator state.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "benchmarks" / "results"
if str(REPOSITORY / "tools") not in sys.path:
    sys.path.insert(0, str(REPOSITORY / "tools"))

from patched_wheel.config import write_text_atomically  # noqa: E402
from patched_wheel.provenance import overlay_sha256, source_revision  # noqa: E402

logger = logging.getLogger(__name__)

# The line prefix a case's process prints its figures after (other output may precede it).
CASE_RESULT_PREFIX = "BENCHMARK_CASE_RESULT "


class CaseFailed(Exception):
    """A case's process exited with an error or printed no result line."""


def _read(path: str) -> Optional[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def _first_field(text: Optional[str], key: str) -> Optional[str]:
    for line in (text or "").splitlines():
        if line.startswith(key):
            return line.split(":", 1)[1].strip()
    return None


def _mem_total_bytes() -> Optional[int]:
    value = _first_field(_read("/proc/meminfo"), "MemTotal")
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


def host_record() -> Dict[str, Any]:
    """The machine and software a figure was measured on (``provenance.host``)."""
    cpu_info = _read("/proc/cpuinfo")
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
        "mem_total_bytes": _mem_total_bytes(),
        "transparent_hugepage": _read("/sys/kernel/mm/transparent_hugepage/enabled"),
        "numa_nodes": len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or None,
    }


def _device_count() -> Optional[int]:
    if "torch" not in sys.modules:
        return None
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def provenance(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Which code, command, date and host made a result file (module docstring)."""
    arguments = list(sys.argv if argv is None else argv)
    revision = source_revision(REPOSITORY)
    now = datetime.datetime.now(datetime.timezone.utc)
    return {
        "overlay_sha256": overlay_sha256(),
        "revision": revision.revision,
        "dirty": revision.dirty,
        "argv": arguments,
        "command": shlex.join(["python", *arguments]),
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_record(),
    }


def save_result(
    path: Path, benchmark: str, body: Mapping[str, Any], record: Mapping[str, Any]
) -> None:
    """Write one result file atomically: ``benchmark``, ``provenance`` (``record``), ``body``.

    ``record`` is made once per run (:func:`provenance`), before the first case, so that a run
    saved after every case keeps one date and one host record.
    """
    document = {"benchmark": benchmark, "provenance": dict(record), **body}
    write_text_atomically(Path(path), json.dumps(document, indent=1) + "\n")


def print_case_result(figures: Mapping[str, Any]) -> None:
    """How a case's process hands its figures to the driver (:func:`run_in_fresh_process`)."""
    print(CASE_RESULT_PREFIX + json.dumps(figures), flush=True)


def run_in_fresh_process(
    command: List[str], env: Optional[Mapping[str, str]] = None, timeout_s: float = 3600.0
) -> Dict[str, Any]:
    """Run one case's ``command`` (a Python script and its arguments) in a process of its own.

    Returns the figures it printed with :func:`print_case_result`. Raises :class:`CaseFailed`
    with the end of its error output when it fails.
    """
    done = subprocess.run(
        [sys.executable, *command],
        env=dict(os.environ if env is None else env),
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
