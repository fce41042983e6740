"""Sphinx extension: the evidence package's tables as docutils nodes, and one role.

It only adapts :mod:`evidence` to Sphinx: what a table holds is decided there.

Directives:

* ``.. readme-table:: NAME``: the named table (``evidence.tables.TABLES``) with its notes, as the
  README shows it (the README holds a few of them; the docs show them all);
* ``.. supported-matrix:: docsrc/_data/supported_matrix.json``: the matrix command's table;
* the memory page's, from ``docsrc/_data/memory_terms.json`` and the compile benchmark's
  results (``evidence/sizing.py``): ``memory-measured`` (every setting measured, its peaks),
  ``memory-terms`` (each term, its value and sources), ``memory-formulas`` (each setting's
  estimated peaks in W; ``:settings: KEY ...`` picks rows), ``memory-examples`` and
  ``sizing-calculator`` (``_templates/sizing.html`` rendered with the data, which it embeds
  for ``_static/sizing.js``, so that it works from ``file://``).

``.. substitution-code-block:: console`` is a ``code-block`` whose ``|name|`` are replaced by the
values of ``fork_substitutions`` (``conf.py``: the releases and the label, from
:mod:`evidence.facts`), as ``rst_epilog`` replaces them in prose, so that a command keeps its
highlighting and nobody types the label.

Plots go through matplotlib's ``plot`` directive (``plots.plot("NAME")``; ``conf.py`` imports
``evidence.plots`` for it). The role ``:result:`STEM CASE MEASURE [FORMAT]``` writes one figure
inline: the figure ``MEASURE`` of case ``CASE`` of ``benchmarks/results/STEM.json``, formatted
with ``FORMAT`` (``.2f``; ``GiB:.2f``, ``MiB:.0f``, ``ms:.1f`` and ``%:.1f`` scale first), and a
dagger when that file measured another overlay than the current one.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import jinja2
from docutils import nodes
from docutils.parsers.rst import directives
from docutils.parsers.rst.states import Inliner
from sphinx.application import Sphinx
from sphinx.directives.code import CodeBlock
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

from evidence import REPOSITORY, RESULTS, sizing, tables
from evidence.result import ResultError, find_case, result_file

SCALES = {"GiB": 1 / tables.GiB, "MiB": 1 / tables.MiB, "ms": 1000.0, "%": 100.0}


def paragraph(text: str) -> nodes.paragraph:
    """Markdown-like ``text`` (written once for the README): `code` as literals, links and
    *emphasis* as their text, since the reader is already in the docs."""
    node = nodes.paragraph()
    text = re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", text)
    text = re.sub(r"\*([^*\s][^*]*)\*", r"\1", text)
    for index, part in enumerate(text.split("`")):
        if part:
            node += nodes.literal(text=part) if index % 2 else nodes.Text(part)
    return node


def table_nodes(table: tables.Table, classes: Sequence[str] = ("benchmark-table",)) -> List[Any]:
    """A :class:`evidence.tables.Table` as a docutils table, then its notes; a cell is text (as
    :func:`paragraph` reads it) or a node."""
    node = nodes.table(classes=list(classes))
    group = nodes.tgroup(cols=len(table.header))
    node += group
    group.extend(nodes.colspec(colwidth=1) for _ in table.header)
    for part, rows in ((nodes.thead(), [table.header]), (nodes.tbody(), table.rows)):
        group += part
        for cells in rows:
            row = nodes.row()
            for index, cell in enumerate(cells):
                shown = cell if isinstance(cell, nodes.Node) else paragraph(cell)
                row += nodes.entry("", shown, classes=["numeric"] if index else [])
            part += row
    return [node, *(paragraph(note) for note in table.notes)]


class ReadmeTable(SphinxDirective):
    """A named table of the presenter (module docstring)."""

    required_arguments = 1

    def run(self) -> List[nodes.Node]:
        for path in RESULTS.glob("*.json"):
            self.env.note_dependency(str(path))
        try:
            return table_nodes(tables.table(self.arguments[0]))
        except ResultError as error:
            return [self.state_machine.reporter.error(str(error), line=self.lineno)]


class SupportedMatrix(SphinxDirective):
    """The supported releases (:func:`evidence.tables.supported_matrix`)."""

    required_arguments = 1

    def run(self) -> List[nodes.Node]:
        path = REPOSITORY / self.arguments[0]
        self.env.note_dependency(str(path))
        return table_nodes(tables.supported_matrix(path))


class MemoryDirective(SphinxDirective):
    """The memory page's tables and calculator (module docstring)."""

    option_spec = {"settings": directives.unchanged}
    calculator = REPOSITORY / "docsrc" / "_templates" / "sizing.html"

    def run(self) -> List[nodes.Node]:
        root = "../" * self.env.docname.count("/")
        data = sizing.load(root=root)
        for path in [sizing.DATA, self.calculator, *RESULTS.glob("*.json")]:
            self.env.note_dependency(str(path))
        if self.name == "sizing-calculator":
            environment = jinja2.Environment(autoescape=True)
            environment.policies["json.dumps_kwargs"] = {}  # keep the data's order, not sorted
            template = environment.from_string(self.calculator.read_text(encoding="utf-8"))
            return [nodes.raw("", template.render(data=data, root=root), format="html")]
        if self.name == "memory-formulas":
            table = sizing.formula_table(data, self.options.get("settings", "").split())
        elif self.name == "memory-examples":
            table = sizing.example_table(data)
        elif self.name == "memory-measured":
            table = sizing.measured_table(data, data["examples"]["models"][0])
        else:
            rows = [self.term_row(term) for term in data["terms"].values()]
            table = tables.Table(["term", "size", "source"], rows)
        return table_nodes(table, [self.name])

    @staticmethod
    def term_row(term: Dict[str, Any]) -> List[Any]:
        """What a term is, its value (low and high), and its sources, linked."""
        what = nodes.paragraph("", "", nodes.strong(text=term["name"]))
        what += nodes.Text(f" ({term['memory']}): {term['what']}")
        where = nodes.paragraph()
        for index, source in enumerate(term["sources"]):
            internal = source["kind"] == "measured"
            where += nodes.Text("; " if index else "")
            where += nodes.reference(text=source["text"], refuri=source["link"], internal=internal)
            where += nodes.Text(f": {source['says']}" if source.get("says") else "")
        low, high = sizing.expression(term["low"]), sizing.expression(term["high"])
        size = low if low == high else f"{low} to {high}"
        return [what, size if term.get("in_peaks", True) else "not counted", where]


