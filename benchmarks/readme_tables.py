"""The README's headline tables, generated from the result files in ``benchmarks/results/``.

Run from the repository's root, after a benchmark has written new results::

    python -m benchmarks tables          # rewrite the tables in README.md
    python -m benchmarks tables --check  # exit 1, naming each table, if README.md drifted

Each table sits in ``README.md`` between ``<!-- results:NAME:start -->`` and
``<!-- results:NAME:end -->``; only those blocks are rewritten. The tables draw every case a
result file holds (a new model or strategy in ``offload*.json`` becomes a new row or cell), and
each block ends with the file it comes from and the command that wrote it, so no figure in the
README is typed by hand. ``tests/docs/test_readme_tables.py`` fails when the README differs
from what this module makes of the results.

This is the one way from a result file to a table: the docs' extension
(``docsrc/_ext/benchmark_tables.py``) renders the same :class:`Table` objects, the README's
headline tables (:data:`TABLES`) and the tables of every run that only the docs show
(:func:`offload_run`, :func:`run_summary`, :func:`host_heap_cases`, :func:`offload_steps`).
Plots are drawn from the same files by ``benchmarks/plots.py``. Every table says which overlay its figures measured, from each result
file's ``provenance`` (:class:`OverlayMark`): a file that records an overlay other than the
current one, or none, is marked so.

The table of supported releases (``<!-- supported-matrix:... -->``) is not written here but by
``python tools/patched_wheel matrix --update-docs``, which builds the wheels it lists.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

logger = logging.getLogger(__name__)

REPOSITORY = Path(__file__).resolve().parent.parent
RESULTS = REPOSITORY / "benchmarks" / "results"
README = REPOSITORY / "README.md"

GiB = 1024**3
MiB = 1024**2

# The strategies and host-heap cases, their labels and which are the README's: one registry.
from benchmarks.harness import overlay_sha256
from benchmarks.strategies import HOST_HEAP_CASES, OFFLOAD_BY_NAME, OFFLOAD_STRATEGIES

STRATEGY_TITLES = {strategy.name: strategy.label for strategy in OFFLOAD_STRATEGIES}
HOST_HEAP_ROWS = tuple((case.name, case.label) for case in HOST_HEAP_CASES if case.headline)

# How a table marks a figure whose result file does not name the current overlay.
UNKNOWN_OVERLAY = "overlay unknown"
OTHER_OVERLAY = "other overlay"
SHORT_SHA = 8

BENCHMARKS_PAGE = "docsrc/benchmarks.rst"
# Where the README sends a reader for every run (its tables and plots exist once the docs are
# built, so the README says so rather than linking a page GitHub cannot draw).
EVERY_RUN = (
    f"the docs' benchmarks page ([`{BENCHMARKS_PAGE}`]({BENCHMARKS_PAGE}); "
    "`make -C docsrc html` draws its tables and plots)"
)


class ResultsError(Exception):
    """A result file or a README block that is missing or not what this module expects."""


@dataclass(frozen=True)
class Table:
    """A table drawn from result files: header, rows, and the notes printed below it."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    notes: Sequence[str]
    numeric_from: int = 1  # columns from this one on are numbers, right-aligned


# -- reading the results -----------------------------------------------------------------------


def read_result(path: Path) -> Dict[str, Any]:
    """One result file, parsed; a missing or malformed file raises :class:`ResultsError`."""
    try:
        with open(path, encoding="utf-8") as handle:
            document: Dict[str, Any] = json.load(handle)
    except (OSError, ValueError) as error:
        raise ResultsError(f"cannot read {path}: {error}") from None
    return document


def offload_files(results: Path = RESULTS) -> List[Path]:
    """Every result file of ``benchmarks/offload/run.py`` (``offload*.json`` whose
    ``benchmark`` is ``offload``), in name order; other offload benchmarks' files, such as
    the host ceilings, are left out."""
    return [
        path
        for path in sorted(results.glob("offload*.json"))
        if read_result(path).get("benchmark") == "offload"
    ]


