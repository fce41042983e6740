"""Sphinx extension: tables and inline figures drawn from the repository's JSON files.

Every figure the docs show comes from a file committed in the repository, read at build
time, so rebuilt docs always show the data that is in the repository. Paths are relative to
the repository root (the folder above ``docsrc``). Every table of measured figures is made by
``benchmarks/readme_tables.py``, the same code that writes the README's tables; this module
only turns its :class:`~readme_tables.Table` objects into docutils nodes.

Directives:

* ``.. supported-matrix:: docsrc/_data/supported_matrix.json``: Python versions per base
  release and platform, as the ``matrix`` command of the patched-wheel build wrote them, under
  the platform titles of that command;
* ``.. readme-table:: offload-headline``: one of the README's headline tables, with its notes;
* ``.. offload-results:: unprobed`` (or ``probed``): the table and source of every
  ``offload*.json`` run of that kind;
* ``.. offload-strategies::``: the registry of offload strategies, name, label and meaning;
* ``.. offload-run-summary:: offload_designs``: one offload run's cases against the run's copy
  ceiling and host limit (``offload_designs.json`` probed, ``offload_designs_timing.json``
  timed), and where the files come from;
* ``.. host-heap-table::``: every case of that result file;
* ``.. offload-step-table::``: every release step of the fork the offload runs measured;
* ``.. result-source:: <path>``: the command that wrote a result file and the machine it ran on;

Role ``:result:`` writes one value inline: ``:result:`offload_timing/cases/size_gib=64,
strategy=fork/GBps .1f``` is the ``GBps`` of the first case of
``benchmarks/results/offload_timing.json`` whose ``size_gib`` is 64 and ``strategy`` is
``fork``, formatted with ``.1f``. A format ``GiB:.2f`` or ``MiB:.0f`` divides by that unit
first; ``%:.1f`` multiplies by 100. ``:result:`<a> minus <b> MiB:.0f``` writes a difference.
A figure from a file that measured another overlay than the current one, or that does not say
which, is followed by a dagger whose tooltip says so.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Sequence, Tuple

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.parsers.rst.states import Inliner
from docutils.utils import unescape
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

REPOSITORY = Path(__file__).resolve().parents[2]


def import_package(name: str, folder: Path) -> ModuleType:
    """The package in ``folder``, imported as ``name`` without adding its parent to
    ``sys.path`` (the docs build runs from ``docsrc/``), so that its modules' absolute imports
    (``from benchmarks.strategies import ...``) find it; the one already imported, if any."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return package


import_package("benchmarks", REPOSITORY / "benchmarks")
import_package("patched_wheel", REPOSITORY / "tools" / "patched_wheel")
readme_tables = importlib.import_module("benchmarks.readme_tables")
PLATFORM_TITLES = importlib.import_module("patched_wheel.matrix").PLATFORM_TITLES
portable_command = readme_tables.portable_command
TABLES, ResultsError, Table = readme_tables.TABLES, readme_tables.ResultsError, readme_tables.Table
offload_files = readme_tables.offload_files

GiB = 1024**3
MiB = 1024**2
RESULTS = "benchmarks/results"


# What the source line says about a result file's machine: (key, how to write it).
MACHINE_FIELDS = (
    ("gpu", "{}"),
    ("device", "{}"),
    ("driver", "driver {}"),
    ("cpu", "{}"),
    ("cpu_model", "{}"),
    ("cpus", "{} CPUs"),
    ("cpu_cores", "{} cores"),
    ("glibc", "glibc {}"),
    ("torch", "torch {}"),
    ("python", "Python {}"),
)


class ResultError(Exception):
    """A result file or a selector the docs ask for that is not there."""


def _repository(srcdir: Path) -> Path:
    return Path(srcdir).resolve().parent


def _read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as error:
        raise ResultError(f"cannot read {path}: {error}") from None


