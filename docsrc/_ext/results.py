"""The result files of ``benchmarks/results``: their one shape, its loader, and their presenter.

Every benchmark (``python -m benchmarks run NAME``) writes one JSON document of this shape, so
that a reader needs nothing but the file to present it::

    {"benchmark": "<dispatcher name>", "title": "<one line: what the run measured>",
     "provenance": {"overlay_sha256", "revision", "dirty", "argv", "command", "date", "host"},
     "measures": {"<key>": {"label": "...", "unit": "...", "description": "<what and how>"}},
     "cases": [{"id": "<unique>", "label": "<row label>", "headline": true,
                "parameters": {...}, "figures": {"<measure key>": number or null},
                "series": {...}}],
     "notes": ["<sentences a reader needs>"], "settings": {...}}

``series`` (per case), ``notes`` and ``settings`` (run-wide parameters) are optional; a
measure may add ``"format"`` (a format spec such as ``".2f"``). Cases that share a label are
repeats of one configuration: a table shows their median and range. A case whose ``series``
holds ``timeline`` (``t_s``, ``host_bytes``, ``gpu_bytes``) and ``phases`` (``name``,
``start_s``, ``end_s``) is drawn as memory over time (:func:`plot_timelines`).

:func:`load` checks a file against the shape and raises one :class:`ResultError` listing every
problem, a line each. The tables (:data:`TABLES`) and plots (:data:`PLOTS`) are named here, in
Python; the README (its cog blocks) and the docs' extension (``sphinx_results.py``) draw them by
name. Nothing here imports benchmark code: the docs read data, never the code that measured it.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REPOSITORY = Path(__file__).resolve().parents[2]
RESULTS = REPOSITORY / "benchmarks" / "results"
OVERLAY = REPOSITORY / "py" / "torch_tensorrt" / "dynamo" / "utils.py"
PROVENANCE_KEYS = ("overlay_sha256", "revision", "dirty", "argv", "command", "date", "host")
MiB = 1024**2
GiB = 1024**3


class ResultError(Exception):
    """A result file that cannot be read or is not of the documented shape."""


# -- the shape and its loader ------------------------------------------------------------------


def _problems(document: Any) -> List[str]:
    """Every way ``document`` differs from the shape, one line each (all in one pass)."""
    if not isinstance(document, dict):
        return ["the document is not a JSON object"]
    problems = []
    for key, kind in (("benchmark", str), ("title", str), ("provenance", dict)):
        if not isinstance(document.get(key), kind):
            problems.append(f"{key!r} is missing or not a {kind.__name__}")
    provenance = document.get("provenance")
    if isinstance(provenance, dict):
        missing = [key for key in PROVENANCE_KEYS if key not in provenance]
        if missing:
            problems.append(f"provenance lacks {', '.join(missing)}")
    measures = document.get("measures")
    if not isinstance(measures, dict) or not measures:
        problems.append("'measures' is missing or empty")
        measures = {}
    for key, measure in measures.items():
        if not isinstance(measure, dict) or not all(
            isinstance(measure.get(name), str) for name in ("label", "unit", "description")
        ):
            problems.append(f"measure {key!r} needs a label, a unit and a description")
    cases = document.get("cases")
    if not isinstance(cases, list) or not cases:
        return problems + ["'cases' is missing or empty"]
    seen = set()
    for index, case in enumerate(cases):
        name = case.get("id") if isinstance(case, dict) else None
        where = f"case {name!r}" if isinstance(name, str) else f"case {index}"
        if not isinstance(case, dict) or not isinstance(name, str):
            problems.append(f"{where}: no string 'id'")
            continue
        if name in seen:
            problems.append(f"{where}: the id is used twice")
        seen.add(name)
        if not isinstance(case.get("label"), str) or not isinstance(case.get("headline"), bool):
            problems.append(f"{where}: needs a string 'label' and a boolean 'headline'")
        figures = case.get("figures")
        if not isinstance(figures, dict) or not isinstance(case.get("parameters"), dict):
            problems.append(f"{where}: needs 'parameters' and 'figures' objects")
            continue
        for key, value in figures.items():
            if key not in measures:
                problems.append(f"{where}: figure {key!r} is not in 'measures'")
            elif value is not None and not isinstance(value, (int, float)):
                problems.append(f"{where}: figure {key!r} is {value!r}, not a number or null")
    return problems


def load(path: Path) -> Dict[str, Any]:
    """The result file at ``path``, checked against the shape (module docstring)."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ResultError(f"{path}: cannot be read: {error}") from None
    problems = _problems(document)
    if problems:
        lines = "\n".join(f"  {problem}" for problem in problems)
        raise ResultError(f"{path}: not a result file of the documented shape:\n{lines}")
    result: Dict[str, Any] = document
    return result


def result_file(name: str, results: Path = RESULTS) -> Dict[str, Any]:
    """``benchmarks/results/<name>.json``, loaded, its name kept for the source note."""
    document = load(results / f"{name}.json")
    document["_file"] = f"benchmarks/results/{name}.json"
    return document