def portable_command(command: str, out_file: Optional[str] = None) -> str:
    """The command a result file records, as a reader would run it from the repository root.

    Benchmarks record their exact command line, which can hold the paths of the machine they
    ran on: a virtual environment's interpreter, an output folder in a home directory. The
    interpreter becomes ``python``; the ``--out`` path becomes ``out_file`` (the file's place
    in the repository), or is dropped when the command's default is that place. A command
    that already names ``out_file`` (one run writing several files) is kept as it is.
    """
    words = shlex.split(command)
    if words and re.search(r"(^|/)python[0-9.]*$", words[0]):
        words[0] = "python"
    # Other files the run wrote outside the repository land beside it in benchmarks/results.
    words[1:] = [
        f"benchmarks/results/{Path(word).name}" if re.match(r"^/.*\.(json|log)$", word) else word
        for word in words[1:]
    ]
    if "--out" in words and out_file not in words:  # a run writing several files names each
        index = words.index("--out")
        if out_file is None:
            del words[index : index + 2]
        elif index + 1 < len(words):
            words[index + 1] = out_file
    return " ".join(shlex.quote(word) for word in words)


def _provenance(document: Dict[str, Any]) -> Dict[str, Any]:
    provenance = document.get("provenance")
    return provenance if isinstance(provenance, dict) else {}


def recorded_command(document: Dict[str, Any]) -> Optional[str]:
    """The command line that wrote a result file: its ``provenance``'s, else the older
    top-level ``command`` field."""
    command = _provenance(document).get("command") or document.get("command")
    return command if isinstance(command, str) and command else None


def machine_record(document: Dict[str, Any]) -> Dict[str, Any]:
    """What a result file says of its machine: the ``provenance``'s ``host`` over the older
    ``machine`` field."""
    host = _provenance(document).get("host")
    return {**document.get("machine", {}), **(host if isinstance(host, dict) else {})}


def run_record(document: Dict[str, Any]) -> str:
    """When and from which revision a result file was written, from its ``provenance``
    (empty for a file without one)."""
    provenance = _provenance(document)
    parts = []
    if provenance.get("date"):
        parts.append(str(provenance["date"]))
    revision = provenance.get("revision")
    if isinstance(revision, str) and revision:
        dirty = {True: ", with uncommitted changes", None: ""}.get(provenance.get("dirty"), "")
        parts.append(f"revision {revision[:SHORT_SHA]}{dirty}")
    return ", ".join(parts)


def source_note(path: Path, document: Dict[str, Any]) -> str:
    """``From `benchmarks/results/x.json`, written by `<command>`.`` for the note of a table."""
    relative = f"benchmarks/results/{path.name}"  # its place in the repository
    command = recorded_command(document)
    if not command:
        return f"From `{relative}`."
    return f"From `{relative}`, written by `{portable_command(command, relative)}`."


def model_name(case: Dict[str, Any]) -> str:
    """How a table names the model of an offload case: ``24 GiB llm``."""
    return f"{case['size_gib']} GiB {case['mix']}"


# -- which overlay a figure measured -----------------------------------------------------------


def current_overlay_sha256() -> str:
    """The sha256 of the overlay in this checkout, as the benchmarks' harness records it in a
    result file, so that a table and a result file compare the same value."""
    return overlay_sha256()


@dataclass(frozen=True)
class OverlayMark:
    """The overlay a result file measured (``None``: the file records no ``provenance``) and
    whether it is the overlay of this checkout."""

    sha256: Optional[str]
    current: bool

    @property
    def text(self) -> str:
        """The short sha256, marked when it is not the current overlay's."""
        if self.sha256 is None:
            return UNKNOWN_OVERLAY
        short = self.sha256[:SHORT_SHA]
        return short if self.current else f"{short} ({OTHER_OVERLAY})"


def overlay_mark(document: Dict[str, Any], current: str) -> OverlayMark:
    """The overlay a result file names in its ``provenance``, against the current one."""
    provenance = document.get("provenance")
    recorded = provenance.get("overlay_sha256") if isinstance(provenance, dict) else None
    if not isinstance(recorded, str) or not recorded:
        return OverlayMark(None, False)
    return OverlayMark(recorded, recorded == current)