def _table(table: Table) -> nodes.table:
    """A :class:`~readme_tables.Table` as a docutils table, its numbers right-aligned."""
    node = nodes.table(classes=["benchmark-table"])
    group = nodes.tgroup(cols=len(table.header))
    node += group
    for _ in table.header:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    head += _row(table.header, table.numeric_from)
    body = nodes.tbody()
    group += body
    for cells in table.rows:
        body += _row(cells, table.numeric_from)
    return node


def _row(cells: Sequence[str], numeric_from: int) -> nodes.row:
    row = nodes.row()
    for index, text in enumerate(cells):
        classes = ["numeric"] if numeric_from and index >= numeric_from else []
        entry = nodes.entry(classes=classes)
        entry += _paragraph(text)
        row += entry
    return row


def _paragraph(text: str) -> nodes.paragraph:
    """A paragraph of Markdown-like ``text``: `code` as inline literals, [text](link) as links.

    The tables' text is written once, for the README's Markdown; a link to a repository file
    (the benchmarks page's source) becomes plain text here, where the reader already is.
    """
    paragraph = nodes.paragraph()
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    for index, part in enumerate(text.split("`")):
        if part:
            paragraph += nodes.literal(text=part) if index % 2 else nodes.Text(part)
    return paragraph


def _rendered(table: Table) -> List[nodes.Node]:
    out: List[nodes.Node] = [_table(table)]
    out.extend(_paragraph(note) for note in table.notes)
    return out


class _ResultDirective(SphinxDirective):
    """A directive with one argument: a file path relative to the repository root."""

    required_arguments = 1
    has_content = False

    def load(self) -> Tuple[Path, Any]:
        path = _repository(Path(self.env.srcdir)) / self.arguments[0]
        self.env.note_dependency(str(path))
        return path, _read_json(path)

    def run(self) -> List[nodes.Node]:
        try:
            path, document = self.load()
            return self.render(path, document)
        except (ResultError, ResultsError, KeyError, TypeError, ValueError) as error:
            message = f"{self.name}: {self.arguments[0]}: {error!r}"
            return [self.state_machine.reporter.error(message, line=self.lineno)]

    def render(self, path: Path, document: Any) -> List[nodes.Node]:
        raise NotImplementedError


class SupportedMatrix(_ResultDirective):
    """Python versions per base release and platform, from the matrix command's JSON."""

    def render(self, path: Path, document: Any) -> List[nodes.Node]:
        platforms = list(PLATFORM_TITLES)
        rows = []
        for release in document["releases"]:
            pythons: Dict[str, List[str]] = {name: [] for name in platforms}
            for wheel in release["wheels"]:
                pythons.setdefault(wheel["platform"], []).append(wheel["python"])
            cells = [release.get("distribution", "torch-tensorrt"), release["release"]]
            cells.append(", ".join(release.get("fixes", [])))
            for name in platforms:
                versions = sorted(pythons[name], key=lambda v: tuple(map(int, v.split("."))))
                cells.append(", ".join(versions) or "none")
            rows.append(cells)
        header = ["Distribution", "Base release", "Fixes"]
        header += [PLATFORM_TITLES[name] for name in platforms]
        count = sum(len(release["wheels"]) for release in document["releases"])
        note = f"{count} patched wheels, each with the local label `+{document['local_label']}`."
        return [_table(Table(header, rows, [], numeric_from=0)), _paragraph(note)]


class OffloadResults(SphinxDirective):
    """Every ``offload*.json`` run of one kind (``probed`` or ``unprobed``): its table and
    where it comes from, so that a new result file shows up without editing the page."""

    required_arguments = 1

    def run(self) -> List[nodes.Node]:
        wanted = self.arguments[0] == "probed"
        current = readme_tables.current_overlay_sha256()
        out: List[nodes.Node] = []
        for path in offload_files(_repository(Path(self.env.srcdir)) / RESULTS):
            self.env.note_dependency(str(path))
            document = _read_json(path)
            if any(case.get("probes", True) for case in document["cases"]) != wanted:
                continue
            relative = f"{RESULTS}/{path.name}"
            out.append(_table(readme_tables.offload_run(document)))
            mark = readme_tables.overlay_mark(document, current)
            out.append(_paragraph(readme_tables.overlay_line(mark, current)))
            out.extend(source_nodes(relative, document, None))
        return out


