"""How much memory a compile needs: one data file, its arithmetic, and what is drawn from it.

``docsrc/_data/memory_terms.json`` holds the terms of a compile's host and GPU peaks (each a
multiple of the model's weights W, of the largest engine's weights S, or bytes, with a low and
a high end where the sources disagree, and its sources), the phases of a compile in which terms
add up, the settings that choose terms, the machines to compare against and the worked
examples. Everything that states a peak is drawn from it, so that nothing can disagree:

* the memory page's calculator (``docsrc/_static/sizing.js``), which gets the file embedded in
  the page by the ``sizing-calculator`` directive and does the same arithmetic as
  :func:`evaluate` (``tests/docs/test_memory_sizing.py`` runs both on the same cases);
* the page's tables: ``memory-terms``, ``memory-formulas`` and ``memory-examples``;
* the README's block ``memory-sizing`` (:func:`readme_block`, written by ``readme.py``).

A term whose value was measured here names its result file, case and field; :func:`load` reads
the value from that file, so a rerun of the benchmark changes every figure drawn from it.
"""

from __future__ import annotations

import html
import json
import logging
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import results

logger = logging.getLogger(__name__)

REPOSITORY = Path(__file__).resolve().parents[2]
DATA = REPOSITORY / "docsrc" / "_data" / "memory_terms.json"
GB = 1e9
# Around a label in the calculator's embedded data, until the build knows which page has it.
REFERENCE = "@@"
# The variables a term's value is a linear combination of.
VARIABLES = ("W", "S", "bytes", "workspace")


class SizingError(Exception):
    """The data file, a result file it names, or the README's block is not as expected."""


# -- the data file -----------------------------------------------------------------------------


def _matches(item: Dict[str, Any], selector: Dict[str, Any]) -> bool:
    return all(item.get(key) == value for key, value in selector.items())


def _measured(repository: Path, reference: Dict[str, Any]) -> Dict[str, float]:
    """The value of a measured term: the figure of the case of the result file it names."""
    try:
        document = results.load(repository / reference["file"])
        value = results.case(document, reference["case"])["figures"][reference["figure"]]
    except (results.ResultError, KeyError) as error:
        raise SizingError(f"docsrc/_data/memory_terms.json names {reference}: {error}") from None
    value = float(value)
    if "digits" in reference:
        value = round(value, int(reference["digits"]))
    return {reference["unit"]: value}


def load(path: Path = DATA, repository: Path = REPOSITORY) -> Dict[str, Any]:
    """The data file, each measured term's value read from its result file, checked whole.

    Raises :class:`SizingError` naming the first problem: a term, setting or machine that a
    phase, the recommendations or the examples name but the file does not define.
    """
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    terms = {term["id"]: term for term in data["terms"]}
    for term in data["terms"]:
        if "result" in term:
            term["low"] = term["high"] = _measured(repository, term["result"])
        for bound in ("low", "high"):
            unknown = set(term[bound]) - set(VARIABLES)
            if unknown:
                raise SizingError(f"term {term['id']}: unknown variables {sorted(unknown)}")
        if not term.get("sources"):
            raise SizingError(f"term {term['id']} names no source")
    for phase in data["phases"]:
        for entry in phase["host"] + phase["gpu"]:
            if entry["term"] not in terms:
                raise SizingError(f"phase {phase['id']}: no term {entry['term']!r}")
    settings = {setting["id"] for setting in data["settings"]}
    machines = {machine["id"] for machine in data["machines"]}
    for name in data["recommend"]:
        if name not in settings:
            raise SizingError(f"recommend: no setting {name!r}")
    for name in data["examples"]["machines"]:
        if name not in machines:
            raise SizingError(f"examples: no machine {name!r}")
    return data


def _entry(data: Dict[str, Any], kind: str, entry_id: str) -> Dict[str, Any]:
    """A copy of the term, setting or machine ``entry_id`` (``kind``: its list in the file)."""
    for candidate in data[kind]:
        if candidate["id"] == entry_id:
            return dict(candidate)
    raise SizingError(f"no {kind[:-1]} {entry_id!r}")


def term(data: Dict[str, Any], term_id: str) -> Dict[str, Any]:
    return _entry(data, "terms", term_id)


def setting(data: Dict[str, Any], setting_id: str) -> Dict[str, Any]:
    return _entry(data, "settings", setting_id)


def machine(data: Dict[str, Any], machine_id: str) -> Dict[str, Any]:
    """A machine, with the usable bytes of a shared memory (its nominal bytes times the
    usable fraction the file assumes)."""
    found = _entry(data, "machines", machine_id)
    if found["kind"] == "shared":
        found["usable_bytes"] = found["nominal_bytes"] * found["usable_fraction"]
    return found


