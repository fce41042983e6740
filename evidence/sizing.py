"""How much memory a compile needs: the compiles the benchmark of record measured, the terms
of ``docsrc/_data/memory_terms.json`` for what nobody measured, and what is drawn from both:
the README's block, the memory page's tables and the data its calculator embeds.

One meaning of a peak everywhere here: the most memory in use at one moment of the compile,
counting the model itself (W, on the GPU when the compile starts) and not the process's fixed
costs (CUDA context, libraries). The compile benchmark records the rise above the moment just
before the compile, with the model already on the GPU, so :data:`COUNTING_THE_MODEL` adds
what the model held there: W to the GPU and to host + GPU, nothing to the host.

The calculator (``docsrc/_static/sizing.js``) does what :func:`evaluate` and
:func:`recommend` do, on the data :func:`load` returns; ``tests/docs/test_memory_sizing.py``
runs both on the same cases, and drives the page in a browser.
"""

from __future__ import annotations

import itertools
import json
import math
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from patched_wheel.matrix import README_COMMAND

from evidence import REPOSITORY, facts, tables
from evidence.result import ResultError, find_case
from evidence.result import load as load_result

DATA = REPOSITORY / "docsrc" / "_data" / "memory_terms.json"
# The benchmark of record; other result files of the compile benchmark fill only the settings
# it lacks (newest first).
RECORD = "benchmarks/results/compile_record.json"
GB = 1e9
# The variables a term's value is a linear combination of.
VARIABLES = ("W", "S", "bytes", "workspace")
# What the memories are called: host, GPU, and one memory shared by both.
MEMORIES = {"host": "host", "gpu": "GPU", "shared": "host + GPU"}
# A memory's peak figure in the compile benchmark's cases (above the moment before the
# compile), and what the model held there then, in W: added to count the model.
RECORDED = {"host": "host_peak_w", "gpu": "gpu_peak_w", "shared": "sum_peak_w"}
COUNTING_THE_MODEL = {"host": 0.0, "gpu": 1.0, "shared": 1.0}
# The parameters of a setting, in the order of its key and name.
CHOICES = ("wheel", "runtime", "offload", "trim", "partitioning")
# A compile case's parameters that a setting describes; a case with another (a setting added
# to the benchmark later) describes none until the choices offer it.
KNOWN_PARAMETERS = {"wheel", "model", "offload", "trim", "runtime", "options", "repeat", "save"}
REFUSED = "the budget is too small: upstream's partitioner refuses the model"
BUILDERS = {"tensorrt_rtx": "TensorRT-RTX", "tensorrt": "TensorRT"}


class SizingError(Exception):
    """The data file, or a result file it names, is not as expected."""


def _counts(setting: Dict[str, Any], entry: Dict[str, Any]) -> bool:
    """Whether a phase, or a term in a phase, counts under a setting (its ``when``)."""
    return all(setting.get(key) == value for key, value in entry.get("when", {}).items())


def setting_key(setting: Dict[str, str]) -> str:
    """``fork-cpp-offload-on-trim-default-whole``: a setting's id, the calculator's too."""
    wheel, runtime, offload, trim, partitioning = (setting[name] for name in CHOICES)
    return f"{wheel}-{runtime}-offload-{offload}-trim-{trim}-{partitioning}"


def _recorded_setting(case: Dict[str, Any]) -> Optional[Dict[str, str]]:
    """The setting a compile case measured, or ``None`` for a failed case or one with other
    compile options (``immutable_weights``, ...), which no setting here describes.
    ``runtime`` absent: the C++ runtime, unless the options say ``use_python_runtime``."""
    parameters = case["parameters"]
    options = dict(parameters.get("options") or {})
    python = options.pop("use_python_runtime", False)
    if options or set(parameters) - KNOWN_PARAMETERS:
        return None
    if "error" in case or "sum_peak_w" not in case["figures"]:
        return None
    return {
        "wheel": parameters["wheel"],
        "runtime": parameters.get("runtime", "python" if python else "cpp"),
        "offload": parameters["offload"],
        "trim": parameters.get("trim", "default"),
        "partitioning": "whole",
    }


def _source_text(document: Dict[str, Any], case: Dict[str, Any], file: str) -> str:
    """Where and with what a compile was measured: ``NVIDIA H200, torch-tensorrt-rtx 2.11.0,
    TensorRT-RTX 1.4.0.76, compile_record.json of 2026-12-03 (overlay 26b76fbb)``: the
    overlay is the fork wheel's."""
    versions = case.get("versions", {})
    package = versions.get("tensorrt_package", "tensorrt")
    distribution = "torch-tensorrt-rtx" if package == "tensorrt_rtx" else "torch-tensorrt"
    release = f"{distribution} {versions.get('torch_tensorrt', '?')}"
    builder = f"{BUILDERS.get(package, package)} {versions.get('tensorrt', '?')}"
    device = document["provenance"]["host"].get("device") or "an unnamed GPU"
    when, overlay = document["provenance"]["date"][:10], document["provenance"]["overlay_sha256"]
    return f"{device}, {release}, {builder}, {Path(file).name} of {when} (overlay {overlay[:8]})"


