"""How much memory a compile needs: one data file, its arithmetic, and what is drawn from it.

``docsrc/_data/memory_terms.json`` holds the terms of a compile's host and GPU peaks (each a
multiple of the model's weights W, of the largest engine's weights S, or bytes, with a low and
a high end where the sources disagree, and its sources), the phases in which terms add up, the
settings that choose terms, the machines and the worked examples. Everything that states a
peak is drawn from it: the memory page's calculator (``docsrc/_static/sizing.js``, the same
arithmetic as :func:`evaluate`; ``tests/docs/test_memory_sizing.py`` runs both on the same
cases), the page's tables (``sphinx_results.py``) and the README's ``memory-sizing`` block.

A term measured here names its result file, case and figure; :func:`load` reads the value
from that file, so a rerun of the benchmark changes every figure drawn from it.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import results

REPOSITORY = results.REPOSITORY
DATA = REPOSITORY / "docsrc" / "_data" / "memory_terms.json"
GB = 1e9
# The variables a term's value is a linear combination of.
VARIABLES = ("W", "S", "bytes", "workspace")


class SizingError(Exception):
    """The data file, or a result file it names, is not as expected."""


# -- the data file -----------------------------------------------------------------------------


def _matches(item: Dict[str, Any], selector: Dict[str, Any]) -> bool:
    return all(item.get(key) == value for key, value in selector.items())


def _measured(repository: Path, reference: Dict[str, Any]) -> Dict[str, float]:
    """The value of a measured term: the figure of the case of the result file it names."""
    try:
        document = results.load(repository / reference["file"])
        case = results.case(document, reference["case"])
        value = float(case["figures"][reference["figure"]])
    except (results.ResultError, KeyError) as error:
        raise SizingError(f"docsrc/_data/memory_terms.json names {reference}: {error}") from None
    if "digits" in reference:
        value = round(value, int(reference["digits"]))
    return {reference["unit"]: value}


def load(path: Path = DATA, repository: Path = REPOSITORY) -> Dict[str, Any]:
    """The data file, each measured term read from its result file, checked whole.

    Raises :class:`SizingError` naming the first name that is used but not defined.
    """
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for found in data["terms"]:
        if "result" in found:
            found["low"] = found["high"] = _measured(repository, found["result"])
        unknown = (set(found["low"]) | set(found["high"])) - set(VARIABLES)
        if unknown:
            raise SizingError(f"term {found['id']}: unknown variables {sorted(unknown)}")
        if not found.get("sources"):
            raise SizingError(f"term {found['id']} names no source")
    names = {kind: {e["id"] for e in data[kind]} for kind in ("terms", "settings", "machines")}
    used = [("terms", e["term"]) for p in data["phases"] for e in p["host"] + p["gpu"]]
    used += [("settings", name) for name in data["recommend"]]
    used += [("machines", name) for name in data["examples"]["machines"]]
    for kind, name in used:
        if name not in names[kind]:
            raise SizingError(f"memory_terms.json: no {kind[:-1]} {name!r}")
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
    """A machine; a shared memory gets its usable bytes (nominal times usable fraction)."""
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


def _phases(data: Dict[str, Any], chosen: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The phases of a compile under a setting (the offload's move only with the offload)."""
    return [phase for phase in data["phases"] if _matches(chosen, phase.get("when", {}))]


def _present(
    data: Dict[str, Any], chosen: Dict[str, Any], phase: Dict[str, Any], side: str
) -> List[Dict[str, Any]]:
    """The terms that count on the ``host`` or ``gpu`` side of a phase under a setting."""
    terms = {entry["id"]: entry for entry in data["terms"]}
    return [
        terms[entry["term"]]
        for entry in phase[side]
        if _matches(chosen, entry.get("when", {})) and terms[entry["term"]].get("in_peaks", True)
    ]


def _limits(chosen_machine: Dict[str, Any]) -> Dict[str, float]:
    if chosen_machine["kind"] == "shared":
        return {"shared": float(chosen_machine["usable_bytes"])}
    return {side: float(chosen_machine[f"{side}_bytes"]) for side in ("host", "gpu")}