def model_bytes(data: Dict[str, Any], model: Dict[str, Any]) -> float:
    """W of a worked example: its parameters times its dtype's bytes."""
    return float(model["parameters"]) * float(data["dtypes"][model["dtype"]])


# -- the arithmetic (sizing.js does the same) --------------------------------------------------


def _value(coefficients: Dict[str, float], variables: Dict[str, float]) -> float:
    return sum(factor * variables[name] for name, factor in coefficients.items())


def _phases(data: Dict[str, Any], chosen_setting: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The phases of a compile under a setting (the offload's move only with the offload)."""
    return [phase for phase in data["phases"] if _matches(chosen_setting, phase.get("when", {}))]


def _present(
    data: Dict[str, Any], chosen_setting: Dict[str, Any], phase: Dict[str, Any], side: str
) -> List[Dict[str, Any]]:
    """The terms that count on the ``host`` or ``gpu`` side of a phase under a setting."""
    terms = {entry["id"]: entry for entry in data["terms"]}
    return [
        terms[entry["term"]]
        for entry in phase[side]
        if _matches(chosen_setting, entry.get("when", {}))
        and terms[entry["term"]].get("in_peaks", True)
    ]


def _host_budget(chosen_machine: Dict[str, Any]) -> float:
    """The memory the host side may use: the host's, or the usable part of a shared pool."""
    if chosen_machine["kind"] == "shared":
        return float(chosen_machine["usable_bytes"])
    return float(chosen_machine["host_bytes"])


def evaluate(
    data: Dict[str, Any],
    chosen_setting: Dict[str, Any],
    weights: float,
    chosen_machine: Dict[str, Any],
    *,
    workspace: float = 0.0,
    budget: Optional[float] = None,
) -> Dict[str, Any]:
    """The host, GPU and host + GPU peaks of one setting for a model of ``weights`` bytes.

    Each peak is the largest sum over the compile's phases of the terms present in that phase
    under the setting, at the low and at the high end, with the phase that sets it. Resource
    partitioning cuts the weights into pieces of at most a quarter of the budget left (the
    budget minus the offloaded model), as upstream's partitioner does; it refuses more than
    its maximum number of pieces. The verdict compares the high end (``fits``), then the low
    end (``may fit``) with the machine.
    """
    # Step 1: the largest engine's weights S, and how many engines.
    pieces = data["partitioning"]
    engine_weights, engines, refused = weights, 1, ""
    if chosen_setting["partitioning"]:
        available = _host_budget(chosen_machine) if budget is None else budget
        remaining = available - (weights if chosen_setting["offload"] else 0.0)
        if pieces["multiplier"] * weights >= remaining:
            piece = remaining / pieces["multiplier"]
            if piece <= 0 or weights > piece * pieces["max_engines"]:
                refused = "the budget is too small: upstream's partitioner refuses the model"
            else:
                engine_weights, engines = piece, math.ceil(weights / piece)
    variables = {"W": weights, "S": engine_weights, "bytes": 1.0, "workspace": workspace}

    # Step 2: the sums of each phase, at both ends.
    peaks: Dict[str, Dict[str, Any]] = {}
    for bound in ("low", "high"):
        for phase in _phases(data, chosen_setting):
            sums = {
                side: sum(
                    _value(found[bound], variables)
                    for found in _present(data, chosen_setting, phase, side)
                )
                for side in ("host", "gpu")
            }
            sums["shared"] = sums["host"] + sums["gpu"]
            for memory, total in sums.items():
                peak = peaks.setdefault(memory, {})
                if total > peak.get(bound, -1.0):
                    peak[bound] = total
                    peak[f"{bound}_phase"] = phase["id"]

    # Step 3: what fits.
    if chosen_machine["kind"] == "shared":
        limits = {"shared": float(chosen_machine["usable_bytes"])}
    else:
        limits = {
            "host": float(chosen_machine["host_bytes"]),
            "gpu": float(chosen_machine["gpu_bytes"]),
        }
    if refused:
        verdict = "refused"
    elif all(peaks[memory]["high"] <= limit for memory, limit in limits.items()):
        verdict = "fits"
    elif all(peaks[memory]["low"] <= limit for memory, limit in limits.items()):
        verdict = "may fit"
    else:
        verdict = "does not fit"
    return {
        "setting": chosen_setting["id"],
        "S": engine_weights,
        "engines": engines,
        "refused": refused,
        "peaks": peaks,
        "verdict": verdict,
    }


def recommend(
    data: Dict[str, Any], weights: float, chosen_machine: Dict[str, Any]
) -> Dict[str, Any]:
    """The first of the recommended settings that fits, else the first that may fit, else the
    one whose low end comes closest to fitting."""
    results = [
        evaluate(data, setting(data, name), weights, chosen_machine) for name in data["recommend"]
    ]
    for wanted in ("fits", "may fit"):
        for result in results:
            if result["verdict"] == wanted:
                return result
    memory = "shared" if chosen_machine["kind"] == "shared" else "host"
    built = [result for result in results if not result["refused"]] or results
    return min(built, key=lambda result: result["peaks"][memory]["low"])


# -- what is drawn from it ---------------------------------------------------------------------


def gb(value: float) -> str:
    """Bytes as GB (10^9), the unit of the vendors' figures and of parameters times bytes:
    one decimal below 10 GB, rounded half up from the exact binary value, as JavaScript's
    ``toFixed`` rounds (the calculator writes the same text)."""
    shown = value / GB
    places = Decimal("0.1") if shown < 10 else Decimal("1")
    return f"{Decimal(shown).quantize(places, rounding=ROUND_HALF_UP)} GB"


def span(low: float, high: float) -> str:
    """A range of bytes, ``34-36 GB``, or one figure where both ends round alike."""
    if gb(low) == gb(high):
        return gb(high)
    shown_low = "0" if low <= 0 else gb(low).removesuffix(" GB")
    return f"{shown_low}-{gb(high)}"


def expression(coefficients: Dict[str, float]) -> str:
    """A linear combination as a reader writes it: ``2 W - S + 2 GB + workspace``."""
    text = ""
    for name in ("W", "S", "bytes", "workspace"):
        factor = round(coefficients.get(name, 0.0), 2)
        if not factor:
            continue
        if name == "bytes":
            word = f"{round(abs(factor) / GB, 1):g} GB"
        else:
            word = name if abs(factor) == 1 else f"{abs(factor):g} {name}"
        sign = "-" if factor < 0 else "+"
        text += f" {sign} {word}" if text else ("-" if factor < 0 else "") + word
    return text or "0"


# The formulas compare phases over the model sizes a reader sizes a machine for.
FORMULA_SIZES = (4 * GB, 1000 * GB)


def _at(coefficients: Dict[str, float], weights: float) -> float:
    return coefficients.get("W", 0.0) * weights + coefficients.get("bytes", 0.0)


def _phase_sums(
    data: Dict[str, Any], chosen_setting: Dict[str, Any], memory: str, bound: str
) -> List[Dict[str, float]]:
    """Each phase's sum of terms as coefficients of W (one engine: S = W), for the memory
    ``host``, ``gpu`` or ``shared``."""
    sums = []
    for phase in _phases(data, chosen_setting):
        total = {name: 0.0 for name in VARIABLES}
        for side in ("host", "gpu") if memory == "shared" else (memory,):
            for found in _present(data, chosen_setting, phase, side):
                for name, factor in found[bound].items():
                    total[name] += factor
        total["W"] += total.pop("S")
        sums.append({name: factor for name, factor in total.items() if factor})
    return sums


def formula(data: Dict[str, Any], chosen_setting: Dict[str, Any], memory: str) -> str:
    """The peak of a setting that builds one engine, in multiples of W, without the workspace:
    ``W + 2 GB to 2 W + 2 GB``; where two phases each lead at some model size from 4 GB to
    1000 GB, ``the larger of ... and ...``."""
    shown = []
    for bound in ("low", "high"):
        sums = []
        for candidate in _phase_sums(data, chosen_setting, memory, bound):
            candidate.pop("workspace", None)
            if candidate not in sums:
                sums.append(candidate)
        leading = [
            candidate
            for candidate in sums
            if not any(
                other != candidate
                and all(_at(other, size) >= _at(candidate, size) for size in FORMULA_SIZES)
                for other in sums
            )
        ]
        texts = [expression(candidate) for candidate in leading]
        shown.append(texts[0] if len(texts) == 1 else "the larger of " + " and ".join(texts))
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} to {shown[1]}"


FORMULA_HEADER = ["setting", "host peak", "GPU peak", "host + GPU (one shared memory)"]


def formula_rows(data: Dict[str, Any], settings: Optional[Sequence[str]] = None) -> List[List[str]]:
    """Each setting's peaks (of the ``settings`` named, else of all that build one engine)."""
    chosen_settings = (
        [setting(data, name) for name in settings]
        if settings
        else [chosen for chosen in data["settings"] if not chosen["partitioning"]]
    )
    return [
        [chosen["name"]] + [formula(data, chosen, memory) for memory in ("host", "gpu", "shared")]
        for chosen in chosen_settings
    ]


def example_header(data: Dict[str, Any]) -> List[str]:
    return ["model (W)"] + [machine(data, name)["name"] for name in data["examples"]["machines"]]


def example_cell(data: Dict[str, Any], weights: float, machine_id: str) -> str:
    """The setting to use for a model on a machine, its verdict and its peaks."""
    chosen_machine = machine(data, machine_id)
    result = recommend(data, weights, chosen_machine)
    peaks = result["peaks"]
    if chosen_machine["kind"] == "shared":
        figures = f"host + GPU {span(peaks['shared']['low'], peaks['shared']['high'])}"
    else:
        figures = (
            f"host {span(peaks['host']['low'], peaks['host']['high'])}, "
            f"GPU {span(peaks['gpu']['low'], peaks['gpu']['high'])}"
        )
    if result["verdict"] == "does not fit":
        if chosen_machine["kind"] != "shared" and weights > chosen_machine["gpu_bytes"]:
            return f"none: the engines need W = {gb(weights)} on the GPU"
        return f"none fits; {setting(data, result['setting'])['name']} needs {figures}"
    return f"{setting(data, result['setting'])['name']}: {result['verdict']}; {figures}"


def example_rows(data: Dict[str, Any]) -> List[List[str]]:
    rows = []
    for model in data["examples"]["models"]:
        weights = model_bytes(data, model)
        rows.append(
            [f"{model['name']} ({gb(weights)})"]
            + [example_cell(data, weights, name) for name in data["examples"]["machines"]]
        )
    return rows


def source_text(source: Dict[str, Any]) -> str:
    """A source in one line: upstream's file and function, a result file, or a page's title."""
    if source["kind"] == "code":
        return f"upstream {source['file']}, {source['function']}"
    if source["kind"] == "measured":
        return f"measured here: {source['file']}"
    return str(source["title"])


def source_url(data: Dict[str, Any], source: Dict[str, Any]) -> str:
    """Where a source can be read: upstream's file at its release tag, or the page itself; for
    a result file, a placeholder for the docs section of its benchmark, which the docs build
    resolves (:func:`_resolve_references`)."""
    if source["kind"] == "code":
        return str(data["code_url"]) + str(source["file"])
    if source["kind"] == "measured":
        return f"{REFERENCE}{source['label']}{REFERENCE}"
    return str(source["url"])


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


EXAMPLES_NOTE = (
    "The setting to use is the first of the fork's settings (defaults, offload on, then "
    "resource partitioning) whose high end fits; *may fit* means only the low end does. "
    "Not counted: the workspace (cap it with `workspace_size` and add the cap to the GPU), "
    "and the execution context's memory, which depends on the inputs' shapes."
)
FORMULAS_NOTE = (
    "For models of 4 GB and more, built as one engine; add the workspace to the GPU while an "
    "engine builds. Low and high ends differ where the sources disagree; resource "
    "partitioning, each term, its value and its source: "
    "the docs' memory page "
    "([`docsrc/tutorials/resource_memory/resource_management.rst`]"
    "(docsrc/tutorials/resource_memory/resource_management.rst)), which also has a calculator."
)


def readme_block(data: Dict[str, Any]) -> str:
    """The README's sizing block: the worked examples, then each setting's peaks in W."""
    return (
        _markdown_table(example_header(data), example_rows(data))
        + "\n\n"
        + EXAMPLES_NOTE
        + "\n\n"
        + _markdown_table(FORMULA_HEADER, formula_rows(data))
        + "\n\n"
        + FORMULAS_NOTE
        + "\n\nGenerated from `docsrc/_data/memory_terms.json` by "
        "`python docsrc/_ext/readme.py`.\n"
    )


# -- Sphinx: the directives --------------------------------------------------------------------


def _sphinx_directives() -> Dict[str, Any]:
    """The directives, defined only when Sphinx imports this module (the README's generator
    and the tests need neither Sphinx nor docutils)."""
    from docutils import nodes
    from docutils.parsers.rst import directives
    from sphinx import addnodes
    from sphinx.util.docutils import SphinxDirective
    from sphinx_results import table_nodes

    def table(header: List[str], rows: List[List[Any]], classes: List[str]) -> Any:
        return table_nodes(results.Table(header, rows), classes)[0]

    class _DataDirective(SphinxDirective):
        def data(self) -> Dict[str, Any]:
            self.env.note_dependency(str(DATA))
            for found in json.loads(DATA.read_text(encoding="utf-8"))["terms"]:
                if "result" in found:
                    self.env.note_dependency(str(REPOSITORY / found["result"]["file"]))
            return load()

    class MemoryTerms(_DataDirective):
        """Every term: what it is, its value (low and high), and its sources, linked."""

        def run(self) -> List[Any]:
            data = self.data()
            rows = []
            for found in data["terms"]:
                low, high = expression(found["low"]), expression(found["high"])
                value = low if low == high else f"{low} to {high}"
                if found.get("in_peaks", True) is False:
                    value = "not counted"
                what = nodes.paragraph()
                what += nodes.strong(text=found["name"])
                what += nodes.Text(f" ({found['memory']}): {found['what']}")
                where = nodes.paragraph()
                for index, source in enumerate(found["sources"]):
                    if index:
                        where += nodes.Text("; ")
                    if source["kind"] == "measured":
                        link = addnodes.pending_xref(
                            "",
                            refdomain="std",
                            reftype="ref",
                            reftarget=source["label"],
                            refexplicit=True,
                            refwarn=True,
                            refdoc=self.env.docname,
                        )
                        link += nodes.inline(text=source_text(source))
                    else:
                        link = nodes.reference(
                            text=source_text(source), refuri=source_url(data, source)
                        )
                    where += link
                    if source.get("says"):
                        where += nodes.Text(f": {source['says']}")
                rows.append([what, nodes.paragraph(text=value), where])
            return [table(["term", "size", "source"], rows, ["memory-terms"])]

    class MemoryFormulas(_DataDirective):
        """Each setting's peaks in multiples of W; ``:settings: fork fork-offload`` picks rows."""

        option_spec = {"settings": directives.unchanged}

        def run(self) -> List[Any]:
            data = self.data()
            names = self.options.get("settings", "").split() or None
            return [table(FORMULA_HEADER, formula_rows(data, names), ["memory-formulas"])]

    class MemoryExamples(_DataDirective):
        def run(self) -> List[Any]:
            data = self.data()
            return [
                table(example_header(data), example_rows(data), ["memory-examples"]),
                nodes.paragraph(text=EXAMPLES_NOTE.replace("*", "").replace("`", "")),
            ]

    class SizingCalculator(_DataDirective):
        """The calculator's form, with the data file embedded (no request: works from file://)."""

        def run(self) -> List[Any]:
            data = self.data()
            root = "../" * self.env.docname.count("/")
            for found in data["terms"] + data["machines"]:
                for source in found["sources"]:
                    source["href"] = source_url(data, source)
            embedded = json.dumps(data, sort_keys=True).replace("</", "<\\/")
            markup = (
                '<div id="sizing-calculator" class="sizing-calculator">'
                "<noscript>The calculator needs JavaScript; the tables below give the same "
                "figures.</noscript></div>\n"
                f'<script type="application/json" id="memory-terms">{embedded}</script>\n'
                f'<script src="{html.escape(root)}_static/sizing.js"></script>\n'
            )
            return [nodes.raw("", markup, format="html")]

    return {
        "memory-terms": MemoryTerms,
        "memory-formulas": MemoryFormulas,
        "memory-examples": MemoryExamples,
        "sizing-calculator": SizingCalculator,
    }


def _resolve_references(app: Any, doctree: Any, docname: str) -> None:
    """Replace each label placeholder in the calculator's embedded data with the link to the
    section that has it, relative to the page; an unknown label is a build warning."""
    from docutils import nodes
    from sphinx.util import logging as sphinx_logging

    labels = app.env.domaindata["std"]["labels"]
    for raw in list(doctree.findall(nodes.raw)):
        text = raw.astext()
        if REFERENCE not in text:
            continue
        parts = text.split(REFERENCE)
        for index in range(1, len(parts), 2):
            label = parts[index]
            if label not in labels:
                sphinx_logging.getLogger(__name__).warning(
                    "sizing-calculator: no label %r (a measured term's source)",
                    label,
                    location=raw,
                )
                parts[index] = ""
                continue
            target, anchor, _ = labels[label]
            parts[index] = app.builder.get_relative_uri(docname, target) + "#" + anchor
        raw.children[0] = nodes.Text("".join(parts))


def setup(app: Any) -> Dict[str, Any]:
    for name, directive in _sphinx_directives().items():
        app.add_directive(name, directive)
    app.connect("doctree-resolved", _resolve_references)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