def case(document: Dict[str, Any], case_id: str) -> Dict[str, Any]:
    """The case of that id; :class:`ResultError` naming the ids there are otherwise."""
    for entry in document["cases"]:
        if entry["id"] == case_id:
            found: Dict[str, Any] = entry
            return found
    known = ", ".join(entry["id"] for entry in document["cases"])
    raise ResultError(f"{document.get('_file', 'result')}: no case {case_id!r}; ids: {known}")


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


def current_overlay() -> str:
    """The sha256 of this checkout's overlay, which a result's provenance is compared with."""
    return hashlib.sha256(OVERLAY.read_bytes()).hexdigest()


def overlay_text(document: Dict[str, Any]) -> str:
    """Which overlay the run measured: its short sha256, marked when it is not the current."""
    recorded = str(document["provenance"].get("overlay_sha256") or "")
    if recorded == current_overlay():
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


def _moves(case: Dict[str, Any]) -> bool:
    """An offload case that moved a model (not one of the run's ceilings)."""
    return "strategy" in case["parameters"]


def _limits(case: Dict[str, Any]) -> bool:
    return not _moves(case)


def _every(case: Dict[str, Any]) -> bool:
    return True


def _groups(
    document: Dict[str, Any], measures: Sequence[str], headline: bool, where: Callable[..., bool]
) -> Dict[str, List[Dict[str, Any]]]:
    """The cases by label (a configuration and its repeats) that have one of the measures."""
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for entry in document["cases"]:
        if (entry["headline"] or not headline) and where(entry):
            if any(entry["figures"].get(key) is not None for key in measures):
                groups.setdefault(entry["label"], []).append(entry)
    return groups


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
    where: Callable[[Dict[str, Any]], bool] = _every,
    notes: bool = True,
) -> Table:
    """A row per configuration (cases sharing a label), a column per measure.

    ``headline``: only the cases marked so (the README's); ``where``: a further choice of cases;
    without ``notes``, the table alone (its measures' descriptions and source left out).
    """
    described = document["measures"]
    header = [""] + [described[key]["label"] for key in measures]
    rows = [
        [label] + [_cell(cases, described[key], key) for key in measures]
        for label, cases in _groups(document, measures, headline, where).items()
    ]
    if not notes:
        return Table(header, rows)
    legend = "; ".join(f"{described[k]['label']}: {described[k]['description']}" for k in measures)
    return Table(header, rows, [legend + ".", *document.get("notes", []), source_note(document)])


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


# Each named table: (result file, measures, headline cases only, which cases).
LIMITS = ["ceiling_GBps", "bandwidth_GBps", "fault_in_GBps", "chunked_copy_fresh_GBps"]
LIMITS += ["chunked_copy_prefaulted_GBps", "limit_4_GBps"]
EVERY_MOVE = MEMORY + ["largest_tensor_bytes", "host_after_minus_W_MiB", "seconds"]
BUILD = ["seconds", "ratio_to_plain_read", "target_ratio"]
COMPILE = ["sum_peak_w", "host_peak_w", "gpu_peak_w", "sum_kept_w", "compile_s"]
COMPILE += ["max_abs_error"]
TABLES: Dict[str, Tuple[str, List[str], bool, Callable[[Dict[str, Any]], bool]]] = {
    "compile": ("compile_record", COMPILE, False, _every),
    "compile-settings": ("compile_settings", COMPILE, False, _every),
    "offload-memory": ("offload_headline", MEMORY, True, _moves),
    "offload-speed": ("offload_headline_timing", SPEED, False, _moves),
    "host-heap": ("host_heap", HEAP, True, _every),
    "build-speed": ("build_speed", BUILD, False, _every),
    # Only on the docs' benchmarks page:
    "offload-memory-every-case": ("offload_headline", EVERY_MOVE, False, _moves),
    "offload-limits": ("offload_headline_timing", LIMITS, False, _limits),
    "offload-3gib-memory": ("offload_3gib", MEMORY + ["overshoot_over_largest_MiB"], False, _moves),
    "offload-3gib-speed": ("offload_3gib_timing", SPEED[:2], False, _moves),
    "host-heap-every-case": ("host_heap", EVERY_HEAP, False, _every),
    "host-heap-trim-threshold": ("host_heap_trim_threshold", EVERY_HEAP, False, _every),
    "host-heap-steady-loop": ("host_heap_steady_loop", STEADY, False, _every),
}


# The named phase tables: (result file, the cases side by side).
PHASE_TABLES = {
    "compile-phases": (
        "compile_record",
        ["official-mlp-3gib-offload-on-r1", "fork-mlp-3gib-offload-on-r1"],
    ),
}
TABLE_NAMES = [*TABLES, *PHASE_TABLES]


def table(name: str, results: Path = RESULTS) -> Table:
    """The named table; :class:`ResultError` naming the known ones otherwise."""
    if name in PHASE_TABLES:
        stem, ids = PHASE_TABLES[name]
        return phase_table(result_file(stem, results), ids)
    if name not in TABLES:
        raise ResultError(f"no table {name!r}; known: {', '.join(TABLE_NAMES)}")
    stem, measures, headline, where = TABLES[name]
    return case_table(result_file(stem, results), measures, headline=headline, where=where)


