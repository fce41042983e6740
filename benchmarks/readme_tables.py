"""The README's headline tables, generated from the result files in ``benchmarks/results/``.

Run from anywhere, after a benchmark has written new results::

    python benchmarks/readme_tables.py          # rewrite the tables in README.md
    python benchmarks/readme_tables.py --check  # exit 1, naming each table, if README.md drifted

Each table sits in ``README.md`` between ``<!-- results:NAME:start -->`` and
``<!-- results:NAME:end -->``; only those blocks are rewritten. The tables draw every case a
result file holds (a new model or strategy in ``offload*.json`` becomes a new row or cell), and
each block ends with the file it comes from and the command that wrote it, so no figure in the
README is typed by hand. ``tests/docs/test_readme_tables.py`` fails when the README differs
from what this module makes of the results. The docs show the same tables
(``docsrc/_ext/benchmark_tables.py``, directive ``readme-table``).

The table of supported releases (``<!-- supported-matrix:... -->``) is not written here but by
``python tools/patched_wheel matrix --update-docs``, which builds the wheels it lists.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import shlex
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

# The offload strategies the headline tables compare, in column order, with their meaning.
STRATEGY_COLUMNS = (
    ("upstream", "upstream releases (`module.to`)"),
    ("step-1GiB-plain", "upstream main (1 GiB step)"),
    ("fork", "this fork"),
    ("fork-plain", "this fork, fast path off"),
)

# The host-heap cases of the README's table, in row order, with their meaning.
HOST_HEAP_ROWS = (
    ("upstream", "upstream releases (no trim)"),
    ("fork", "this fork (`trim_host_heap`)"),
    ("mmap_threshold", "closest peer: `MALLOC_MMAP_THRESHOLD_`"),
)


class ResultsError(Exception):
    """A result file or a README block that is missing or not what this module expects."""


@dataclass(frozen=True)
class Table:
    """A table drawn from result files: header, rows, and the notes printed below it."""

    header: Sequence[str]
    rows: Sequence[Sequence[str]]
    notes: Sequence[str]


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
    if "--out" in words and out_file not in words:  # a run writing several files names each
        index = words.index("--out")
        if out_file is None:
            del words[index : index + 2]
        elif index + 1 < len(words):
            words[index + 1] = out_file
    return " ".join(shlex.quote(word) for word in words)


def source_note(path: Path, document: Dict[str, Any]) -> str:
    """``From `benchmarks/results/x.json`, written by `<command>`.`` for the note of a table."""
    relative = f"benchmarks/results/{path.name}"  # its place in the repository
    command = document.get("command")
    if not command:
        return f"From `{relative}`."
    return f"From `{relative}`, written by `{portable_command(command, relative)}`."


def model_name(case: Dict[str, Any]) -> str:
    """How a table names the model of an offload case: ``24 GiB llm``."""
    return f"{case['size_gib']} GiB {case['mix']}"


def _groups(cases: Sequence[Dict[str, Any]]) -> List[str]:
    groups: List[str] = []
    for case in cases:
        if model_name(case) not in groups:
            groups.append(model_name(case))
    return groups


def _strategy_table(
    cases: Sequence[Dict[str, Any]], cell: Callable[[List[Dict[str, Any]]], str]
) -> List[List[str]]:
    """One row per model, one cell per strategy column: ``cell`` of that model's cases."""
    rows = []
    for group in _groups(cases):
        row = [group]
        for strategy, _ in STRATEGY_COLUMNS:
            found = [c for c in cases if model_name(c) == group and c["strategy"] == strategy]
            row.append(cell(found) if found else "not run")
        rows.append(row)
    return rows


# -- the tables --------------------------------------------------------------------------------


def _offload_cases(
    results: Path, probed: bool
) -> Tuple[List[Dict[str, Any]], List[str], Dict[str, Any]]:
    """The probed (or unprobed) cases of every offload file, the files' source notes, and the
    machine of the last file that had any."""
    cases: List[Dict[str, Any]] = []
    notes: List[str] = []
    machine: Dict[str, Any] = {}
    for path in offload_files(results):
        document = read_result(path)
        found = [case for case in document["cases"] if case.get("probes", True) == probed]
        if found:
            cases.extend(found)
            notes.append(source_note(path, document))
            machine = document.get("machine", machine)
    return cases, notes, machine