def overlay_note(marks: Sequence[OverlayMark], current: str) -> str:
    """What the overlay column (or line) means, and whether any figure measured another one."""
    note = (
        f"Overlay: the first {SHORT_SHA} hex digits of the sha256 of "
        "`py/torch_tensorrt/dynamo/utils.py` that the run's result file records in its "
        f"`provenance`; the current overlay is {current[:SHORT_SHA]}."
    )
    if any(mark.sha256 is None for mark in marks):
        note += f' "{UNKNOWN_OVERLAY}": the file records none, so the run may predate it.'
    if any(mark.sha256 is not None and not mark.current for mark in marks):
        note += f' "{OTHER_OVERLAY}": measured on an overlay that is not the current one.'
    return note


def overlay_line(mark: OverlayMark, current: str) -> str:
    """One sentence naming the overlay of a table drawn from a single run."""
    if mark.current:
        return f"Overlay of this run: {mark.text}, the current one."
    if mark.sha256 is None:
        return (
            f"Overlay of this run: {UNKNOWN_OVERLAY} (its result file records no `provenance`, "
            f"so it may predate the current overlay, {current[:SHORT_SHA]})."
        )
    return f"Overlay of this run: {mark.text}; the current one is {current[:SHORT_SHA]}."


# -- the README's headline tables --------------------------------------------------------------


def _runs(results: Path, probed: bool) -> List[Tuple[Path, Dict[str, Any]]]:
    """The offload files holding probed (or unprobed) cases, each with its document."""
    runs = []
    for path in offload_files(results):
        document = read_result(path)
        if any(case.get("probes", True) == probed for case in document["cases"]):
            runs.append((path, document))
    return runs


def _side_by_side(
    document: Dict[str, Any], probed: bool, strategies: Sequence[str]
) -> List[Dict[str, List[Dict[str, Any]]]]:
    """Per model of one run, its cases of each strategy (several where the run repeated a
    case); only models that ran them all, so that every figure of a row comes from one run."""
    by_model: Dict[str, Dict[str, List[Dict[str, Any]]]] = {}
    for case in document["cases"]:
        if case.get("probes", True) == probed:
            by_model.setdefault(model_name(case), {}).setdefault(case["strategy"], []).append(case)
    return [cases for cases in by_model.values() if all(name in cases for name in strategies)]


Run = Tuple[Path, Dict[str, Any], List[Dict[str, List[Dict[str, Any]]]]]


def _headline_runs(
    results: Path, probed: bool, strategies: Sequence[str], current: str
) -> List[Run]:
    """The runs that measured ``strategies`` side by side, each with its models that did.

    A model measured on the current overlay shows only those runs: runs of other overlays (or
    of none recorded) stay for the models the current overlay has not been measured on yet,
    marked as such (:class:`OverlayMark`)."""
    runs = []
    for path, document in _runs(results, probed):
        found = _side_by_side(document, probed, strategies)
        if found:
            runs.append((path, document, found))
    fresh = {
        model_name(cases[FORK][0])
        for _, document, found in runs
        if overlay_mark(document, current).current
        for cases in found
    }
    kept = []
    for path, document, found in runs:
        if not overlay_mark(document, current).current:
            found = [cases for cases in found if model_name(cases[FORK][0]) not in fresh]
        if found:
            kept.append((path, document, found))
    return kept


def _median(cases: Sequence[Dict[str, Any]], key: str) -> float:
    return float(statistics.median(case[key] for case in cases))


def _figure(cases: Sequence[Dict[str, Any]], key: str, spec: str, unit: str) -> str:
    """The median of a strategy's runs in one file; with several, their range too."""
    shown = f"{format(_median(cases, key), spec)}{unit}"
    if len(cases) == 1:
        return shown
    low, high = min(case[key] for case in cases), max(case[key] for case in cases)
    return f"{shown} ({len(cases)} runs: {format(low, spec)}-{format(high, spec)})"


# The README's offload columns (the registry's headline strategies), and the fork's own.
HEADLINE_MEMORY = tuple(strategy.name for strategy in OFFLOAD_STRATEGIES if strategy.headline)
FORK = "fork"


def _memory_row(cases: Dict[str, List[Dict[str, Any]]], mark: OverlayMark) -> List[str]:
    fork = cases[FORK]
    others = [name for name in HEADLINE_MEMORY if name != FORK]
    row = [model_name(fork[0])]
    row += [_figure(cases[name], "overshoot_W", ".3f", " W") for name in HEADLINE_MEMORY]
    row += [
        f"{_median(fork, 'overshoot_bytes') / _median(cases[name], 'overshoot_bytes'):.2f}"
        for name in others
    ]
    largest = fork[0]["largest_tensor_bytes"]
    row += [f"{_median(fork, 'overshoot_bytes') / largest:.2f}", mark.text]
    return row