def measured_compiles(repository: Path = REPOSITORY) -> Dict[str, Dict[str, Any]]:
    """Every setting the compile benchmark measured, by :func:`setting_key`: per model, the
    lowest and highest peak of its runs in W counting the model (:data:`COUNTING_THE_MODEL`),
    and where it was measured. The record's cases first; another compile result file only for
    a setting and model the record lacks, newest first. The fork's cases count only where they
    measured the newest released overlay."""
    documents = []
    for path in sorted((repository / "benchmarks" / "results").glob("*.json")):
        try:
            document = load_result(path)
        except ResultError as error:
            raise SizingError(f"{path.name}: {error}") from None
        if document["benchmark"] == "compile":
            documents.append((path.relative_to(repository).as_posix(), document))
    documents.sort(key=lambda item: item[1]["provenance"]["date"], reverse=True)
    documents.sort(key=lambda item: item[0] != RECORD)  # stable: the record, then the newest

    found: Dict[str, Dict[str, Any]] = {}
    released = facts.released_overlay_sha256()
    for file, document in documents:
        claimed = {(key, model) for key, entry in found.items() for model in entry["models"]}
        current = document["provenance"]["overlay_sha256"] == released
        for case in document["cases"]:
            setting = _recorded_setting(case)
            key = setting_key(setting) if setting else None
            if key is None or (key, case["parameters"]["model"]) in claimed:
                continue
            if setting and setting["wheel"] == "fork" and not current:
                continue  # an earlier release of the fork: not what the fork does now
            entry = found.setdefault(key, {"file": file, "models": {}, "sources": []})
            source = _source_text(document, case, file)
            if source not in entry["sources"]:
                entry["sources"].append(source)
            device = document["provenance"]["host"].get("device")
            model = entry["models"].setdefault(
                case["parameters"]["model"],
                {"gib": case["figures"]["model_gib"], "runs": 0, "device": device},
            )
            model["runs"] += 1
            for memory, figure in RECORDED.items():
                value = round(case["figures"][figure] + COUNTING_THE_MODEL[memory], 2)
                low, high = model.get(memory, [value, value])
                model[memory] = [min(low, value), max(high, value)]
    for entry in found.values():
        models = entry["models"].values()
        entry["w"] = {memory: max(model[memory][1] for model in models) for memory in MEMORIES}
        entry["devices"] = sorted({model["device"] for model in models})
    return found


def _resolve_sources(entries: Sequence[Dict[str, Any]], data: Dict[str, Any], root: str) -> None:
    """Each source's text and link: upstream's file at its release tag, the docs' section of a
    result file's benchmark, or a page."""
    for entry in entries:
        for source in entry["sources"]:
            if source["kind"] == "code":
                source["text"] = f"upstream {source['file']}, {source['function']}"
                source["link"] = data["code_url"] + source["file"]
            elif source["kind"] == "measured":
                source["text"] = f"measured here: {source['file']}"
                source["link"] = root + source["page"]
            else:
                source["text"], source["link"] = source["title"], source["url"]


