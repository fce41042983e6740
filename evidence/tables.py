"""The result files as tables: each figure with its unit, each table with its notes and source.

The tables are named here (:data:`TABLES`, :data:`PHASE_TABLES`); the README's cog blocks
(``tables.markdown(tables.table(NAME))``) and the docs' ``readme-table`` directive draw them by
name. Everything they show comes from the files (:mod:`evidence.result`): nothing here imports
benchmark code.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from patched_wheel import config, matrix

from evidence import RESULTS
from evidence.result import ResultError, find_case, overlay_sha256, result_file

MiB = 1024**2
GiB = 1024**3


# -- numbers, provenance -----------------------------------------------------------------------


def number(value: Optional[float], unit: str = "", spec: str = "") -> str:
    """A figure with its unit: bytes as GiB or MiB, short times in ms, other units as given."""
    if value is None:
        return "-"
    if unit == "bytes":
        big = abs(value) >= GiB
        return f"{value / (GiB if big else MiB):{spec or ('.2f' if big else '.0f')}} " + (
            "GiB" if big else "MiB"
        )
    if unit == "s" and 0 < abs(value) < 0.01 and not spec:
        value, unit = value * 1000, "ms"
    if not spec:
        size = abs(value)
        spec = ".0f" if size >= 100 else ".1f" if size >= 10 else ".2f" if size >= 1 else ".3f"
    shown = format(value, spec)
    return f"{shown} {unit}" if unit and unit != "x" else f"{shown} x" if unit else shown


def overlay_text(document: Dict[str, Any]) -> str:
    """Which overlay the run measured: its short sha256, marked when it is not the current."""
    recorded = str(document["provenance"].get("overlay_sha256") or "")
    if recorded == overlay_sha256():
        return f"overlay {recorded[:8]} (the current one)"
    return f"overlay {recorded[:8] or 'unknown'} (not the current overlay)"


def host_text(host: Dict[str, Any]) -> str:
    """The machine of a run, in a few words."""
    parts = [host.get("device"), host.get("cpu"), host.get("cpus") and f"{host['cpus']} CPUs"]
    parts += [host.get(key) and f"{key} {host[key]}" for key in ("python", "glibc", "torch")]
    return ", ".join(str(part) for part in parts if part)


def source_note(document: Dict[str, Any]) -> str:
    """Where a table's figures come from: file, rerun command, date, revision, host, overlay."""
    provenance = document["provenance"]
    revision = str(provenance.get("revision") or "unknown")[:8]
    dirty = ", uncommitted changes" if provenance.get("dirty") else ""
    return (
        f"From `{document.get('_file', 'a result file')}` "
        f"(`python -m benchmarks run {document['benchmark']}`; the file records the full "
        f"command): run {provenance.get('date')}, revision {revision}{dirty}, on "
        f"{host_text(provenance.get('host') or {})}; {overlay_text(document)}."
    )


# -- tables ------------------------------------------------------------------------------------


@dataclass
class Table:
    """Header, rows and the notes printed below: what the README and the docs both show."""

    header: List[str]
    rows: List[List[str]]
    notes: List[str] = field(default_factory=list)


def _cell(cases: Sequence[Dict[str, Any]], measure: Dict[str, Any], key: str) -> str:
    """One measure of a configuration: the median of its repeats, with their range."""
    values = [c["figures"].get(key) for c in cases if c["figures"].get(key) is not None]
    unit, spec = measure["unit"], measure.get("format", "")
    if not values:
        return "-"
    shown = number(statistics.median(values), unit, spec)
    if len(values) == 1:
        return shown
    low, high = number(min(values), unit, spec), number(max(values), unit, spec)
    return f"{shown} ({len(values)} runs: {low} to {high})"