def offload_headline(results: Path = RESULTS) -> Table:
    """The offload's overshoot, of the fork against ``module.to`` and the 1 GiB step, as
    ratios measured side by side in one run: figures that hold from run to run, unlike a
    single run's absolute bytes or seconds."""
    current = current_overlay_sha256()
    rows: List[List[str]] = []
    marks: List[OverlayMark] = []
    sources: List[str] = []
    for path, document, found in _headline_runs(results, True, HEADLINE_MEMORY, current):
        mark = overlay_mark(document, current)
        rows.extend(_memory_row(cases, mark) for cases in found)
        marks.append(mark)
        sources.append(source_note(path, document))
    others = [name for name in HEADLINE_MEMORY if name != FORK]
    header = ["model"] + [STRATEGY_TITLES[name] for name in HEADLINE_MEMORY]
    header += [f"fork ÷ {STRATEGY_TITLES[name]}" for name in others]
    header += ["fork, in largest tensors", "overlay"]
    intro = (
        "Overshoot of host + GPU memory during the move, above its value before it, in W (the "
        "model's size); each row is one run, its cases side by side (the median where the run "
        "repeated a case), and the ratios are of the fork's overshoot to the others'. "
        + "; ".join(
            f"{STRATEGY_TITLES[name]}: {OFFLOAD_BY_NAME[name].description}"
            for name in HEADLINE_MEMORY
        )
        + ". On a discrete GPU the overshoot is host memory, filling with the model while the "
        "GPU still holds it, so neither side holds more than W; it costs where host and GPU "
        "share one memory. "
        f"Every run, and the runs of other shapes: {EVERY_RUN}."
    )
    return Table(header, rows, [intro, overlay_note(marks, current)] + sources)


def _speed_row(cases: Dict[str, List[Dict[str, Any]]], mark: OverlayMark) -> List[str]:
    fork = cases[FORK]
    others = [name for name in HEADLINE_MEMORY if name != FORK]
    row = [model_name(fork[0])]
    row += [_figure(cases[name], "GBps", ".2f", " GB/s") for name in HEADLINE_MEMORY]
    row += [f"{_median(fork, 'GBps') / _median(cases[name], 'GBps'):.1f}" for name in others]
    return row + [mark.text]


def offload_speed(results: Path = RESULTS) -> Table:
    """GB/s of the fork against ``module.to`` and the 1 GiB step, and their ratios, per run
    that timed all three."""
    current = current_overlay_sha256()
    rows: List[List[str]] = []
    marks: List[OverlayMark] = []
    sources: List[str] = []
    for path, document, found in _headline_runs(results, False, HEADLINE_MEMORY, current):
        mark = overlay_mark(document, current)
        rows.extend(_speed_row(cases, mark) for cases in found)
        marks.append(mark)
        sources.append(source_note(path, document))
    others = [name for name in HEADLINE_MEMORY if name != FORK]
    header = ["model"] + [STRATEGY_TITLES[name] for name in HEADLINE_MEMORY]
    header += [f"fork ÷ {STRATEGY_TITLES[name]}" for name in others] + ["overlay"]
    intro = (
        "Model size W / seconds of the move, without memory probes, the strategies in the "
        "same run (the median where the run repeated a case). The fork's speed varies between "
        "runs on the same host by more than between strategies in one run, so compare within "
        f"a row. Every run: {EVERY_RUN}."
    )
    return Table(header, rows, [intro, overlay_note(marks, current)] + sources)


def _kept(median: Dict[str, Any], key: str, burst_bytes: int) -> str:
    kept = median[key]
    return f"{kept / GiB:.3f} GiB ({100 * kept / burst_bytes:.2f}%)"


def _number(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f}"


def _seconds(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.2f} s"