def evaluate(
    data: Dict[str, Any],
    chosen: Dict[str, Any],
    weights: float,
    chosen_machine: Dict[str, Any],
    *,
    workspace: float = 0.0,
    budget: Optional[float] = None,
) -> Dict[str, Any]:
    """The host, GPU and host + GPU peaks of one setting for a model of ``weights`` bytes.

    Each peak is the largest sum over the phases of the terms present in that phase under the
    setting, at the low and at the high end, with the phase that sets it. Resource
    partitioning cuts the weights into pieces of at most a quarter of the budget left (the
    budget minus the offloaded model), as upstream's partitioner does, which refuses more
    than its maximum number of pieces. The verdict compares the high end (``fits``), then the
    low end (``may fit``) with the machine.
    """
    limits = _limits(chosen_machine)
    # Step 1: the largest engine's weights S, and how many engines.
    pieces = data["partitioning"]
    engine_weights, engines, refused = weights, 1, ""
    if chosen["partitioning"]:
        available = limits.get("shared", limits.get("host")) if budget is None else budget
        remaining = available - (weights if chosen["offload"] else 0.0)
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
        for phase in _phases(data, chosen):
            sums = {
                side: sum(_value(t[bound], variables) for t in _present(data, chosen, phase, side))
                for side in ("host", "gpu")
            }
            sums["shared"] = sums["host"] + sums["gpu"]
            for memory, total in sums.items():
                peak = peaks.setdefault(memory, {})
                if total > peak.get(bound, -1.0):
                    peak[bound], peak[f"{bound}_phase"] = total, phase["id"]

    # Step 3: what fits.
    def within(bound: str) -> bool:
        return all(peaks[memory][bound] <= limit for memory, limit in limits.items())

    verdict = "refused" if refused else "fits" if within("high") else "may fit"
    if verdict == "may fit" and not within("low"):
        verdict = "does not fit"
    return {
        "setting": chosen["id"],
        "S": engine_weights,
        "engines": engines,
        "refused": refused,
        "peaks": peaks,
        "verdict": verdict,
    }


def recommend(
    data: Dict[str, Any], weights: float, chosen_machine: Dict[str, Any]
) -> Dict[str, Any]:
    """The first recommended setting that fits, else the first that may fit, else the one
    whose low end comes closest to fitting."""
    found = [
        evaluate(data, setting(data, name), weights, chosen_machine) for name in data["recommend"]
    ]
    for wanted in ("fits", "may fit"):
        for result in found:
            if result["verdict"] == wanted:
                return result
    memory = "shared" if chosen_machine["kind"] == "shared" else "host"
    built = [result for result in found if not result["refused"]] or found
    return min(built, key=lambda result: result["peaks"][memory]["low"])


# -- what is drawn from it ---------------------------------------------------------------------


def gb(value: float) -> str:
    """Bytes as GB (10^9): one decimal below 10 GB, rounded half up from the exact binary
    value, as JavaScript's ``toFixed`` rounds (the calculator writes the same text)."""
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
    for name in VARIABLES:
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
    data: Dict[str, Any], chosen: Dict[str, Any], memory: str, bound: str
) -> List[Dict[str, float]]:
    """Each phase's sum of terms in W (one engine: S = W), without the workspace, for the
    memory ``host``, ``gpu`` or ``shared``; each distinct sum once."""
    sums: List[Dict[str, float]] = []
    for phase in _phases(data, chosen):
        total = {name: 0.0 for name in VARIABLES}
        for side in ("host", "gpu") if memory == "shared" else (memory,):
            for found in _present(data, chosen, phase, side):
                for name, factor in found[bound].items():
                    total[name] += factor
        total["W"] += total.pop("S")
        total.pop("workspace")
        candidate = {name: factor for name, factor in total.items() if factor}
        if candidate not in sums:
            sums.append(candidate)
    return sums


