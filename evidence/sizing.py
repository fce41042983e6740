"""How much memory a compile needs: the data file ``docsrc/_data/memory_terms.json`` (its
``about`` says what it holds), its arithmetic, and what is drawn from it: the README's block
and the memory page's tables. The page's calculator (``docsrc/_static/sizing.js``) does what
:func:`evaluate` and :func:`recommend` do; ``tests/docs/test_memory_sizing.py`` runs both on
the same cases.
"""

from __future__ import annotations

import json
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from patched_wheel.matrix import README_COMMAND

from evidence import REPOSITORY, tables
from evidence.result import ResultError, find_case
from evidence.result import load as load_result

DATA = REPOSITORY / "docsrc" / "_data" / "memory_terms.json"
GB = 1e9
# The variables a term's value is a linear combination of.
VARIABLES = ("W", "S", "bytes", "workspace")
# What the memories are called: host, GPU, and one memory shared by both.
MEMORIES = {"host": "host", "gpu": "GPU", "shared": "host + GPU"}
REFUSED = "the budget is too small: upstream's partitioner refuses the model"


class SizingError(Exception):
    """The data file, or a result file it names, is not as expected."""


def _counts(setting: Dict[str, Any], entry: Dict[str, Any]) -> bool:
    """Whether a phase, or a term in a phase, counts under a setting (its ``when``)."""
    return all(setting.get(key) == value for key, value in entry.get("when", {}).items())


def load(path: Path = DATA, repository: Path = REPOSITORY, *, root: str = "") -> Dict[str, Any]:
    """The data file, checked whole, with what its readers need worked out once (each
    step's comment says what). ``root``: the docs' root seen from the page that links a
    measured source. Raises :class:`SizingError` naming what is wrong."""
    # Terms, settings and machines by id; every name used is defined; a measured term's value
    # is read from its result file; every term is in known variables and has sources.
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for kind in ("terms", "settings", "machines"):
        data[kind] = {entry["id"]: entry for entry in data[kind]}
    used = [("terms", e["term"]) for phase in data["phases"] for e in phase["host"] + phase["gpu"]]
    used += [("settings", name) for name in data["recommend"]]
    used += [("machines", name) for name in data["examples"]["machines"]]
    for kind, name in used:
        if name not in data[kind]:
            raise SizingError(f"memory_terms.json: no {kind[:-1]} {name!r}")
    for found in data["terms"].values():
        reference = found.get("result")
        if reference:
            try:
                document = load_result(repository / reference["file"])
                case = find_case(document, reference["case"])
                value = float(case["figures"][reference["figure"]])
            except (ResultError, KeyError) as error:
                raise SizingError(f"memory_terms.json names {reference}: {error}") from None
            if "digits" in reference:
                value = round(value, int(reference["digits"]))
            found["low"] = found["high"] = {reference["unit"]: value}
        if (set(found["low"]) | set(found["high"])) - set(VARIABLES) or not found["sources"]:
            raise SizingError(f"term {found['id']}: a variable not in {VARIABLES}, or no source")

    # Each source's text and link: upstream's file at its release tag, the docs' section of a
    # result file's benchmark, or a page.
    for entry in [*data["terms"].values(), *data["machines"].values(), data["partitioning"]]:
        for source in entry["sources"]:
            if source["kind"] == "code":
                source["text"] = f"upstream {source['file']}, {source['function']}"
                source["link"] = data["code_url"] + source["file"]
            elif source["kind"] == "measured":
                source["text"] = f"measured here: {source['file']}"
                source["link"] = root + source["page"]
            else:
                source["text"], source["link"] = source["title"], source["url"]

    # The machines' limits (of a shared memory, the usable part) and the examples' weights.
    for machine in data["machines"].values():
        if machine["kind"] == "shared":
            machine["limits"] = {"shared": machine["nominal_bytes"] * machine["usable_fraction"]}
        else:
            machine["limits"] = {"host": machine["host_bytes"], "gpu": machine["gpu_bytes"]}
    for model in data["examples"]["models"]:
        model["weights"] = float(model["parameters"]) * data["dtypes"][model["dtype"]]

    # Each setting's phases by id (the offload's move only with the offload), each with the
    # terms that count in it under the setting, in each memory (``shared``: both).
    for setting in data["settings"].values():
        setting["phases"] = {}
        for phase in [phase for phase in data["phases"] if _counts(setting, phase)]:
            found = setting["phases"][phase["id"]] = {"id": phase["id"], "name": phase["name"]}
            for side in ("host", "gpu"):
                found[side] = [e["term"] for e in phase[side] if _counts(setting, e)]
            found["shared"] = found["host"] + found["gpu"]
    data["memories"] = MEMORIES  # the calculator names them as the tables do
    return data