def host_heap(results: Path = RESULTS) -> Table:
    """RSS kept and times after each of the two bursts, at the largest burst of the run."""
    path = results / "host_heap.json"
    document = read_result(path)
    summary = document["summary"]
    burst_gib = max(entry["burst_gib"] for entry in summary)
    entries = {entry["case"]: entry for entry in summary if entry["burst_gib"] == burst_gib}
    rows = []
    for case, title in HOST_HEAP_ROWS:
        if case not in entries:
            continue
        median, burst_bytes = entries[case]["median"], entries[case]["burst_bytes"]
        rows.append(
            [
                title,
                f"{_kept(median, 'first_kept_after_trim', burst_bytes)} / "
                f"{_kept(median, 'kept_after_trim', burst_bytes)}",
                f"{_seconds(median['first_trim_s'])} / {_seconds(median['trim_s'])}",
                f"{_seconds(median['burst_s'])} / {_seconds(median['warm_burst_s'])}",
            ]
        )
    header = ["", "RSS kept after burst 1 / 2", "trim after burst 1 / 2", "time of burst 1 / 2"]
    burst_bytes = next(iter(entries.values()))["burst_bytes"]
    current = current_overlay_sha256()
    mark = overlay_mark(document, current)
    notes = [
        _host_heap_intro(burst_bytes, document),
        overlay_line(mark, current),
        source_note(path, document),
    ]
    return Table(header, rows, notes)


def _host_heap_intro(burst_bytes: int, document: Dict[str, Any]) -> str:
    settings = document.get("settings", {})
    machine = machine_record(document)
    blocks = (
        f"{settings.get('block_min_bytes', 0) / MiB:.0f}-"
        f"{settings.get('block_max_bytes', 0) / MiB:.0f} MiB"
    )
    return (
        f"Burst 1: {burst_bytes / GiB:.2f} GiB in {blocks} blocks from "
        f"{settings.get('threads', '?')} threads, after one large free has raised glibc's mmap "
        "threshold as it does in a real process (without that, glibc would map each of these "
        "blocks apart and return it at its free), then freed; burst 2: the same again in the same "
        "process, as a second engine build would run. Burst 2 reuses what the allocator kept "
        "and faults in again what it gave back. Medians of "
        f"{settings.get('repeats', '?')} repeats on "
        f"{machine.get('cpus') or machine.get('cpu_cores') or '?'} CPUs, "
        f"glibc {machine.get('glibc', '?')}."
    )


def build_speed(results: Path = RESULTS) -> Table:
    """Times of the patched-wheel build, from ``build_speed.json``: issue 24's four figures
    (plain read, one wheel, verify, the matrix) with their ratios and targets, then pip's
    route and, where the run timed it, the README's test command."""
    path = results / "build_speed.json"
    document = read_result(path)
    figures = document["figures"]
    plain, one, verify, matrix = (
        figures[name] for name in ("plain_read", "one_wheel", "verify", "matrix")
    )
    runs = len(one["runs_s"])

    def ratio(figure: Dict[str, Any]) -> str:
        met = "met" if figure["ratio_to_plain_read"] <= figure["target_ratio"] else "missed"
        return f"{figure['ratio_to_plain_read']:.2f} x (target {figure['target_ratio']} x: {met})"

    def within(seconds: float, target: float) -> str:
        return f"target {target:g} s: {'met' if seconds <= target else 'missed'}"

    def within_per_wheel(matrix: Dict[str, Any]) -> str:
        """The matrix's target, set for a number of wheels, as the time it allows a wheel."""
        per_wheel = matrix["target_s"] / matrix["target_wheels"]
        met = "met" if matrix["build_s_per_wheel"] <= per_wheel else "missed"
        return f"target {matrix['target_s']:g} s for {matrix['target_wheels']}, {per_wheel:g} s a wheel: {met}"

    rows = [
        [
            f"plain read of the base `{figures['base_wheel']}` ({figures['base_mib']} MiB): "
            f"zipfile, every member read and hashed (median of {len(plain['runs_s'])})",
            f"{plain['median_s']:.3f} s",
            "1 x",
        ],
        [
            f"one patched wheel from that base, cached (median of {runs})",
            f"{one['median_s']:.3f} s",
            ratio(one),
        ],
        [
            f"`verify` of the released patched wheel, rebuilt in process (median of {runs})",
            f"{verify['median_s']:.3f} s",
            ratio(verify),
        ],
        [
            f"all {matrix['wheels']} wheels of the supported matrix, bases cached "
            f"({matrix['failed']} failed)",
            f"{matrix['total_s']:.1f} s ({matrix['build_s_per_wheel']:.3f} s a wheel)",
            within_per_wheel(matrix),
        ],
        [
            "`pip wheel . --no-deps -w dist`, base cached (pip's isolated build included)",
            _seconds(figures["pip_wheel"]["seconds"]),
            "-",
        ],
    ]
    tests = figures.get("test_command")
    if tests is not None:
        rows.append(
            [
                f"the README's test command, `{tests['command']}` (exit status "
                f"{tests['exit_status']})",
                f"{tests['seconds']:.1f} s",
                within(tests["seconds"], tests["target_s"]),
            ]
        )
    machine = machine_record(document)
    run = run_record(document) or "the file records no `provenance`, so no revision"
    notes = [
        f"On {machine.get('cpus', '?')} CPUs, {machine.get('machine', '?')}, "
        f"Python {machine.get('python', '?')}; run: {run}.",
        source_note(path, document),
    ]
    return Table(["", "time", "ratio to the plain read, or target"], rows, notes)


