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

from evidence import sizing

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
# (as multiples of W; builder memory about 2 GB): each must lie in the data's range.
UPSTREAM_MEASURED = [
    pytest.param("fork", "host", 1 * 3 * GiB + 2e9, id="host-offload-off"),
    pytest.param("fork-offload", "host", 2 * 3 * GiB + 2e9, id="host-offload-on"),
    pytest.param("fork", "gpu", 2 * 3 * GiB, id="gpu-offload-off"),
    pytest.param("fork-offload", "gpu", 1 * 3 * GiB, id="gpu-offload-on"),
    pytest.param("fork", "shared", 3.8 * 3 * GiB, id="unified-offload-off"),
    pytest.param("fork-offload", "shared", 3.2 * 3 * GiB, id="unified-offload-on"),
]


@pytest.mark.parametrize("setting_id, memory, measured", UPSTREAM_MEASURED)
def test_ranges_hold_upstreams_measurements(
    data: Dict[str, Any], setting_id: str, memory: str, measured: float
) -> None:
    limits = {"host": 1e15, "gpu": 1e15}
    result = sizing.evaluate(data, setting_id, 3 * GiB, limits)
    peak = result["peaks"][memory]
    assert peak["low"] <= measured * 1.001 and measured <= peak["high"], (setting_id, memory, peak)


def test_the_fork_lowers_no_peak_where_it_should_not(data: Dict[str, Any]) -> None:
    """On a discrete GPU the fork's move changes neither peak; the trim lowers the host's low end."""
    limits = data["machines"]["h200-server"]["limits"]
    for offload in ("", "-offload"):
        upstream = sizing.evaluate(data, "upstream" + offload, 64 * GB, limits)
        fork = sizing.evaluate(data, "fork" + offload, 64 * GB, limits)
        assert upstream["peaks"]["gpu"] == fork["peaks"]["gpu"]
        assert fork["peaks"]["host"]["low"] < upstream["peaks"]["host"]["low"]


def test_partitioning_keeps_the_engines_bytes(data: Dict[str, Any]) -> None:
    """With resource partitioning the host never holds less than about W: the serialized
    engines already built stay (TorchTensorRTModule.serialized_engine)."""
    limits = {"host": 200 * GB, "gpu": 1e15}
    result = sizing.evaluate(data, "fork-partitioned", 100 * GB, limits)
    assert result["engines"] == 2 and result["S"] == pytest.approx(50 * GB)
    assert result["peaks"]["host"]["low"] >= 100 * GB
    refused = sizing.evaluate(data, "fork-offload-partitioned", 100 * GB, limits, budget=104 * GB)
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
                cases.append(
                    {
                        "setting": chosen,
                        "W": weights,
                        "limits": limits,
                        "workspace": 0,
                        "budget": None,
                    }
                )
            cases.append(
                {
                    "setting": "fork-offload-partitioned",
                    "W": weights,
                    "limits": limits,
                    "workspace": 4 * GB,
                    "budget": 3 * weights,
                }
            )
    return cases


NODE_RUNNER = """
const calculator = require(process.argv[1]);
const input = JSON.parse(require("fs").readFileSync(0, "utf-8"));
const out = input.cases.map((c) => {
  const r = calculator.evaluate(input.data, c.setting, c.W, c.limits, c.workspace, c.budget);
  const best = calculator.recommend(input.data, c.W, c.limits, 0, null);
  return { peaks: r.peaks, verdict: r.verdict, S: r.S, engines: r.engines, best: best.setting };
});
process.stdout.write(JSON.stringify(out));
"""


def test_calculator_arithmetic_matches_the_data_file(data: Dict[str, Any]) -> None:
    """sizing.js (under node) gives, case by case, the peaks, verdicts and recommendations of
    evidence.sizing.evaluate, which the worked tables and the README are drawn from."""
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


