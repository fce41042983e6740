"""The sizing data (``docsrc/_data/memory_terms.json``) and everything drawn from it agree.

The data file is checked whole (every term names its sources; measured terms are read from
their result files; upstream's code sources exist in the 2.14.0 wheel; its ranges hold
upstream's own measurements); the README's block is generated from it; the calculator's
arithmetic (``docsrc/_static/sizing.js``, run under node) gives what ``evidence.sizing.evaluate``
gives; and the built page, driven in headless Chromium at 1400 and 420 px, shows those peaks
and the worked table's settings without scrolling sideways.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

from evidence import facts, sizing

REPOSITORY = Path(__file__).resolve().parents[2]
CALCULATOR = REPOSITORY / "docsrc" / "_static" / "sizing.js"
MEMORY_PAGE = "tutorials/resource_memory/resource_management.html"
GB = 1e9
GiB = 1024**3
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def data() -> Dict[str, Any]:
    loaded: Dict[str, Any] = sizing.load()
    return loaded


def _needed_or_skip(what: str, installed_by: str) -> None:
    """Skip for lack of ``what`` only outside CI; in CI (``CI`` set) the test must run."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing in CI, where {installed_by} installs it")
    pytest.skip(f"{what} is not installed ({installed_by} installs it)")


# -- the data file -----------------------------------------------------------------------------


def test_every_term_names_its_sources(data: Dict[str, Any]) -> None:
    assert len(data["terms"]) >= 12, "the data file lists too few terms"
    for term in data["terms"].values():
        assert term["memory"] in ("host", "gpu"), term["id"]
        for source in term["sources"]:
            if source["kind"] == "code":
                assert source["file"].startswith("torch_tensorrt/") and source["function"]
            elif source["kind"] == "measured":
                assert (REPOSITORY / source["file"]).is_file(), source["file"]
                assert source["page"].startswith("benchmarks.html#"), term["id"]
            else:
                assert source["kind"] == "page" and source["url"].startswith("https://")


def test_measured_sources_link_to_their_sections(built_html: Path, data: Dict[str, Any]) -> None:
    for term in data["terms"].values():
        for source in term["sources"]:
            if source["kind"] == "measured":
                page, anchor = source["page"].split("#")
                assert f'id="{anchor}"' in (built_html / page).read_text("utf-8"), term["id"]


def test_measured_terms_come_from_their_result_files(tmp_path: Path, data: Dict[str, Any]) -> None:
    """A rerun of the benchmark changes the term: the value is read, not typed."""
    term = data["terms"]["move_overlap_fork"]
    result = term["result"]
    document = json.loads((REPOSITORY / result["file"]).read_text(encoding="utf-8"))
    figures = next(c for c in document["cases"] if c["id"] == result["case"])["figures"]
    assert term["low"] == term["high"] == {"bytes": figures[result["figure"]]}

    figures[result["figure"]] = 12345
    (tmp_path / result["file"]).parent.mkdir(parents=True)
    (tmp_path / result["file"]).write_text(json.dumps(document), encoding="utf-8")
    shutil.copy(REPOSITORY / "benchmarks/results/offload_headline.json", tmp_path / "other.json")
    rerun = sizing.load(repository=tmp_path)
    assert rerun["terms"]["move_overlap_fork"]["low"] == {"bytes": 12345}


def test_a_missing_result_case_is_one_error(tmp_path: Path) -> None:
    document = json.loads(sizing.DATA.read_text(encoding="utf-8"))
    measured = next(term for term in document["terms"] if "result" in term)
    measured["result"]["case"] = "999gib-llm-fork"
    path = tmp_path / "memory_terms.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(sizing.SizingError, match="no case"):
        sizing.load(path)