# -- the docs' tables of every run -------------------------------------------------------------


def offload_run(document: Dict[str, Any]) -> Table:
    """Every case of one offload run: memory columns for a probed run, speed for an unprobed one."""
    cases = document["cases"]
    if any(case.get("probes", True) for case in cases):
        header = [
            "model, strategy",
            "largest tensor (MiB)",
            "overshoot, GiB (W)",
            "overshoot - largest (MiB)",
            "host after - W (MiB)",
            "seconds (probed)",
        ]
        rows = [
            [
                f"{model_name(case)} `{case['strategy']}`",
                f"{case['largest_tensor_bytes'] / MiB:.0f}",
                f"{case['overshoot_bytes'] / GiB:.2f} ({case['overshoot_W']:.3f})",
                f"{case['overshoot_over_largest_MiB']:.0f}",
                f"{case['host_after_minus_W_MiB']:.0f}",
                f"{case['seconds']:.1f}",
            ]
            for case in cases
        ]
        return Table(header, rows, [])
    header = ["model, strategy", "W (GiB)", "tensors", "seconds", "GB/s"]
    rows = [
        [
            f"{model_name(case)} `{case['strategy']}`",
            f"{case['W_bytes'] / GiB:.1f}",
            f"{case['tensors']}",
            f"{case['seconds']:.2f}",
            f"{case['GBps']:.2f}",
        ]
        for case in cases
    ]
    if any("fraction_of_copy_ceiling" in case for case in cases):
        # Runs that measured the host's own CPU copy beside the cases give each its share.
        header.append("share of the run's CPU-copy ceiling")
        for row, case in zip(rows, cases):
            share = case.get("fraction_of_copy_ceiling")
            row.append("-" if share is None else f"{100 * share:.0f}%")
    return Table(header, rows, [])


def host_heap_cases(document: Dict[str, Any]) -> Table:
    """Medians per case and burst size of the host-heap benchmark, bursts 1 and 2 apart."""
    header = [
        "case, burst",
        "kept after burst 1 / 2 (GiB)",
        "kept / burst, burst 2",
        "trim after burst 1 / 2 (s)",
        "time of burst 1 / 2 (s)",
    ]
    rows = []
    for entry in document["summary"]:
        median = entry["median"]
        rows.append(
            [
                f"`{entry['case']}` {entry['burst_bytes'] / GiB:.2f} GiB",
                f"{median['first_kept_after_trim'] / GiB:.3f} / "
                f"{median['kept_after_trim'] / GiB:.3f}",
                f"{100 * entry['kept_fraction']:.2f}%",
                f"{_number(median['first_trim_s'])} / {_number(median['trim_s'])}",
                f"{_number(median['burst_s'])} / {_number(median['warm_burst_s'])}",
            ]
        )
    return Table(header, rows, [])


def fast_path_setup(document: Dict[str, Any]) -> Table:
    """GPU and host memory after each step of the fast path's setup, per order of steps."""
    rows = [
        [
            f"`{order['order']}`",
            f"`{step['step']}`",
            f"{step['gpu_delta_MiB']:+.0f}",
            f"{step['host_delta_MiB']:+.0f}",
        ]
        for order in document["orders"]
        for step in order["steps"][1:]
    ]
    header = ["order", "step", "GPU memory (MiB)", "host memory (MiB)"]
    return Table(header, rows, [], numeric_from=2)