class OffloadStrategies(SphinxDirective):
    """Every offload strategy of the benchmarks' registry (``benchmarks/strategies.py``): its
    name, its label in the tables, and what it does; ``research`` lists the designs not in the
    overlay instead."""

    optional_arguments = 1

    def run(self) -> List[nodes.Node]:
        from benchmarks.strategies import OFFLOAD_STRATEGIES

        self.env.note_dependency(str(REPOSITORY / "benchmarks" / "strategies.py"))
        research = self.arguments[0] == "research" if self.arguments else False
        items = nodes.definition_list(classes=["offload-strategies"])
        for strategy in (s for s in OFFLOAD_STRATEGIES if s.research == research):
            term = nodes.term()
            term += nodes.literal(text=strategy.name)
            definition = nodes.definition()
            text = strategy.description
            definition += _paragraph(f"{strategy.label}: {text[:1].upper()}{text[1:]}.")
            items += nodes.definition_list_item("", term, definition)
        return [items]


class OffloadRunSummary(SphinxDirective):
    """One offload run against its ceilings (:func:`readme_tables.run_summary`): the argument
    is the stem of its probed file, ``<stem>_timing.json`` its timed file; ``:strategies:``
    keeps only those cases; ``:table-only:`` leaves out the notes and the source (for a
    summary whose full table comes later on the page)."""

    required_arguments = 1
    option_spec = {"strategies": directives.unchanged, "table-only": directives.flag}

    def run(self) -> List[nodes.Node]:
        results = _repository(Path(self.env.srcdir)) / RESULTS
        stem = self.arguments[0]
        try:
            documents = []
            for name in (f"{stem}.json", f"{stem}_timing.json"):
                self.env.note_dependency(str(results / name))
                documents.append(_read_json(results / name))
            probed, timed = documents
            wanted = self.options.get("strategies")
            table = readme_tables.run_summary(probed, timed, wanted.split() if wanted else None)
            if "table-only" in self.options:
                return [_table(table)]
            out = _rendered(table)
        except (ResultError, KeyError, TypeError, ValueError) as error:
            message = f"offload-run-summary: {stem}: {error!r}"
            return [self.state_machine.reporter.error(message, line=self.lineno)]
        current = readme_tables.current_overlay_sha256()
        mark = readme_tables.overlay_mark(timed, current)
        out.append(_paragraph(readme_tables.overlay_line(mark, current)))
        out.extend(source_nodes(f"{RESULTS}/{stem}.json", probed, None))
        return out


class FastPathSetupTable(_ResultDirective):
    """GPU and host memory after each step of the fast path's setup."""

    def render(self, path: Path, document: Any) -> List[nodes.Node]:
        return _rendered(readme_tables.fast_path_setup(document))


class HostHeapTable(_ResultDirective):
    """Medians per case and burst size of the host-heap benchmark, bursts 1 and 2 apart."""

    def render(self, path: Path, document: Any) -> List[nodes.Node]:
        return _rendered(readme_tables.host_heap_cases(document))


class OffloadStepTable(SphinxDirective):
    """Every release step of the fork in the offload results: overshoot, and GB/s unprobed."""

    def run(self) -> List[nodes.Node]:
        results = _repository(Path(self.env.srcdir)) / RESULTS
        for path in offload_files(results):
            self.env.note_dependency(str(path))
        return _rendered(readme_tables.offload_steps(results))