def result_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Inliner,
    options: Optional[Dict[str, Any]] = None,
    content: Sequence[str] = (),
) -> Tuple[List[nodes.Node], List[nodes.system_message]]:
    """``:result:`STEM CASE MEASURE [FORMAT]```: one figure of a result file, inline."""
    words = text.split()
    try:
        if len(words) not in (3, 4):
            raise ResultError("write STEM CASE MEASURE [FORMAT]")
        document = result_file(words[0])
        inliner.document.settings.env.note_dependency(str(REPOSITORY / document["_file"]))
        value = find_case(document, words[1])["figures"][words[2]]
        unit, _, spec = words[3].rpartition(":") if len(words) == 4 else ("", "", "")
        shown = format(value * SCALES.get(unit, 1.0), spec)
    except (ResultError, KeyError, TypeError, ValueError) as error:
        message = inliner.reporter.error(f":result:`{text}`: {error!r}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    if "not the current" not in tables.overlay_text(document):
        return [nodes.Text(shown)], []
    why = f"measured on another overlay: {tables.overlay_text(document)}"
    return [nodes.Text(shown), nodes.abbreviation("\u2020", "\u2020", explanation=why)], []


class SubstitutionCodeBlock(CodeBlock):
    """A ``code-block`` with the docs' substitutions (module docstring) replaced."""

    def run(self) -> List[nodes.Node]:
        values = self.config.fork_substitutions
        self.content = type(self.content)(
            [re.sub(r"\|(\w+)\|", lambda m: values.get(m[1], m[0]), line) for line in self.content],
            items=self.content.items,
        )
        return super().run()


def peak_role(
    name: str,
    rawtext: str,
    text: str,
    lineno: int,
    inliner: Inliner,
    options: Optional[Dict[str, Any]] = None,
    content: Sequence[str] = (),
) -> Tuple[List[nodes.Node], List[nodes.system_message]]:
    """``:peak:`SETTING MEMORY```: a measured setting's highest peak (``evidence.sizing``:
    counting the model) in one memory (host, gpu, shared), inline: ``5.07 W``."""
    words = text.split()
    try:
        measured = sizing.load()["settings"][words[0]]["measured"]
        shown = f"{measured['w'][words[1]]:.2f} W"
    except (IndexError, KeyError, TypeError, sizing.SizingError) as error:
        message = inliner.reporter.error(f":peak:`{text}`: no such measurement ({error!r})")
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    inliner.document.settings.env.note_dependency(str(sizing.DATA))
    return [nodes.Text(shown)], []


class LongLiterals(SphinxPostTransform):
    """Marks inline code with a word too long for a phone's line (a path) ``long-literal``,
    the one kind of inline code ``fork.css`` lets break inside a word."""

    default_priority = 400
    formats = ("html",)

    def run(self, **kwargs: Any) -> None:
        for node in self.document.findall(nodes.literal):
            if any(len(word) > 28 for word in node.astext().split()):
                node["classes"].append("long-literal")


def setup(app: Sphinx) -> Dict[str, Any]:
    app.add_config_value("fork_substitutions", {}, "env")
    app.add_directive("substitution-code-block", SubstitutionCodeBlock)
    app.add_post_transform(LongLiterals)
    app.add_directive("readme-table", ReadmeTable)
    app.add_directive("supported-matrix", SupportedMatrix)
    app.add_role("result", result_role)
    app.add_role("peak", peak_role)
    names = ["memory-measured", "memory-terms", "memory-formulas", "memory-examples"]
    for name in [*names, "sizing-calculator"]:
        app.add_directive(name, MemoryDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