def formula(data: Dict[str, Any], chosen: Dict[str, Any], memory: str) -> str:
    """The peak of a setting that builds one engine, in W, without the workspace:
    ``W + 2 GB to 2 W + 2 GB``; where two phases each lead at some model size from 4 GB to
    1000 GB, ``the larger of ... and ...``."""
    shown = []
    for bound in ("low", "high"):
        sums = _phase_sums(data, chosen, memory, bound)
        texts = [
            expression(candidate)
            for candidate in sums
            if not any(
                other != candidate
                and all(_at(other, size) >= _at(candidate, size) for size in FORMULA_SIZES)
                for other in sums
            )
        ]
        shown.append(texts[0] if len(texts) == 1 else "the larger of " + " and ".join(texts))
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} to {shown[1]}"


FORMULAS_NOTE = (
    "For models of 4 GB and more, built as one engine; add the workspace to the GPU while an "
    "engine builds. Low and high ends differ where the sources disagree; resource "
    "partitioning, each term, its value and its source: "
    "the docs' memory page "
    "([`docsrc/tutorials/resource_memory/resource_management.rst`]"
    "(docsrc/tutorials/resource_memory/resource_management.rst)), which also has a calculator."
)
EXAMPLES_NOTE = (
    "The setting to use is the first of the fork's settings (defaults, offload on, then "
    "resource partitioning) whose high end fits; *may fit* means only the low end does. "
    "Not counted: the workspace (cap it with `workspace_size` and add the cap to the GPU), "
    "and the execution context's memory, which depends on the inputs' shapes."
)
GENERATED = (
    "Generated from `docsrc/_data/memory_terms.json` by cog: "
    "`python3 -m cogapp -r -I docsrc/_ext -I tools README.md`."
)


def formula_table(data: Dict[str, Any], settings: Optional[Sequence[str]] = None) -> Any:
    """Each setting's peaks (of the ``settings`` named, else of all that build one engine)."""
    chosen = [setting(data, name) for name in settings or ()] or [
        entry for entry in data["settings"] if not entry["partitioning"]
    ]
    header = ["setting", "host peak", "GPU peak", "host + GPU (one shared memory)"]
    memories = ("host", "gpu", "shared")
    rows = [[entry["name"]] + [formula(data, entry, m) for m in memories] for entry in chosen]
    return results.Table(header, rows)


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
    name = setting(data, result["setting"])["name"]
    if result["verdict"] != "does not fit":
        return f"{name}: {result['verdict']}; {figures}"
    if chosen_machine["kind"] != "shared" and weights > chosen_machine["gpu_bytes"]:
        return f"none: the engines need W = {gb(weights)} on the GPU"
    return f"none fits; {name} needs {figures}"


def example_table(data: Dict[str, Any]) -> Any:
    """The worked examples: the setting to use for each model on each machine."""
    names = data["examples"]["machines"]
    header = ["model (W)"] + [machine(data, name)["name"] for name in names]
    rows = []
    for model in data["examples"]["models"]:
        weights = model_bytes(data, model)
        cells = [example_cell(data, weights, name) for name in names]
        rows.append([f"{model['name']} ({gb(weights)})"] + cells)
    return results.Table(header, rows, [EXAMPLES_NOTE])


def source_text(source: Dict[str, Any]) -> str:
    """A source in one line: upstream's file and function, a result file, or a page's title."""
    if source["kind"] == "code":
        return f"upstream {source['file']}, {source['function']}"
    if source["kind"] == "measured":
        return f"measured here: {source['file']}"
    return str(source["title"])


def source_url(data: Dict[str, Any], source: Dict[str, Any], root: str = "") -> str:
    """Where a source can be read: upstream's file at its release tag, the docs' section of
    a result file's benchmark (``root``: the docs' root from the page), or the page itself."""
    if source["kind"] == "code":
        return str(data["code_url"]) + str(source["file"])
    if source["kind"] == "measured":
        return root + str(source["page"])
    return str(source["url"])


def readme_block(data: Dict[str, Any]) -> str:
    """The README's sizing block: the worked examples, then each setting's peaks in W."""
    formulas = formula_table(data)
    formulas.notes = [FORMULAS_NOTE, GENERATED]
    return results.markdown(example_table(data)) + "\n" + results.markdown(formulas)