def evaluate(
    data: Dict[str, Any],
    setting_id: str,
    weights: float,
    limits: Dict[str, float],
    *,
    workspace: float = 0.0,
    budget: Optional[float] = None,
) -> Dict[str, Any]:
    """The host, GPU and host + GPU peaks of a setting for a model of ``weights`` bytes, and
    whether they fit a machine whose memories hold ``limits`` bytes (``host`` and ``gpu``, or
    one ``shared``): each peak's high end (``fits``), else its low end (``may fit``)."""
    setting = data["settings"][setting_id]
    result: Dict[str, Any] = {"setting": setting_id, "S": weights, "engines": 1, "refused": ""}

    # Step 1: the largest engine's weights S, and how many engines. Resource partitioning cuts
    # the weights into pieces of at most a quarter of the budget left (minus the offloaded
    # model), as upstream's partitioner does, which refuses too many pieces.
    if setting["partitioning"]:
        available = limits.get("shared", limits.get("host", 0.0)) if budget is None else budget
        remaining = available - (weights if setting["offload"] else 0.0)
        if data["partitioning"]["multiplier"] * weights >= remaining:
            piece = remaining / data["partitioning"]["multiplier"]
            if piece <= 0 or weights > piece * data["partitioning"]["max_engines"]:
                result["refused"] = REFUSED
            else:
                result["S"], result["engines"] = piece, math.ceil(weights / piece)
    variables = {"W": weights, "S": result["S"], "bytes": 1.0, "workspace": workspace}

    # Step 2: each peak is the largest sum of the terms of a phase, at each end, and that phase.
    peaks: Dict[str, Dict[str, Any]] = {memory: {} for memory in MEMORIES}
    for phase in setting["phases"].values():
        for memory, peak in peaks.items():
            for bound in ("low", "high"):
                values = [data["terms"][name][bound] for name in phase[memory]]
                total = sum(sum(f * variables[v] for v, f in value.items()) for value in values)
                if total > peak.get(bound, -1.0):
                    peak[bound], peak[f"{bound}_phase"] = total, phase["id"]

    # Step 3: what fits.
    fit = {b: all(peaks[m][b] <= limit for m, limit in limits.items()) for b in ("low", "high")}
    verdict = "fits" if fit["high"] else "may fit" if fit["low"] else "does not fit"
    return {**result, "peaks": peaks, "verdict": "refused" if result["refused"] else verdict}


def recommend(data: Dict[str, Any], weights: float, limits: Dict[str, float]) -> Dict[str, Any]:
    """The first recommended setting that fits, else the first that may fit, else the one
    whose low end comes closest to fitting."""
    found = [evaluate(data, name, weights, limits) for name in data["recommend"]]
    memory = "shared" if "shared" in limits else "host"
    built = [result for result in found if not result["refused"]] or found
    closest = min(built, key=lambda result: result["peaks"][memory]["low"])
    fitting = [r for wanted in ("fits", "may fit") for r in found if r["verdict"] == wanted]
    return fitting[0] if fitting else closest


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


def formula(data: Dict[str, Any], setting_id: str, memory: str) -> str:
    """The peak of a setting that builds one engine (S = W), in W, without the workspace:
    ``W + 2 GB to 2 W + 2 GB``; ``the larger of ... and ...`` where one phase leads for a
    model of 4 GB and another for one of 1000 GB."""
    setting, shown = data["settings"][setting_id], []
    for bound in ("low", "high"):
        leading = []
        for size in (4 * GB, 1000 * GB):
            peak = evaluate(data, setting_id, size, {})["peaks"][memory]
            phase = setting["phases"][peak[f"{bound}_phase"]]
            values = [data["terms"][name][bound] for name in phase[memory]]
            w = sum(value.get("W", 0) + value.get("S", 0) for value in values)
            text = expression({"W": w, "bytes": sum(value.get("bytes", 0) for value in values)})
            if text not in leading:
                leading.append(text)
        shown.append(leading[0] if len(leading) == 1 else "the larger of " + " and ".join(leading))
    return shown[0] if shown[0] == shown[1] else f"{shown[0]} to {shown[1]}"


GENERATED = f"Generated from `docsrc/_data/memory_terms.json` by cog: `{README_COMMAND}`."


def formula_table(data: Dict[str, Any], settings: Sequence[str] = ()) -> tables.Table:
    """Each setting's peaks (of the ``settings`` named, else of all that build one engine)."""
    chosen = settings or [name for name, s in data["settings"].items() if not s["partitioning"]]
    header = ["setting", "host peak", "GPU peak", "host + GPU (one shared memory)"]
    rows = [[data["settings"][n]["name"], *(formula(data, n, m) for m in MEMORIES)] for n in chosen]
    return tables.Table(header, rows)


def example_cell(data: Dict[str, Any], weights: float, machine_id: str) -> str:
    """The setting to use for a model on a machine, its verdict and its peaks."""
    limits = data["machines"][machine_id]["limits"]
    result = recommend(data, weights, limits)
    peaks = {memory: result["peaks"][memory] for memory in limits}
    figures = ", ".join(f"{MEMORIES[m]} {span(p['low'], p['high'])}" for m, p in peaks.items())
    name = data["settings"][result["setting"]]["name"]
    if result["verdict"] != "does not fit":
        return f"{name}: {result['verdict']}; {figures}"
    if weights > limits.get("gpu", math.inf):
        return f"none: the engines need W = {gb(weights)} on the GPU"
    return f"none fits; {name} needs {figures}"


def example_table(data: Dict[str, Any]) -> tables.Table:
    """The worked examples: the setting to use for each model on each machine."""
    names = data["examples"]["machines"]
    header = ["model (W)"] + [data["machines"][name]["name"] for name in names]
    rows = []
    for model in data["examples"]["models"]:
        cells = [example_cell(data, model["weights"], name) for name in names]
        rows.append([f"{model['name']} ({gb(model['weights'])})", *cells])
    return tables.Table(header, rows, [data["recommend_note"]])


def readme_block(data: Dict[str, Any]) -> str:
    """The README's sizing block: the worked examples, then each setting's peaks in W."""
    formulas = formula_table(data)
    formulas.notes = [data["formulas_note"], GENERATED]
    return tables.markdown(example_table(data)) + "\n" + tables.markdown(formulas)