# -- plots -------------------------------------------------------------------------------------


def bar_plot(document: Dict[str, Any], key: str, *, where: Callable[..., bool] = _moves) -> Any:
    """A horizontal bar per configuration: one measure, the median of its repeats."""
    import matplotlib.pyplot as plt

    groups = _groups(document, [key], False, where)
    labels = [label.replace("`", "") for label in groups]
    values = [statistics.median(c["figures"][key] for c in cases) for cases in groups.values()]
    measure = document["measures"][key]
    scale, unit = (GiB, "GiB") if measure["unit"] == "bytes" else (1, measure["unit"])
    figure, axes = plt.subplots(figsize=(7.5, 0.32 * len(labels) + 1.2))
    axes.barh(labels, [value / scale for value in values], color="#4c72b0")
    axes.invert_yaxis()
    axes.set_xlabel(f"{measure['label']} ({unit})" if unit else measure["label"])
    axes.set_title(document["title"], fontsize=9)
    return figure


def plot_timelines(document: Dict[str, Any], where: Callable[..., bool] = _every) -> Any:
    """Host, GPU and host + GPU memory over time, one panel per case that has a timeline
    (and that ``where`` takes), its phases shaded and named (``series.timeline`` and
    ``series.phases``)."""
    import matplotlib.pyplot as plt

    cases = [c for c in document["cases"] if "timeline" in c.get("series", {}) and where(c)]
    if not cases:
        raise ResultError(f"{document.get('_file')}: no case has series.timeline")
    figure, panels = plt.subplots(
        len(cases), 1, figsize=(7.5, 2.4 * len(cases)), sharex=True, squeeze=False
    )
    for axes, entry in zip(panels[:, 0], cases):
        line = entry["series"]["timeline"]
        host = [value / GiB for value in line["host_bytes"]]
        gpu = [value / GiB for value in line["gpu_bytes"]]
        axes.plot(line["t_s"], host, label="host")
        axes.plot(line["t_s"], gpu, label="GPU")
        axes.plot(line["t_s"], [a + b for a, b in zip(host, gpu)], label="host + GPU", lw=0.8)
        for index, phase in enumerate(entry["series"].get("phases", [])):
            shade = "#eeeeee" if index % 2 else "#dde6f0"
            axes.axvspan(phase["start_s"], phase["end_s"], color=shade, zorder=0)
            style = dict(transform=axes.get_xaxis_transform(), fontsize=6, rotation=90)
            axes.text(phase["start_s"], 0.98, phase["name"], va="top", **style)
        axes.set_title(entry["label"].replace("`", ""), fontsize=8)
        axes.set_ylabel("GiB")
    panels[0, 0].legend(fontsize=7, loc="upper right")
    panels[-1, 0].set_xlabel("seconds")
    return figure


def phase_table(document: Dict[str, Any], case_ids: Sequence[str]) -> Table:
    """Each phase of the cases' compiles (``series.phases``): host and GPU at its start and the
    host + GPU peak inside it, in W, a column pair per case, so every W of a peak is named."""
    cases = [case(document, case_id) for case_id in case_ids]
    header = ["phase"]
    for entry in cases:
        header += [f"{entry['label']}: at its start (host, GPU)", "host + GPU peak inside"]
    rows = []
    for index, phase in enumerate(cases[0]["series"]["phases"]):
        row = [phase["name"]]
        for entry in cases:
            found = entry["series"]["phases"][index]
            row += [f"{found['host_start_w']:.2f} W, {found['gpu_start_w']:.2f} W"]
            row += [f"{found['sum_peak_w']:.2f} W"]
        rows.append(row)
    note = "In W, the model's size, above the values before the compile; a phase inside another"
    note += " is listed after it (by start), and the offload runs twice (once with nothing to do)"
    return Table(header, rows, [note + ".", source_note(document)])


def _three_gib_offload(entry: Dict[str, Any]) -> bool:
    parameters = entry["parameters"]
    return parameters.get("model") == "mlp-3gib" and parameters.get("offload") == "on"


PLOTS: Dict[str, Callable[[Path], Any]] = {
    "compile-timeline": lambda r: plot_timelines(
        result_file("compile_record", r), where=lambda c: _three_gib_offload(c) and c["headline"]
    ),
    "offload-speed": lambda r: bar_plot(result_file("offload_headline_timing", r), "GBps"),
    "host-heap": lambda r: bar_plot(result_file("host_heap", r), "kept_after_trim", where=_every),
}


def plot(name: str, results: Path = RESULTS) -> Any:
    """Draw the named plot (in the docs, inside matplotlib's ``plot`` directive)."""
    if name not in PLOTS:
        raise ResultError(f"no plot {name!r}; known: {', '.join(PLOTS)}")
    return PLOTS[name](results)