def source_nodes(relative: str, document: Any, command: Optional[str]) -> List[nodes.Node]:
    """Where a result file comes from: the command that writes it, and the machine it ran on.

    The command is the one the file records, made portable
    (:func:`readme_tables.portable_command`: no interpreter or output path of the machine it
    ran on), or, for a file that records none, ``command``.
    """
    recorded = readme_tables.recorded_command(document)
    command = portable_command(recorded, relative) if recorded else command
    if not command:
        raise ResultError("the file has no 'command' and the directive gives no :command:")
    machine = readme_tables.machine_record(document)
    described = ", ".join(
        template.format(machine[key])
        for key, template in MACHINE_FIELDS
        if machine.get(key) not in (None, "")
    )
    intro = nodes.paragraph()
    intro += nodes.Text("From ")
    intro += nodes.literal(text=relative)
    intro += nodes.Text(", which this command writes (run from the repository root):")
    block = nodes.literal_block(
        text=wrap_command(command.strip()), language="console", classes=["result-command"]
    )
    out: List[nodes.Node] = [intro, block]
    if described:
        out.append(nodes.paragraph(text=f"Machine: {described}."))
    run = readme_tables.run_record(document)
    if run:
        out.append(nodes.paragraph(text=f"Run: {run}."))
    return out


COMMAND_WIDTH = 48


def _command_groups(command: str) -> List[str]:
    """The program and its arguments, then each option with the values that follow it."""
    groups: List[str] = []
    for word in shlex.split(command):
        quoted = shlex.quote(word)
        if groups and not word.startswith("-"):
            groups[-1] += " " + quoted
        else:
            groups.append(quoted)
    return groups


def wrap_command(command: str, width: int = COMMAND_WIDTH) -> str:
    """A shell command as lines of at most ``width`` characters where its words allow: one
    option (with its values) per line, joined by backslashes, so that a phone shows it whole
    and it still pastes into a shell as one command. Words are never broken."""
    if len(command) <= width:
        return command
    lines: List[str] = []
    for group in _command_groups(command):
        if not lines:
            lines.append(group)
        elif len(group) + 4 <= width:
            lines.append("    " + group)
        else:
            lines.extend("    " + word for word in group.split(" ", 1))
    return " \\\n".join(lines)


class ResultSource(_ResultDirective):
    """Where a result file comes from (:func:`source_nodes`); ``:command:`` for a file that
    records no command."""

    option_spec = {"command": directives.unchanged}

    def render(self, path: Path, document: Any) -> List[nodes.Node]:
        return source_nodes(self.arguments[0], document, self.options.get("command"))


class ReadmeTable(SphinxDirective):
    """One of the README's headline tables (``benchmarks/readme_tables.py``), with its notes."""

    required_arguments = 1

    def run(self) -> List[nodes.Node]:
        name = self.arguments[0]
        results = _repository(Path(self.env.srcdir)) / RESULTS
        if name not in TABLES:
            message = f"readme-table: no table {name!r}; choose one of {sorted(TABLES)}"
            return [self.state_machine.reporter.error(message, line=self.lineno)]
        for path in results.glob("*.json"):
            self.env.note_dependency(str(path))
        try:
            table = TABLES[name](results)
        except (ResultsError, KeyError, TypeError, ValueError) as error:
            message = f"readme-table: {name}: {error!r}"
            return [self.state_machine.reporter.error(message, line=self.lineno)]
        return _rendered(table)


def _select(document: Any, selector: str) -> Any:
    """Walk ``document`` along ``a/b/k=v,k2=v2/c``; ``k=v`` picks the first matching item."""
    value = document
    for key in selector.split("/"):
        if "=" in key:
            wanted = dict(part.split("=", 1) for part in key.split(","))
            matches = [
                item
                for item in value
                if all(str(item.get(name)) == text for name, text in wanted.items())
            ]
            if not matches:
                raise ResultError(f"no item with {key!r}")
            value = matches[0]
        elif isinstance(value, list):
            value = value[int(key)]
        else:
            if key not in value:
                raise ResultError(f"no key {key!r}")
            value = value[key]
    return value


def _format(value: Any, spec: str) -> str:
    scale = {"GiB": 1 / GiB, "MiB": 1 / MiB, "%": 100.0, "ms": 1000.0}
    unit, _, spec = spec.rpartition(":") if ":" in spec else ("", "", spec)
    if unit:
        value = value * scale[unit]
    return format(value, spec)