def load(path: Path = DATA, repository: Path = REPOSITORY, *, root: str = "") -> Dict[str, Any]:
    """The data file, checked whole, with the measured compiles and what its readers need
    worked out once (each step's comment says what). ``root``: the docs' root seen from the
    page that links a measured source. Raises :class:`SizingError` naming what is wrong."""
    # Terms and machines by id; every name used is defined; a measured term's value is read
    # from its result file; every term is in known variables and has sources.
    data: Dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for kind in ("terms", "machines"):
        data[kind] = {entry["id"]: entry for entry in data[kind]}
    used = [("terms", e["term"]) for phase in data["phases"] for e in phase["host"] + phase["gpu"]]
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
    _resolve_sources([*data["terms"].values(), *data["machines"].values()], data, root)
    _resolve_sources([data["partitioning"]], data, root)

    # Every setting (each combination of the choices), its name, and its phases, each with
    # the terms that count under it in each memory (``shared``: both); the offload's move only
    # with the offload. A setting the compile benchmark measured carries its figures.
    measured = measured_compiles(repository)
    choices = data["choices"]
    data["settings"] = {}
    for values in itertools.product(*(choices[name]["options"] for name in CHOICES)):
        setting: Dict[str, Any] = dict(zip(CHOICES, values))
        key = setting["id"] = setting_key(setting)
        words = [choices[name]["options"][setting[name]] for name in CHOICES]
        setting["name"] = ", ".join(w for w in words if w not in data["unnamed_defaults"])
        setting["measured"] = measured.get(key)
        setting["phases"] = {}
        for phase in [phase for phase in data["phases"] if _counts(setting, phase)]:
            found = setting["phases"][phase["id"]] = {"id": phase["id"], "name": phase["name"]}
            for side in ("host", "gpu"):
                found[side] = [e["term"] for e in phase[side] if _counts(setting, e)]
            found["shared"] = found["host"] + found["gpu"]
        data["settings"][key] = setting
    unknown = sorted(set(measured) - set(data["settings"]))
    if unknown:
        raise SizingError(
            f"the compile benchmark measured {', '.join(unknown)}, which no choice of "
            "memory_terms.json offers: add the value to its choices"
        )
    data["recommend"] = [setting_key({**data["defaults"], **r}) for r in data["recommend"]]
    data["measured_keys"] = [key for key in data["settings"] if key in measured]

    # The machines' limits (of a shared memory, the usable part), whether any compile was
    # measured on one like it, and the examples' weights.
    devices = {device for entry in measured.values() for device in entry["devices"]}
    for machine in data["machines"].values():
        if machine["kind"] == "shared":
            machine["limits"] = {"shared": machine["nominal_bytes"] * machine["usable_fraction"]}
        else:
            machine["limits"] = {"host": machine["host_bytes"], "gpu": machine["gpu_bytes"]}
        machine["measured"] = machine.get("measured_device") in devices
    for model in data["examples"]["models"]:
        model["weights"] = float(model["parameters"]) * data["dtypes"][model["dtype"]]
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
    one ``shared``). A measured setting's verdict is its measured peaks' (the largest multiple
    of W its runs reached, plus the workspace cap); another's is its estimate's: its high end
    fits (``fits``), else its low end (``may fit``)."""
    setting = data["settings"][setting_id]
    result: Dict[str, Any] = {"setting": setting_id, "S": weights, "engines": 1, "refused": ""}

    # Step 1: the largest engine's weights S, and how many engines. Resource partitioning cuts
    # the weights into pieces of at most a quarter of the budget left (minus the offloaded
    # model), as upstream's partitioner does, which refuses too many pieces.
    if setting["partitioning"] == "partitioned":
        available = limits.get("shared", limits.get("host", 0.0)) if budget is None else budget
        remaining = available - (weights if setting["offload"] == "on" else 0.0)
        if data["partitioning"]["multiplier"] * weights >= remaining:
            piece = remaining / data["partitioning"]["multiplier"]
            if piece <= 0 or weights > piece * data["partitioning"]["max_engines"]:
                result["refused"] = REFUSED
            else:
                result["S"], result["engines"] = piece, math.ceil(weights / piece)
    variables = {"W": weights, "S": result["S"], "bytes": 1.0, "workspace": workspace}

    # Step 2: each estimated peak is the largest sum of the terms of a phase, at each end, and
    # that phase; each measured peak, the largest multiple of W measured (the workspace cap,
    # not measured, added to the GPU).
    peaks: Dict[str, Dict[str, Any]] = {memory: {} for memory in MEMORIES}
    for phase in setting["phases"].values():
        for memory, peak in peaks.items():
            for bound in ("low", "high"):
                values = [data["terms"][name][bound] for name in phase[memory]]
                total = sum(sum(f * variables[v] for v, f in value.items()) for value in values)
                if total > peak.get(bound, -1.0):
                    peak[bound], peak[f"{bound}_phase"] = total, phase["id"]
    measured = setting["measured"]
    if measured:
        extra = {"host": 0.0, "gpu": workspace, "shared": workspace}
        result["measured"] = {m: measured["w"][m] * weights + extra[m] for m in MEMORIES}

    # Step 3: what fits: by the measured peaks where there are some, else by the estimate.
    if measured:
        fit = all(result["measured"][m] <= limit for m, limit in limits.items())
        verdict = "fits" if fit else "does not fit"
    else:
        bounds = ("low", "high")
        fit_at = {b: all(peaks[m][b] <= limit for m, limit in limits.items()) for b in bounds}
        verdict = "fits" if fit_at["high"] else "may fit" if fit_at["low"] else "does not fit"
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


def w_span(low: float, high: float) -> str:
    """Multiples of W as measured: ``5.07 W``, or ``5.05-5.07 W`` over several runs."""
    return f"{low:.2f} W" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} W"


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
    """The estimated peak of a setting that builds one engine (S = W), in W, without the
    workspace: ``W + 2 GB to 2 W + 2 GB``; ``the larger of ... and ...`` where one phase leads
    for a model of 4 GB and another for one of 1000 GB."""
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


def measured_cell(data: Dict[str, Any], setting_id: str, memory: str) -> str:
    """A measured setting's peak in one memory, per model: ``5.07 W (mlp-3gib), 5.02 W
    (mlp-12gib)``; ``-`` for a setting nobody measured."""
    measured = data["settings"][setting_id]["measured"]
    if not measured:
        return "-"
    models = measured["models"].items()
    return ", ".join(f"{w_span(*model[memory])} ({name})" for name, model in models)


def measured_table(data: Dict[str, Any], example: Dict[str, Any]) -> tables.Table:
    """Every setting the compile benchmark measured: its peaks in W per model, what that
    makes for the ``example`` model, and the estimate for the standard builder; the notes say
    where it was measured and order the settings by their peak."""
    weights = example["weights"]
    header = ["setting", "host + GPU peak", "host peak", "GPU peak"]
    header += [
        f"{example['name']} (W = {gb(weights)}), host + GPU: the measured multiple x W",
        "standard TensorRT, estimate",
    ]
    measured = [data["settings"][key] for key in data["measured_keys"]]
    rows = []
    for setting in measured:
        cells = [measured_cell(data, setting["id"], m) for m in ("shared", "host", "gpu")]
        planned = gb(setting["measured"]["w"]["shared"] * weights)
        rows.append([setting["name"], *cells, planned, formula(data, setting["id"], "shared")])
    sources = sorted({source for setting in measured for source in setting["measured"]["sources"]})
    ordered = sorted(measured, key=lambda setting: setting["measured"]["w"]["shared"])
    order = "; ".join(f"{s['name']} {s['measured']['w']['shared']:.2f} W" for s in ordered)
    notes = [data["measured_note"], "Measured on: " + "; ".join(sources) + "."]
    notes.append(f"The settings by their highest measured host + GPU peak, lowest first: {order}.")
    return tables.Table(header, rows, notes)


def formula_table(data: Dict[str, Any], settings: Sequence[str] = ()) -> tables.Table:
    """Each setting's estimated peaks (of the ``settings`` named, else of the official
    wheel's and the recommended ones that build one engine), and its measured host + GPU
    peak."""
    official = [{**data["defaults"], "wheel": "official", "offload": o} for o in ("off", "on")]
    chosen = settings or [
        key
        for key in [*map(setting_key, official), *data["recommend"]]
        if data["settings"][key]["partitioning"] == "whole"
    ]
    header = ["setting", "host peak", "GPU peak", "host + GPU (one shared memory)"]
    header.append("measured host + GPU (TensorRT-RTX)")
    rows = []
    for key in chosen:
        estimates = [formula(data, key, memory) for memory in MEMORIES]
        rows.append([data["settings"][key]["name"], *estimates, measured_cell(data, key, "shared")])
    return tables.Table(header, rows)


def example_cell(data: Dict[str, Any], weights: float, machine_id: str) -> str:
    """The setting to use for a model on a machine, its verdict and its peaks (measured where
    the setting was), and whether the verdict is an estimate."""
    machine = data["machines"][machine_id]
    limits = machine["limits"]
    result = recommend(data, weights, limits)
    setting = data["settings"][result["setting"]]
    if "measured" in result:
        shown = {
            memory: gb(result["measured"][memory]) + " by the measured multiple"
            for memory in limits
        }
    else:
        shown = {m: span(result["peaks"][m]["low"], result["peaks"][m]["high"]) for m in limits}
    figures = ", ".join(f"{MEMORIES[m]} {text}" for m, text in shown.items())
    kind = "" if machine["measured"] and "measured" in result else " (estimate)"
    if result["verdict"] != "does not fit":
        return f"{setting['name']}: {result['verdict']}{kind}; {figures}"
    if weights > limits.get("gpu", math.inf):
        return f"none: the engines need W = {gb(weights)} on the GPU"
    return f"none fits{kind}; {setting['name']} needs {figures}"


def example_table(data: Dict[str, Any]) -> tables.Table:
    """The worked examples: the setting to use for each model on each machine."""
    names = data["examples"]["machines"]
    header = ["model (W)"] + [data["machines"][name]["name"] for name in names]
    rows = []
    for model in data["examples"]["models"]:
        cells = [example_cell(data, model["weights"], name) for name in names]
        rows.append([f"{model['name']} ({gb(model['weights'])})", *cells])
    notes = [data["recommend_note"], "*(estimate)*: " + data["estimate_note"]]
    return tables.Table(header, rows, notes)


def readme_block(data: Dict[str, Any]) -> str:
    """The README's sizing block: the measured compiles, the worked examples, then each
    setting's estimated peaks in W."""
    measured = measured_table(data, data["examples"]["models"][0])
    formulas = formula_table(data)
    formulas.notes = [data["formulas_note"], GENERATED]
    shown = [measured, example_table(data), formulas]
    return "\n".join(tables.markdown(table) for table in shown)