def offload_steps(results: Path = RESULTS) -> Table:
    """Every release step of the fork the offload runs measured: overshoot, and GB/s unprobed."""
    cases = [case for path in offload_files(results) for case in read_result(path)["cases"]]
    steps = [c for c in cases if c["strategy"] == "fork" or c["strategy"].startswith("fork-step-")]
    rows = []
    for model, strategy in dict.fromkeys((model_name(c), c["strategy"]) for c in steps):
        same = [c for c in steps if model_name(c) == model and c["strategy"] == strategy]
        probed = [c for c in same if c.get("probes", True)]
        speeds = [f"{c['GBps']:.2f}" for c in same if not c.get("probes", True)]
        overshoot = f"{probed[0]['overshoot_over_largest_MiB']:.0f}" if probed else "-"
        rows.append([model, f"`{strategy}`", overshoot, ", ".join(speeds) or "-"])
    header = ["model", "strategy", "overshoot - largest (MiB)", "GB/s (unprobed)"]
    return Table(header, rows, [], numeric_from=2)


# The offload's targets: speed as a fraction of the run's copy ceiling (the second figure for
# the ``small`` mix, whose tensors are 2-6 MiB), and overshoot above its floor.
SPEED_TARGET = 0.75
SMALL_TENSORS_SPEED_TARGET = 0.6
OVERSHOOT_TARGET_MIB = 64

# The final run of the headline plan: its probed file and its timed file.
HEADLINE_RUN = ("offload_headline.json", "offload_headline_timing.json")


def _limits_note(document: Dict[str, Any]) -> str:
    """What the run's copy ceiling and host limit were, from its file."""
    ceiling = document["copy_ceiling"]
    text = (
        f"The run's copy ceiling: {ceiling['GBps']:.1f} GB/s (1 GiB from page-locked memory "
        "into fresh huge pages with every core, best of 5"
    )
    if "after_cases" in ceiling:
        text += f"; {ceiling['after_cases']['GBps']:.1f} GB/s measured again after the cases"
    text += ")."
    limit = document.get("host_limit")
    if limit:
        per_count = ", ".join(
            f"{value:.1f} GB/s for {count}" for count, value in limit["limit_GBps"].items()
        )
        text += (
            f" The host's limit: its memory bandwidth, {limit['bandwidth_GBps']:.1f} GB/s (the "
            f"larger of a plain copy's traffic, 2 x {limit['copy_GBps']:.1f} GB/s, and a "
            f"read-only pass, {limit['read_GBps']:.1f} GB/s, every core), over the strategy's "
            f"bytes of memory traffic per moved byte: {per_count} (four for a path through "
            "page-locked chunks, two for DMA into the destination). What bounds the bounce "
            f"path's CPU side: fresh pages faulted in from every core at "
            f"{limit['fault_in_GBps']:.1f} GB/s, and its 16 MiB chunked copy at "
            f"{limit['chunked_copy_fresh_GBps']:.1f} GB/s into fresh memory against "
            f"{limit['chunked_copy_prefaulted_GBps']:.1f} GB/s into memory faulted in before."
        )
    return text


def run_summary(
    probed: Optional[Dict[str, Any]],
    timed: Dict[str, Any],
    strategies: Optional[Sequence[str]] = None,
) -> Table:
    """One offload run, case by case: speed (timed, the median of its runs), its fractions of
    the run's copy ceiling and host limit, and the overshoot above its floor (probed); only
    the cases of ``strategies`` where given."""
    overshoots = {
        (model_name(case), case["strategy"]): case["overshoot_over_floor_MiB"]
        for case in (probed or {}).get("cases", [])
    }
    by_case: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for case in timed["cases"]:
        if strategies is None or case["strategy"] in strategies:
            by_case.setdefault((model_name(case), case["strategy"]), []).append(case)
    rows = []
    for (model, strategy), cases in by_case.items():
        limit = [
            case["fraction_of_host_limit"] for case in cases if "fraction_of_host_limit" in case
        ]
        overshoot = overshoots.get((model, strategy))
        rows.append(
            [
                model,
                f"`{strategy}`",
                _figure(cases, "GBps", ".2f", " GB/s"),
                f"{_median(cases, 'fraction_of_copy_ceiling'):.2f}",
                f"{statistics.median(limit):.2f}" if limit else "-",
                "-" if overshoot is None else f"{overshoot:+.0f} MiB",
            ]
        )
    header = ["model", "strategy", "speed", "of copy ceiling", "of host limit", "overshoot - floor"]
    notes = [
        "Speed: model size W / seconds of the move without memory probes (the median where the "
        "run repeated a case); its fraction of the same run's copy ceiling and of the host's "
        "limit for the strategy. Overshoot - floor: the peak of host + GPU memory above its "
        "start, less the larger of the largest tensor and the fullest segment of the CUDA "
        "caching allocator, which no tensor-by-tensor move can hand back early (probed run). "
        f"Targets: {SPEED_TARGET} of the copy ceiling ({SMALL_TENSORS_SPEED_TARGET} for the "
        f"`small` mix's 2-6 MiB tensors), overshoot at most floor + {OVERSHOOT_TARGET_MIB} MiB.",
        _limits_note(timed),
    ]
    return Table(header, rows, notes, numeric_from=2)


