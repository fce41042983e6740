"""A result file: its one shape, its writer, its reader and its validation, in one place.

Every benchmark (``python -m benchmarks run NAME``) writes one JSON document of the shape that
``result.schema.json`` (beside this module) describes: the benchmark, a title, the provenance,
the measures with their labels and units, the cases with their figures, so that a reader needs
nothing but the file to present it. The writer is :func:`result` (with :func:`case` and
:func:`provenance`) and :func:`save`; the reader is :func:`load`, which checks a file against the
shape and raises one :class:`ResultError` listing every problem, a line each. A result file is
never edited after its run.

What a figure is, a benchmark says once, as :class:`Measure` literals that mypy checks (the
unit one of :data:`Unit`'s); the file carries them, so a presenter imports nothing of the
benchmark's.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Literal, Mapping, NamedTuple, Optional, Sequence

import jsonschema
from patched_wheel import config
from patched_wheel.patch import read_overlay
from patched_wheel.provenance import source_revision

from evidence import RESULTS
from evidence.memory import meminfo_bytes, read_text

SCHEMA = Path(__file__).resolve().with_name("result.schema.json")

# The units a figure may have: W is the model's size (a figure in multiples of it), x a ratio.
Unit = Literal["", "bytes", "MiB", "GiB", "s", "GB/s", "W", "x"]


class ResultError(Exception):
    """A result file that cannot be read or is not of the documented shape."""


class Measure(NamedTuple):
    """What one figure of a result is: its key in a case's figures, the label a table heads
    its column with, its unit, and what it is and how it was measured."""

    key: str
    label: str
    unit: Unit
    description: str


# -- writing -----------------------------------------------------------------------------------


def overlay_sha256() -> str:
    """The sha256 of this checkout's overlay, as the build tool reads it (its path is the
    tool's, ``config.DEFAULT_OVERLAY``)."""
    return read_overlay(config.DEFAULT_OVERLAY)[0].sha256


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


def host_record() -> Dict[str, Any]:
    """The machine and software a figure was measured on (``provenance.host``)."""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in (read_text("/proc/cpuinfo") or "").splitlines()
            if line.startswith("model name")
        ),
        None,
    )
    return {
        "kernel": platform.release(),
        **_torch_record(),
        "driver": _nvidia_driver(),
        "devices": _device_count(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "glibc": platform.libc_ver()[1] or None,
        "cpu": cpu or platform.processor() or None,
        "cpus": os.cpu_count(),
        "mem_total_bytes": meminfo_bytes("MemTotal"),
        "transparent_hugepage": read_text("/sys/kernel/mm/transparent_hugepage/enabled"),
        "numa_nodes": len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) or None,
    }