def _value(srcdir: Path, reference: str, env: Any) -> Any:
    """The value ``<file stem>/<selector>`` points at in ``benchmarks/results``."""
    stem, _, selector = reference.partition("/")
    path = _repository(srcdir) / RESULTS / f"{stem}.json"
    env.note_dependency(str(path))
    return _select(_read_json(path), selector)


@functools.lru_cache(maxsize=None)
def _current_overlay() -> str:
    current: str = readme_tables.current_overlay_sha256()
    return current


# The mark after an inline figure whose result file does not name the current overlay.
STALE_MARK = "\u2020"


def _stale_marks(srcdir: Path, references: Sequence[str]) -> List[nodes.Node]:
    """A dagger, with its reason as a tooltip, when a figure's file measured another overlay
    or does not say which (a file without ``provenance``); nothing for the current one."""
    reasons = []
    for reference in references:
        stem = reference.partition("/")[0]
        document = _read_json(_repository(srcdir) / RESULTS / f"{stem}.json")
        mark = readme_tables.overlay_mark(document, _current_overlay())
        if not mark.current:
            reasons.append(f"{stem}.json: {mark.text}")
    if not reasons:
        return []
    explanation = "measured on another overlay than the current one: " + "; ".join(reasons)
    node = nodes.abbreviation(STALE_MARK, STALE_MARK, explanation=explanation)
    node["classes"].append("stale-figure")
    return [node]


def result_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Inliner,
    options: Optional[Dict[str, Any]] = None,
    content: Sequence[str] = (),
) -> Tuple[List[nodes.Node], List[nodes.system_message]]:
    """``:result:`<file stem>/<selector> [format]```: one value of a result file, inline.

    ``:result:`<a> minus <b> [format]``` writes the difference of two values, for a figure
    that the results hold only as two measurements (the fast path's host memory: ``fork``'s
    overshoot minus ``fork-plain``'s).
    """
    env = inliner.document.settings.env
    srcdir = Path(env.srcdir)
    words = unescape(text).split()
    try:
        if len(words) >= 3 and words[1] == "minus":
            value = _value(srcdir, words[0], env) - _value(srcdir, words[2], env)
            spec, references = " ".join(words[3:]), [words[0], words[2]]
        else:
            value = _value(srcdir, words[0], env)
            spec, references = " ".join(words[1:]), [words[0]]
        shown = _format(value, spec) if spec else str(value)
        marks = _stale_marks(srcdir, references)
    except (ResultError, KeyError, IndexError, TypeError, ValueError) as error:
        message = inliner.reporter.error(f":result:`{text}`: {error}", line=lineno)
        problem = inliner.problematic(rawtext, rawtext, message)
        return [problem], [message]
    return [nodes.Text(shown), *marks], []


# Inline code with a word longer than this may break inside that word on a narrow screen
# (fork.css keeps shorter words whole, so that a name never breaks at its hyphen).
LONG_WORD = 28


class LongLiterals(SphinxPostTransform):
    """Marks inline code holding a word too long for a phone's line (a path, a variable with
    its value) with the class ``long-literal``, the one kind of code fork.css lets break."""

    default_priority = 400
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        for node in self.document.findall(nodes.literal):
            if any(len(word) > LONG_WORD for word in node.astext().split()):
                node["classes"].append("long-literal")


def setup(app: Sphinx) -> Dict[str, Any]:
    app.add_post_transform(LongLiterals)
    app.add_directive("supported-matrix", SupportedMatrix)
    app.add_directive("offload-strategies", OffloadStrategies)
    app.add_directive("offload-run-summary", OffloadRunSummary)
    app.add_directive("fast-path-setup-table", FastPathSetupTable)
    app.add_directive("host-heap-table", HostHeapTable)
    app.add_directive("offload-step-table", OffloadStepTable)
    app.add_directive("offload-results", OffloadResults)
    app.add_directive("result-source", ResultSource)
    app.add_directive("readme-table", ReadmeTable)
    app.add_role("result", result_role)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