def _enter(page: Any, limits: Dict[str, float], machine_id: Optional[str], weights: float) -> None:
    """Pick the machine (a preset, or figures of one's own) and type the weights in GB."""
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
    page.fill("#sizing-weights", str(weights / GB))


# What the page shows after an input, read in one call: the answer and every setting's card.
READ_RESULTS = """() => ({
  answer: document.getElementById("sizing-answer").dataset.setting,
  cards: Array.from(document.querySelectorAll("div.sizing-result")).map((card) => ({
    setting: card.dataset.setting,
    verdict: card.dataset.verdict,
    peaks: Object.fromEntries(["host", "gpu", "shared"].map((memory) => [memory, {
      low: card.getAttribute("data-" + memory + "-low"),
      high: card.getAttribute("data-" + memory + "-high"),
      text: (card.querySelector('p.sizing-peak[data-memory="' + memory + '"]') || {}).innerText,
    }])),
    links: Array.from(card.querySelectorAll("div.sizing-terms a")).map((a) => a.href),
  })),
  scroll: [document.documentElement.scrollWidth, document.documentElement.clientWidth],
})"""


@pytest.mark.parametrize("width", [1400, 420])
def test_calculator_in_a_browser(
    browser: Any, built_html: Path, data: Dict[str, Any], width: int
) -> None:
    """Typed into the built page, the worked examples' model sizes on every machine class
    (and on figures of one's own) give the peaks of the data file's arithmetic and the worked
    table's setting, and nothing scrolls sideways: three models per machine at a desktop's
    width, one at a phone's (the arithmetic does not depend on the width; the node test above
    covers every case)."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors: List[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto((built_html / MEMORY_PAGE).as_uri())
    assert page.inner_text("#sizing-answer").startswith("Use: "), "no answer for the default"
    machines: List[Any] = [(name, machine["limits"]) for name, machine in data["machines"].items()]
    machines += [(None, limits) for limits in OWN_FIGURES]
    sizes = [model["weights"] for model in data["examples"]["models"]]
    for index, (machine_id, limits) in enumerate(machines):
        for weights in (sizes + sizes)[index : index + (3 if width > 600 else 1)]:
            _enter(page, limits, machine_id, weights)
            shown = page.evaluate(READ_RESULTS)
            where = (machine_id or limits, weights / GB)
            assert shown["answer"] == sizing.recommend(data, weights, limits)["setting"], where
            cards = {card["setting"]: card for card in shown["cards"]}
            assert sorted(cards) == sorted(data["settings"])
            for chosen in data["settings"]:
                expected = sizing.evaluate(data, chosen, weights, limits)
                card = cards[chosen]
                assert card["verdict"] == expected["verdict"], (chosen, where)
                if expected["refused"]:
                    continue
                for memory in limits:
                    peak, on_page = expected["peaks"][memory], card["peaks"][memory]
                    for key in ("low", "high"):
                        assert float(on_page[key]) == pytest.approx(peak[key]), (chosen, where)
                    assert sizing.span(peak["low"], peak["high"]) in on_page["text"]
                assert card["links"] and all(
                    link.startswith(("https://", "file://")) for link in card["links"]
                )
            scroll, client = shown["scroll"]
            assert scroll <= client, f"the page scrolls sideways: {scroll} px in {client} px"
    assert "@@" not in page.content(), "a measured source's link was not resolved"
    assert errors == []
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
    """The landing page's first screen holds the peaks of a compile and the way to the
    calculator, with no sideways scroll."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto((built_html / "index.html").as_uri())
    table = page.query_selector("table.memory-formulas")
    assert table is not None, "the landing page shows no peaks"
    assert table.bounding_box()["y"] < 900 * (2 if width < 600 else 1)
    link = page.query_selector('a[href*="resource_management.html#sizing"]')
    assert link is not None and link.bounding_box()["y"] < 900 * (2 if width < 600 else 1)
    _no_sideways_scroll(page)
    page.close()