def offload_shapes(results: Path = RESULTS) -> Table:
    """Every case of the final headline run (:data:`HEADLINE_RUN`) against the targets."""
    probed_path, timed_path = (results / name for name in HEADLINE_RUN)
    probed, timed = read_result(probed_path), read_result(timed_path)
    table = run_summary(probed, timed)
    current = current_overlay_sha256()
    notes = [
        *table.notes,
        overlay_line(overlay_mark(timed, current), current),
        source_note(probed_path, probed),
    ]
    return Table(table.header, table.rows, notes, table.numeric_from)


TABLES: Dict[str, Callable[[Path], Table]] = {
    "offload-headline": offload_headline,
    "offload-speed": offload_speed,
    "offload-shapes": offload_shapes,
    "host-heap": host_heap,
    "build-speed": build_speed,
}


# -- the README --------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(table: Table) -> str:
    """The table as GitHub-flavoured Markdown, its notes as a paragraph below."""
    lines = [
        "| " + " | ".join(_cell(cell) for cell in table.header) + " |",
        "|" + "|".join(" --- " for _ in table.header) + "|",
    ]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in table.rows]
    return "\n".join(lines) + "\n\n" + "\n\n".join(table.notes) + "\n"


def markers(name: str) -> Tuple[str, str]:
    """The comment lines that open and close the block of table ``name`` in the README."""
    return f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"


def replace_block(text: str, name: str, block: str) -> str:
    """``text`` with the block of table ``name`` replaced by ``block``."""
    start, end = markers(name)
    begin, finish = text.find(start), text.find(end)
    if begin < 0 or finish < begin:
        raise ResultsError(
            f"README.md has no {start} ... {end} block; add one where the table goes"
        )
    return text[: begin + len(start)] + "\n" + block + text[finish:]


def render_readme(text: str, results: Path = RESULTS) -> str:
    """``text`` with every table block regenerated from the result files in ``results``."""
    for name, make in TABLES.items():
        text = replace_block(text, name, markdown(make(results)))
    return text


def _block(text: str, name: str) -> str:
    start, end = markers(name)
    return text[text.find(start) : text.find(end)]


def drifted(current: str, expected: str) -> List[str]:
    """The names of the tables whose block differs between two README texts."""
    return [name for name in TABLES if _block(current, name) != _block(expected, name)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks tables",
        description="Regenerate the README's tables of measured figures from benchmarks/results.",
    )
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if README.md has drifted"
    )
    parser.add_argument("--readme", type=Path, default=README, help="the README to rewrite")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the result files' folder")
    args = parser.parse_args(argv)
    try:
        current = args.readme.read_text(encoding="utf-8")
        expected = render_readme(current, args.results)
    except (OSError, ResultsError, KeyError, TypeError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.check:
        names = drifted(current, expected)
        if names:
            print(
                f"error: {args.readme.name}: tables differ from the results: {', '.join(names)}; "
                "run python -m benchmarks tables",
                file=sys.stderr,
            )
            return 1
        return 0
    if expected != current:
        temporary = args.readme.with_name(f".{args.readme.name}.tmp")
        temporary.write_text(expected, encoding="utf-8")
        temporary.replace(args.readme)
        logger.info("rewrote %s", args.readme)
    print(f"{args.readme.name}: tables match benchmarks/results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