@pytest.mark.network
def test_code_sources_are_upstream_code(data: Dict[str, Any]) -> None:
    """Each file and function a term cites is in the official wheel of the release the data
    file says it read (``upstream_release``)."""
    from tests.patched_wheel.wheel_helpers import fetch

    with zipfile.ZipFile(fetch(data["upstream_release"])) as wheel:
        for term in [*data["terms"].values(), data["partitioning"]]:
            for source in term["sources"]:
                if source["kind"] != "code":
                    continue
                text = wheel.read(source["file"]).decode("utf-8")
                for name in source["function"].split("."):
                    assert re.search(
                        rf"^\s*(def|class) {name}\b|^{name} =", text, re.M
                    ), f"{source['file']} has no {name} (term {term.get('id', 'partitioning')})"


# Upstream's later resource-management page, measured on a 3 GiB fp16 model with both fixes
# and the standard builder (as multiples of W; builder memory about 2 GB): each must lie in
# the estimate's range.
FORK = "fork-cpp-offload-off-trim-default-whole"
FORK_OFFLOAD = "fork-cpp-offload-on-trim-default-whole"
UPSTREAM_MEASURED = [
    pytest.param(FORK, "host", 1 * 3 * GiB + 2e9, id="host-offload-off"),
    pytest.param(FORK_OFFLOAD, "host", 2 * 3 * GiB + 2e9, id="host-offload-on"),
    pytest.param(FORK, "gpu", 2 * 3 * GiB, id="gpu-offload-off"),
    pytest.param(FORK_OFFLOAD, "gpu", 1 * 3 * GiB, id="gpu-offload-on"),
    pytest.param(FORK, "shared", 3.8 * 3 * GiB, id="unified-offload-off"),
    pytest.param(FORK_OFFLOAD, "shared", 3.2 * 3 * GiB, id="unified-offload-on"),
]


@pytest.mark.parametrize("setting_id, memory, measured", UPSTREAM_MEASURED)
def test_ranges_hold_upstreams_measurements(
    data: Dict[str, Any], setting_id: str, memory: str, measured: float
) -> None:
    limits = {"host": 1e15, "gpu": 1e15}
    result = sizing.evaluate(data, setting_id, 3 * GiB, limits)
    peak = result["peaks"][memory]
    assert peak["low"] <= measured * 1.001 and measured <= peak["high"], (setting_id, memory, peak)


def test_a_measured_setting_is_judged_by_its_measurement(data: Dict[str, Any]) -> None:
    """Where the benchmark measured a setting, its verdict is its measured peak's: a machine
    a thousandth larger fits it, one a thousandth smaller does not, whatever the estimate."""
    assert len(data["measured_keys"]) >= 2
    for key in data["measured_keys"]:
        peak = sizing.evaluate(data, key, 16 * GB, {})["measured"]["shared"]
        assert sizing.evaluate(data, key, 16 * GB, {"shared": peak * 1.001})["verdict"] == "fits"
        smaller = sizing.evaluate(data, key, 16 * GB, {"shared": peak * 0.999})
        assert smaller["verdict"] == "does not fit", key


def test_no_term_comes_from_an_imitation_of_a_compile(data: Dict[str, Any]) -> None:
    """A term measured here is from a real compile or the offload's move, never from the
    host-heap benchmark, whose bursts only imitate a build."""
    for term in data["terms"].values():
        measured = [s["file"] for s in term["sources"] if s["kind"] == "measured"]
        assert not [file for file in measured if "host_heap" in file], term["id"]


def _with_cases(tmp_path: Path, name: str, cases: List[Dict[str, Any]]) -> None:
    """A copy of the repository's result files in ``tmp_path`` where ``name`` holds ``cases``
    besides its own (what a rerun of the benchmark writes)."""
    (tmp_path / "benchmarks").mkdir()
    shutil.copytree(REPOSITORY / "benchmarks" / "results", tmp_path / "benchmarks" / "results")
    path = tmp_path / "benchmarks" / "results" / name
    document = json.loads(path.read_text(encoding="utf-8"))
    document["cases"] += cases
    path.write_text(json.dumps(document), encoding="utf-8")


def _case(parameters: Dict[str, Any], sum_peak_w: float, model_gib: float = 15.0) -> Dict[str, Any]:
    figures = {"sum_peak_w": sum_peak_w, "host_peak_w": 2.0, "gpu_peak_w": 0.04}
    figures["model_gib"] = model_gib
    label = ", ".join(str(value) for value in parameters.values())
    return {
        "id": label,
        "label": label,
        "headline": False,
        "parameters": parameters,
        "figures": figures,
    }