def case_table(
    document: Dict[str, Any],
    measures: Sequence[str],
    *,
    headline: bool = False,
) -> Table:
    """A row per configuration (cases sharing a label: its repeats), a column per measure, of
    the cases that have one of the measures; ``headline``: only the cases marked so (the
    README's)."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for entry in document["cases"]:
        has_one = any(entry["figures"].get(key) is not None for key in measures)
        if has_one and (entry["headline"] or not headline):
            groups.setdefault(entry["label"], []).append(entry)
    described = document["measures"]
    header = [""] + [described[key]["label"] for key in measures]
    rows = [
        [label] + [_cell(cases, described[key], key) for key in measures]
        for label, cases in groups.items()
    ]
    legend = "; ".join(f"{described[k]['label']}: {described[k]['description']}" for k in measures)
    return Table(header, rows, [legend + ".", *document.get("notes", []), source_note(document)])


def supported_matrix(path: Path = config.DOCS_MATRIX) -> Table:
    """The supported releases, from the matrix command's data file, by the build tool's own
    table builder (the README's cog block and the docs' directive both show this)."""
    return Table(*matrix.supported_table(json.loads(path.read_text(encoding="utf-8"))))


def markdown(table: Table) -> str:
    """The table as GitHub-flavoured Markdown, each note a paragraph below it."""
    lines = []
    for row in [table.header, *table.rows]:
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    lines.insert(1, "|" + " --- |" * len(table.header))
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in table.notes)


# -- the named tables: the README's blocks and the docs' tables --------------------------------

SPEED = ["GBps", "fraction_of_copy_ceiling", "fraction_of_host_limit"]
MEMORY = ["overshoot_W", "overshoot_over_floor_MiB"]
HEAP = ["first_kept_after_trim", "kept_after_trim", "first_trim_s", "trim_s", "burst_s"]
HEAP += ["warm_burst_s"]
EVERY_HEAP = HEAP + ["thread_arena_top_bytes"]
STEADY = ["dynamic_s", "fixed_s", "ratio"]


# Each named table: (result file, measures, headline cases only).
LIMITS = ["ceiling_GBps", "bandwidth_GBps", "fault_in_GBps", "chunked_copy_fresh_GBps"]
LIMITS += ["chunked_copy_prefaulted_GBps", "limit_4_GBps"]
EVERY_MOVE = MEMORY + ["largest_tensor_bytes", "host_after_minus_W_MiB", "seconds"]
BUILD = ["seconds", "ratio_to_plain_read", "target_ratio"]
COMPILE = ["sum_peak_w", "host_peak_w", "gpu_peak_w", "sum_kept_w", "compile_s"]
COMPILE += ["max_abs_error"]
SAVE_LOAD = ["save_ts_peak_w", "save_ts_s", "load_ts_peak_w", "load_ts_kept_w", "load_ts_s"]
SAVE_LOAD += ["load_ts_equal"]
TABLES: Dict[str, Tuple[str, List[str], bool]] = {
    "compile": ("compile_record", COMPILE, False),
    "compile-3gib-official": ("compile_save_load", COMPILE, False),
    "compile-3gib-fork": ("compile_fork_3gib", COMPILE, False),
    "compile-save-load": ("compile_save_load", SAVE_LOAD, False),
    "compile-settings": ("compile_settings", COMPILE, False),
    "offload-memory": ("offload_headline", MEMORY, True),
    "offload-speed": ("offload_headline_timing", SPEED, False),
    "host-heap": ("host_heap", HEAP, True),
    "build-speed": ("build_speed", BUILD, False),
    # Only on the docs' benchmarks page:
    "offload-memory-every-case": ("offload_headline", EVERY_MOVE, False),
    "offload-limits": ("offload_headline_timing", LIMITS, False),
    "offload-3gib-memory": ("offload_3gib", MEMORY + ["overshoot_over_largest_MiB"], False),
    "offload-3gib-speed": ("offload_3gib_timing", SPEED[:2], False),
    "host-heap-every-case": ("host_heap", EVERY_HEAP, False),
    "host-heap-trim-threshold": ("host_heap_trim_threshold", EVERY_HEAP, False),
    "host-heap-steady-loop": ("host_heap_steady_loop", STEADY, False),
}


# The compile with the offload on, official wheel beside the fork's (the named phase table and
# the plot of the benchmarks page, evidence.plots): (result file, the cases side by side).
COMPILE_CASES = (
    "compile_record",
    ["official-mlp-12gib-offload-on-r1", "fork-mlp-12gib-offload-on-r1"],
)
PHASE_TABLES = {"compile-phases": COMPILE_CASES}
TABLE_NAMES = [*TABLES, *PHASE_TABLES]


def table(name: str, results: Path = RESULTS) -> Table:
    """The named table; :class:`ResultError` naming the known ones otherwise."""
    if name in PHASE_TABLES:
        stem, ids = PHASE_TABLES[name]
        return phase_table(result_file(stem, results), ids)
    if name not in TABLES:
        raise ResultError(f"no table {name!r}; known: {', '.join(TABLE_NAMES)}")
    stem, measures, headline = TABLES[name]
    return case_table(result_file(stem, results), measures, headline=headline)


def phase_table(document: Dict[str, Any], case_ids: Sequence[str]) -> Table:
    """Each phase of the cases' compiles (``series.phases``): host and GPU at its start and the
    host + GPU peak inside it, in W, a column pair per case, so every W of a peak is named.
    The cases' phases are matched by name and by which call of that name they are (the fork
    makes calls the official wheel does not); a case without a row's phase shows ``-``."""
    cases = [find_case(document, case_id) for case_id in case_ids]
    header = ["phase"]
    for entry in cases:
        header += [f"{entry['label']}: at its start (host, GPU)", "host + GPU peak inside"]
    by_case: List[Dict[Tuple[str, int], Dict[str, Any]]] = []
    order: List[Tuple[str, int]] = []
    for entry in cases:
        seen: Dict[str, int] = {}
        phases: Dict[Tuple[str, int], Dict[str, Any]] = {}
        previous = -1
        for phase in entry["series"]["phases"]:
            seen[phase["name"]] = seen.get(phase["name"], 0) + 1
            key = (phase["name"], seen[phase["name"]])
            phases[key] = phase
            if key not in order:
                order.insert(previous + 1, key)
            previous = order.index(key)
        by_case.append(phases)
    rows = []
    for key in order:
        row = [key[0]]
        for phases in by_case:
            found = phases.get(key)
            if found is None:
                row += ["-", "-"]
                continue
            row += [f"{found['host_start_w']:.2f} W, {found['gpu_start_w']:.2f} W"]
            row += [f"{found['sum_peak_w']:.2f} W"]
        rows.append(row)
    note = "In W, the model's size, above the values before the compile; a phase inside another"
    note += " is listed after it (by start), and the offload runs twice (once with nothing to do)"
    return Table(header, rows, [note + ".", source_note(document)])