def offload_memory(results: Path = RESULTS) -> Table:
    """Host + GPU overshoot of the offload, per model and strategy, from every probed
    ``offload*.json`` run; a case measured in more than one file shows each run."""
    cases, sources, machine = _offload_cases(results, probed=True)

    def cell(found: List[Dict[str, Any]]) -> str:
        return "; ".join(
            f"{case['overshoot_bytes'] / GiB:.2f} GiB ({case['overshoot_W']:.3f} W)"
            for case in found
        )

    header = ["model"] + [title for _, title in STRATEGY_COLUMNS]
    notes = [
        "Host anonymous RSS + GPU memory in use at its peak during the move, above its value "
        f"before the move (W: the model's size); {machine.get('gpu', '?')}, "
        f"torch {machine.get('torch', '?')}."
    ]
    return Table(header, _strategy_table(cases, cell), notes + sources)


def offload_speed(results: Path = RESULTS) -> Table:
    """GB/s of the offload per model and strategy, from every unprobed ``offload*.json`` run.

    A case measured in several files shows every run, in file-name order, so that the spread
    between runs stays visible instead of one run standing for all.
    """
    cases, sources, _ = _offload_cases(results, probed=False)

    def cell(found: List[Dict[str, Any]]) -> str:
        return ", ".join(f"{case['GBps']:.2f}" for case in found) + " GB/s"

    header = ["model"] + [title for _, title in STRATEGY_COLUMNS]
    intro = (
        "Model size W / seconds of the move, runs without memory probes; where a case ran "
        "more than once, each run is shown, in the order of the files below."
    )
    return Table(header, _strategy_table(cases, cell), [intro] + sources)


def _kept(median: Dict[str, Any], key: str, burst_bytes: int) -> str:
    kept = median[key]
    return f"{kept / GiB:.3f} GiB ({100 * kept / burst_bytes:.2f}%)"


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
                _kept(median, "first_kept_after_trim", burst_bytes),
                _kept(median, "kept_after_trim", burst_bytes),
                f"{_seconds(median['first_trim_s'])} / {_seconds(median['trim_s'])}",
                _seconds(median["burst_s"]),
                _seconds(median["warm_burst_s"]),
            ]
        )
    header = [
        "",
        "RSS kept after burst 1",
        "RSS kept after burst 2",
        "trim after burst 1 / 2",
        "time of burst 1",
        "time of burst 2",
    ]
    burst_bytes = next(iter(entries.values()))["burst_bytes"]
    return Table(
        header, rows, [_host_heap_intro(burst_bytes, document), source_note(path, document)]
    )


def _host_heap_intro(burst_bytes: int, document: Dict[str, Any]) -> str:
    settings = document.get("settings", {})
    machine = document.get("machine", {})
    blocks = (
        f"{settings.get('block_min_bytes', 0) / MiB:.0f}-"
        f"{settings.get('block_max_bytes', 0) / MiB:.0f} MiB"
    )
    return (
        f"Burst 1: {burst_bytes / GiB:.2f} GiB in {blocks} blocks from "
        f"{settings.get('threads', '?')} threads, freed; burst 2: the same again in the same "
        "process, as a second engine build would run. Burst 2 reuses what the allocator kept "
        "and faults in again what it gave back. Medians of "
        f"{settings.get('repeats', '?')} repeats on {machine.get('cpu_cores', '?')} cores, "
        f"glibc {machine.get('glibc', '?')}."
    )


def build_speed(results: Path = RESULTS) -> Table:
    """Times of the patched-wheel build, from ``build_speed.json``."""
    path = results / "build_speed.json"
    document = read_result(path)
    figures = document["figures"]
    one, matrix = figures["one_wheel"], figures["matrix"]
    rows = [
        [
            f"one patched wheel from a downloaded base (median of {len(one['runs_s'])})",
            f"{one['median_s']:.2f} s",
        ],
        [
            "`pip wheel . --no-deps -w dist`, download included",
            _seconds(figures["pip_wheel"]["seconds"]),
        ],
        [
            f"all {matrix['wheels']} wheels of the supported matrix, bases cached "
            f"({matrix['failed']} failed)",
            f"{matrix['total_s']:.1f} s",
        ],
    ]
    machine = document.get("machine", {})
    notes = [
        f"On {machine.get('cpus', '?')} CPUs, {machine.get('machine', '?')}, "
        f"Python {machine.get('python', '?')}.",
        source_note(path, document),
    ]
    return Table(["", "time"], rows, notes)


TABLES: Dict[str, Callable[[Path], Table]] = {
    "offload-memory": offload_memory,
    "offload-speed": offload_speed,
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
        prog="python benchmarks/readme_tables.py",
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
                "run python benchmarks/readme_tables.py",
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