def test_new_cases_of_the_record_flow_in_by_their_parameters(tmp_path: Path) -> None:
    """Cases the benchmark of record gains are read by their parameters: a new model, a
    repeat (a range over the runs), the runtime as a parameter; a failed case and one with
    other compile options are left out; the record wins over another result file."""
    new = {"wheel": "fork", "model": "llama-8b", "offload": "on", "trim": "default"}
    python = {"wheel": "fork", "model": "llama-8b", "offload": "on", "runtime": "python"}
    cases = [
        _case({**new, "repeat": 1}, 3.05),
        _case({**new, "repeat": 2}, 3.01),
        _case({**python, "trim": "default", "repeat": 1}, 1.07, 3.0),
        {**_case({**new, "offload": "off", "repeat": 1}, 9.0), "error": "exit 1"},
        _case({**new, "offload": "off", "options": {"immutable_weights": False}}, 9.0),
        _case({**new, "offload": "off", "a_later_knob": "on"}, 9.0),
    ]
    _with_cases(tmp_path, "compile_record.json", cases)
    loaded = sizing.load(repository=tmp_path)
    fork = loaded["settings"][FORK_OFFLOAD]["measured"]
    assert fork["models"]["llama-8b"]["shared"] == [4.01, 4.05]  # the model counted: + 1 W
    assert fork["models"]["llama-8b"]["host"] == [2.0, 2.0]
    assert fork["models"]["llama-8b"]["runs"] == 2
    assert "mlp-3gib" in fork["models"]
    python_key = "fork-python-offload-on-trim-default-whole"
    assert loaded["settings"][python_key]["measured"]["models"]["llama-8b"]["shared"] == [2.07] * 2
    assert loaded["settings"][python_key]["measured"]["file"].endswith("compile_record.json")
    offload_off = loaded["settings"][FORK]["measured"]  # none of the last three counts
    assert offload_off is None or offload_off["w"]["shared"] < 9


def test_a_measured_setting_no_choice_offers_is_one_error(tmp_path: Path) -> None:
    case = _case({"wheel": "prototype", "model": "mlp-3gib", "offload": "on", "repeat": 1}, 2.0)
    _with_cases(tmp_path, "compile_record.json", [case])
    with pytest.raises(sizing.SizingError, match="prototype-cpp-offload-on.*add the value"):
        sizing.load(repository=tmp_path)


def test_partitioning_keeps_the_engines_bytes(data: Dict[str, Any]) -> None:
    """With resource partitioning the host never holds less than about W: the serialized
    engines already built stay (TorchTensorRTModule.serialized_engine)."""
    limits = {"host": 200 * GB, "gpu": 1e15}
    partitioned = FORK.replace("whole", "partitioned")
    result = sizing.evaluate(data, partitioned, 100 * GB, limits)
    assert result["engines"] == 2 and result["S"] == pytest.approx(50 * GB)
    assert result["peaks"]["host"]["low"] >= 100 * GB
    offloaded = FORK_OFFLOAD.replace("whole", "partitioned")
    refused = sizing.evaluate(data, offloaded, 100 * GB, limits, budget=104 * GB)
    assert refused["verdict"] == "refused"


# -- the README's block ------------------------------------------------------------------------


# -- the calculator's arithmetic ---------------------------------------------------------------


# Machines of one's own: GPU and host memory, and one shared memory's usable part.
OWN_FIGURES = [{"host": 128 * GB, "gpu": 48 * GB}, {"shared": 60 * GB}]