def provenance(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """Which code, command, date and host made a result file. ``command`` is the interpreter's
    own command line (``sys.orig_argv``): ``python -m benchmarks run NAME ...``. The revision
    is the build tool's (``dirty``: the overlay or the tool differ from it)."""
    arguments = list(sys.argv if argv is None else argv)
    invoked = list(getattr(sys, "orig_argv", [])[1:]) if argv is None else arguments
    now = datetime.datetime.now(datetime.timezone.utc)
    revision = source_revision()
    return {
        "overlay_sha256": overlay_sha256(),
        "revision": revision.revision,
        "dirty": revision.dirty,
        "argv": arguments,
        "command": shlex.join(["python", *(invoked or arguments)]),
        "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host_record(),
    }


def case(
    case_id: str,
    label: str,
    figures: Mapping[str, Any],
    *,
    headline: bool = False,
    parameters: Optional[Mapping[str, Any]] = None,
    series: Optional[Mapping[str, Any]] = None,
) -> Dict[str, Any]:
    """One case of a result file: a configuration (cases sharing a label are its repeats)."""
    entry = {"id": case_id, "label": label, "headline": headline}
    entry.update(parameters=dict(parameters or {}), figures=dict(figures))
    return {**entry, "series": dict(series)} if series else entry


def result(
    benchmark: str,
    title: str,
    record: Mapping[str, Any],
    measures: Sequence[Measure],
    cases: Sequence[Mapping[str, Any]],
    **optional: Any,
) -> Dict[str, Any]:
    """A result document: what a reader needs to present it, with nothing else to import.

    ``optional``: ``notes`` (sentences a reader needs) and ``settings`` (run-wide parameters).
    Only the measures the cases use are kept, so a run of a few cases describes no others.
    """
    used = {key for entry in cases for key in entry["figures"]}
    kept = {
        m.key: {"label": m.label, "unit": m.unit, "description": m.description}
        for m in measures
        if m.key in used
    }
    document: Dict[str, Any] = {"benchmark": benchmark, "title": title}
    document.update(provenance=dict(record), measures=kept, cases=[dict(c) for c in cases])
    return {**document, **{key: value for key, value in optional.items() if value}}


def save(path: Path, document: Mapping[str, Any]) -> None:
    """Write one result file, checked against the shape first, under a temporary name beside
    it, then renamed, so that a reader never sees half of it or a file it cannot read."""
    found = problems(document)
    if found:
        raise ResultError(f"{path}: not written, not of the documented shape:\n" + _lines(found))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, path)


# -- reading -----------------------------------------------------------------------------------


def schema() -> Dict[str, Any]:
    """The shape, as the JSON Schema ``result.schema.json``."""
    found: Dict[str, Any] = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return found


def problems(document: Any) -> List[str]:
    """Every way ``document`` differs from the shape, one line each, all in one pass: the
    schema's, and what a JSON Schema cannot say (case ids unique, figures named in measures)."""
    errors = jsonschema.Draft202012Validator(schema()).iter_errors(document)
    found = [
        f"{'/'.join(map(str, error.absolute_path)) or 'the document'}: {error.message}"
        for error in sorted(errors, key=lambda error: list(map(str, error.absolute_path)))
    ]
    cases = document.get("cases") if isinstance(document, dict) else None
    measures = document.get("measures") if isinstance(document, dict) else None
    seen = set()
    for index, entry in enumerate(cases if isinstance(cases, list) else []):
        if not isinstance(entry, dict):
            continue
        if entry.get("id") in seen:
            found.append(f"cases/{index}/id: {entry['id']!r} is used by an earlier case")
        seen.add(entry.get("id"))
        if isinstance(measures, dict) and isinstance(entry.get("figures"), dict):
            unknown = sorted(set(entry["figures"]) - set(measures))
            found += [f"cases/{index}/figures: {key!r} is not in measures" for key in unknown]
    return found


def _lines(found: Sequence[str]) -> str:
    return "\n".join(f"  {problem}" for problem in found)


def load(path: Path) -> Dict[str, Any]:
    """The result file at ``path``, checked against the shape."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ResultError(f"{path}: cannot be read: {error}") from None
    found = problems(document)
    if found:
        raise ResultError(f"{path}: not a result file of the documented shape:\n" + _lines(found))
    loaded: Dict[str, Any] = document
    return loaded


def result_file(name: str, results: Path = RESULTS) -> Dict[str, Any]:
    """``benchmarks/results/<name>.json``, loaded, its name kept for the source note."""
    document = load(results / f"{name}.json")
    document["_file"] = f"benchmarks/results/{name}.json"
    return document


def find_case(document: Dict[str, Any], case_id: str) -> Dict[str, Any]:
    """The case of that id; :class:`ResultError` naming the ids there are otherwise."""
    for entry in document["cases"]:
        if entry["id"] == case_id:
            found: Dict[str, Any] = entry
            return found
    known = ", ".join(entry["id"] for entry in document["cases"])
    raise ResultError(f"{document.get('_file', 'result')}: no case {case_id!r}; ids: {known}")