def _cases(data: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Settings x model sizes x machines (each preset, plus figures of one's own), with and
    without a workspace cap and a partitioning budget."""
    machines = [machine["limits"] for machine in data["machines"].values()] + OWN_FIGURES
    cases = []
    for weights in (3 * GiB, 16 * GB, 64 * GB, 140 * GB, 405 * GB):
        for limits in machines:
            for chosen in data["settings"]:
                case = {"setting": chosen, "W": weights, "limits": limits}
                cases.append({**case, "workspace": 0, "budget": None})
            partitioned = FORK_OFFLOAD.replace("whole", "partitioned")
            case = {"setting": partitioned, "W": weights, "limits": limits}
            cases.append({**case, "workspace": 4 * GB, "budget": 3 * weights})
            cases.append({**case, "setting": FORK_OFFLOAD, "workspace": 4 * GB, "budget": None})
    return cases


NODE_RUNNER = """
const calculator = require(process.argv[1]);
const input = JSON.parse(require("fs").readFileSync(0, "utf-8"));
const out = input.cases.map((c) => {
  const r = calculator.evaluate(input.data, c.setting, c.W, c.limits, c.workspace, c.budget);
  const best = calculator.recommend(input.data, c.W, c.limits, 0, null);
  return { peaks: r.peaks, measured: r.measured, verdict: r.verdict, S: r.S, engines: r.engines,
           best: best.setting };
});
process.stdout.write(JSON.stringify(out));
"""


def test_calculator_arithmetic_matches_the_data_file(data: Dict[str, Any]) -> None:
    """sizing.js (under node) gives, case by case, the peaks (estimated and measured),
    verdicts and recommendations of evidence.sizing.evaluate, which the worked tables and the
    README are drawn from."""
    node = shutil.which("node")
    if node is None:
        _needed_or_skip("node", "apt-get install -y nodejs, as in .ci/run,")
    cases = _cases(data)
    completed = subprocess.run(
        [str(node), "-e", NODE_RUNNER, str(CALCULATOR)],
        input=json.dumps({"data": data, "cases": cases}),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    shown = json.loads(completed.stdout)
    assert len(shown) == len(cases)
    for case, calculator in zip(cases, shown):
        expected = sizing.evaluate(
            data,
            case["setting"],
            case["W"],
            case["limits"],
            workspace=case["workspace"],
            budget=case["budget"],
        )
        where = f"{case['setting']}, W={case['W']:.3g}, {case['limits']}"
        assert calculator["verdict"] == expected["verdict"], where
        assert calculator["engines"] == expected["engines"], where
        for memory, peak in expected["peaks"].items():
            for key in ("low", "high"):
                assert calculator["peaks"][memory][key] == pytest.approx(peak[key]), where
                assert calculator["peaks"][memory][f"{key}_phase"] == peak[f"{key}_phase"], where
        assert calculator["measured"] == pytest.approx(expected.get("measured")), where
        best = sizing.recommend(data, case["W"], case["limits"])
        assert calculator["best"] == best["setting"], where


# -- the page, in a headless browser -----------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _needed_or_skip(
            "chromium (/usr/bin/chromium)", "apt-get install -y chromium, as in .ci/run,"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _needed_or_skip("playwright", "pip install -r tests/requirements.txt")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def _no_sideways_scroll(page: Any) -> None:
    scroll, client = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert scroll <= client, f"the page scrolls sideways: {scroll} px wide in {client} px"


def _enter(
    page: Any,
    limits: Dict[str, float],
    machine_id: Optional[str],
    weights: float,
    setting: Dict[str, str],
) -> None:
    """Pick the machine (a preset, or figures of one's own) and the setting's choices, and
    type the weights in GB."""
    if machine_id is not None:
        page.select_option("#sizing-machine", machine_id)
    else:
        page.select_option("#sizing-machine", "own")
        page.select_option("#sizing-kind", "shared" if "shared" in limits else "discrete")
        if "shared" in limits:
            page.fill("#sizing-usable", str(limits["shared"] / GB))
        else:
            page.fill("#sizing-gpu", str(limits["gpu"] / GB))
            page.fill("#sizing-host", str(limits["host"] / GB))
    for name in sizing.CHOICES:
        page.select_option(f"#sizing-{name}", setting[name])
    page.fill("#sizing-weights", str(weights / GB))


# What the page shows after an input, read in one call: the answer and the setting's card.
READ_RESULTS = """() => {
  const card = document.querySelector("div.sizing-result");
  const peaks = (selector) => Object.fromEntries(["host", "gpu", "shared"].map((memory) => [
    memory, (card.querySelector(selector + '[data-memory="' + memory + '"]') || {}).innerText]));
  return {
    answer: document.getElementById("sizing-answer").dataset.setting,
    answerText: document.getElementById("sizing-answer").innerText,
    setting: card.dataset.setting,
    verdict: card.dataset.verdict,
    text: card.innerText,
    measured: peaks("div.sizing-measured p.sizing-peak"),
    ranges: peaks("p.sizing-range"),
    models: Array.from(card.querySelectorAll("div.sizing-measured li")).map((li) => ({
      model: li.dataset.model, memory: li.dataset.memory, text: li.innerText,
      low: Number(li.dataset.low), high: Number(li.dataset.high)})),
    links: Array.from(card.querySelectorAll("div.sizing-terms a")).map((a) => a.href),
    scroll: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
  };
}"""


@pytest.mark.parametrize("width", [1400, 420])
def test_calculator_in_a_browser(
    browser: Any, built_html: Path, data: Dict[str, Any], width: int
) -> None:
    """Typed into the built page, the worked examples' model sizes on every machine class
    (and on figures of one's own), under settings measured and not, give the verdict, the
    measured and the estimated peaks of the data file's arithmetic and the worked table's
    setting; a machine nobody measured on gets an estimate that says what it assumes; nothing
    scrolls sideways. Three models per machine at a desktop's width, one at a phone's (the
    node test above covers every case)."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: List[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((built_html / MEMORY_PAGE).as_uri())
    assert page.inner_text("#sizing-answer").startswith("Use: "), "no answer for the default"
    machines: List[Any] = [(name, machine["limits"]) for name, machine in data["machines"].items()]
    machines += [(None, limits) for limits in OWN_FIGURES]
    sizes = [model["weights"] for model in data["examples"]["models"]]
    settings = list(data["settings"].values())
    for index, (machine_id, limits) in enumerate(machines):
        for step, weights in enumerate((sizes + sizes)[index : index + (3 if width > 600 else 1)]):
            setting = settings[(7 * index + step) % len(settings)]
            _enter(page, limits, machine_id, weights, setting)
            shown = page.evaluate(READ_RESULTS)
            where = (machine_id or limits, weights / GB, setting["id"])
            best = sizing.recommend(data, weights, limits)
            assert shown["answer"] == best["setting"], where
            measured_machine = machine_id is not None and data["machines"][machine_id]["measured"]
            if shown["answerText"].startswith("Use: "):
                estimate = not (measured_machine and "measured" in best)
                assert ("(estimate)" in shown["answerText"]) == estimate, where
            assert (data["estimate_note"] in shown["text"]) != measured_machine, where
            expected = sizing.evaluate(data, setting["id"], weights, limits)
            assert shown["setting"] == setting["id"], where
            assert shown["verdict"] == expected["verdict"], where
            if expected["refused"]:
                continue
            for memory in limits:
                peak = expected["peaks"][memory]
                assert sizing.span(peak["low"], peak["high"]) in shown["ranges"][memory], where
                if "measured" in expected:
                    assert sizing.gb(expected["measured"][memory]) in shown["measured"][memory]
            assert shown["links"] and all(
                link.startswith(("https://", "file://")) for link in shown["links"]
            )
            scroll, client = shown["scroll"]
            assert scroll <= client, f"the page scrolls sideways: {scroll} px in {client} px"
    assert "@@" not in page.content(), "a measured source's link was not resolved"
    assert errors == []
    page.close()


def _record_cases() -> List[Dict[str, Any]]:
    """Every case the compile benchmark measured in a setting the calculator offers, read from
    the result files as the benchmark wrote them: the record's, then another file's for a
    setting and model the record lacks (the newest first); the fork's only where they measured
    the newest released overlay."""
    documents = []
    for path in (REPOSITORY / "benchmarks" / "results").glob("*.json"):
        document = json.loads(path.read_text(encoding="utf-8"))
        if document["benchmark"] == "compile":
            documents.append((path.name != "compile_record.json", document))
    documents.sort(key=lambda item: (item[0], [-ord(c) for c in item[1]["provenance"]["date"]]))
    found: List[Dict[str, Any]] = []
    released = facts.released_overlay_sha256()
    for _, document in documents:
        claimed = {(case["setting"], case["case"]["parameters"]["model"]) for case in found}
        current = document["provenance"]["overlay_sha256"] == released
        for case in document["cases"]:
            if case["parameters"]["wheel"] == "fork" and not current:
                continue
            parameters = dict(case["parameters"])
            options = dict(parameters.pop("options", None) or {})
            python = options.pop("use_python_runtime", False)
            if options or "error" in case:
                continue
            setting = {"runtime": "python" if python else "cpp", "partitioning": "whole"}
            setting.update(
                {
                    k: parameters[k]
                    for k in ("wheel", "offload", "trim", "runtime")
                    if k in parameters
                }
            )
            key = json.dumps(setting, sort_keys=True)
            if (key, parameters["model"]) not in claimed:
                found.append(
                    {
                        "setting": key,
                        "choices": setting,
                        "case": case,
                        "device": document["provenance"]["host"]["device"],
                    }
                )
    return found


def test_every_measured_case_is_on_the_page(browser: Any, built_html: Path) -> None:
    """For each case of the benchmark of record (and of another compile result file, for a
    setting the record lacks), the calculator, given the case's setting and model size, shows
    the measured peak, counting the model, and says it was measured on TensorRT-RTX on the
    record's GPU."""
    cases = _record_cases()
    assert len(cases) >= 8, "the record measures fewer settings than it did on 2026-12-03"
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto((built_html / MEMORY_PAGE).as_uri())
    recorded = {"shared": ("sum_peak_w", 1), "host": ("host_peak_w", 0), "gpu": ("gpu_peak_w", 1)}
    for found in cases:
        case, figures = found["case"], found["case"]["figures"]
        for limits in ({"shared": 1e12}, {"host": 2e12, "gpu": 1e12}):
            _enter(page, limits, None, figures["model_gib"] * GiB, found["choices"])
            shown = page.evaluate(READ_RESULTS)
            where = case["id"]
            assert "TensorRT-RTX" in shown["text"] and found["device"] in shown["text"], where
            rows = {(row["model"], row["memory"]): row for row in shown["models"]}
            for memory in limits:
                key, model_w = recorded[memory]  # the model's W, on the GPU before the compile
                row = rows[(case["parameters"]["model"], memory)]
                value = round(figures[key] + model_w, 2)
                assert row["low"] <= value <= row["high"], (where, memory, row)
                assert f"{value:.2f}" in row["text"] or row["low"] < row["high"], (where, row)
    page.close()


def test_worked_examples_on_the_page(built_html: Path, data: Dict[str, Any]) -> None:
    """The page's worked table shows, for each example, the setting and peaks that
    evidence.sizing gives (and the calculator, by the test above)."""
    page = (built_html / MEMORY_PAGE).read_text(encoding="utf-8")
    table = page[page.index('class="memory-examples') :]
    table = " ".join(
        html.unescape(re.sub(r"<[^>]+>", " ", table[: table.index("</table>")])).split()
    )
    for model in data["examples"]["models"]:
        weights = model["weights"]
        for machine_id in data["examples"]["machines"]:
            assert sizing.example_cell(data, weights, machine_id) in table, (model, machine_id)


@pytest.mark.parametrize("width", [1400, 420])
def test_landing_page_answers_first(browser: Any, built_html: Path, width: int) -> None:
    """The landing page's first screen holds the measured peaks of a compile and the way to
    the calculator, with no sideways scroll."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto((built_html / "index.html").as_uri())
    table = page.query_selector("table.memory-measured")
    assert table is not None, "the landing page shows no peaks"
    assert table.bounding_box()["y"] < 900 * (2 if width < 600 else 1)
    link = page.query_selector('a[href*="resource_management.html#sizing"]')
    assert link is not None and link.bounding_box()["y"] < 900 * (2 if width < 600 else 1)
    _no_sideways_scroll(page)
    page.close()
