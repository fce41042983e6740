"""The result files' shape, its loader and the presenter (``docsrc/_ext/results.py``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Dict, List

import matplotlib
import pytest
import results

matplotlib.use("Agg")

COMMITTED = sorted(results.RESULTS.glob("*.json"))


def _result(cases: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A small valid result: one measure in GB/s, the given cases."""
    required = results.schema()["properties"]["provenance"]["required"]
    provenance = {key: None for key in required}
    provenance.update(overlay_sha256=results.current_overlay(), host={"cpus": 2})
    return {
        "benchmark": "demo",
        "title": "a demonstration",
        "provenance": provenance,
        "measures": {"GBps": {"label": "speed", "unit": "GB/s", "description": "how fast"}},
        "cases": cases,
        "_file": "benchmarks/results/demo.json",
    }


def _case(case_id: str, label: str, value: Any, headline: bool = True) -> Dict[str, Any]:
    figures = {"GBps": value}
    return {
        "id": case_id,
        "label": label,
        "headline": headline,
        "parameters": {},
        "figures": figures,
    }


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in COMMITTED])
def test_every_committed_result_has_the_shape(path: Path) -> None:
    document = results.load(path)
    assert document["cases"] and document["measures"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    """One error lists each problem on a line of its own, not the first one only: the schema's
    and the two it cannot express (ids used twice, figures no measure describes)."""
    document = _result([_case("a", "A", 1.0), _case("a", "B", "fast"), {"label": "no id"}])
    document["cases"][0]["figures"]["unknown"] = 2
    del document["title"], document["provenance"]["command"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(results.ResultError) as raised:
        results.load(path)
    lines = str(raised.value).splitlines()[1:]
    expected = [
        "the document: 'title'",
        "provenance: 'command'",
        "cases/0/figures: 'unknown'",
        "cases/1/id: 'a'",
        "cases/1/figures/GBps: 'fast'",
        "cases/2: 'id'",
    ]
    for start in expected:
        assert sum(start in line for line in lines) == 1, (start, lines)
    assert len(lines) == len(expected) + 3, lines  # case 2 also lacks headline, parameters, figures


def test_an_unreadable_file_is_a_result_error(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(results.ResultError, match="cannot be read"):
        results.load(tmp_path / "broken.json")


@pytest.mark.parametrize(
    "value, unit, shown",
    [
        pytest.param(3 * results.GiB, "bytes", "3.00 GiB", id="gib"),
        pytest.param(5 * results.MiB, "bytes", "5 MiB", id="mib"),
        pytest.param(0.0032, "s", "3.20 ms", id="short-time-in-ms"),
        pytest.param(14.11, "GB/s", "14.1 GB/s", id="unit"),
        pytest.param(2.4, "x", "2.40 x", id="ratio"),
        pytest.param(None, "s", "-", id="missing"),
    ],
)
def test_number(value: Any, unit: str, shown: str) -> None:
    assert results.number(value, unit) == shown


def test_repeats_are_one_row_with_their_median_and_range() -> None:
    document = _result(
        [_case("a1", "fork", 1.0), _case("a2", "fork", 3.0), _case("a3", "fork", 2.0)]
        + [_case("b", "other", 5.0, headline=False)]
    )
    table = results.case_table(document, ["GBps"])
    assert table.rows == [
        ["fork", "2.00 GB/s (3 runs: 1.00 GB/s to 3.00 GB/s)"],
        ["other", "5.00 GB/s"],
    ]
    assert results.case_table(document, ["GBps"], headline=True).rows[1:] == []


def test_notes_describe_the_measures_and_the_run() -> None:
    document = _result([_case("a", "fork", 1.0)])
    document["notes"] = ["A sentence the reader needs."]
    notes = results.case_table(document, ["GBps"]).notes
    assert notes[0] == "speed: how fast."
    assert notes[1] == "A sentence the reader needs."
    assert "`benchmarks/results/demo.json`" in notes[2] and "(the current one)" in notes[2]
    other = copy.deepcopy(document)
    other["provenance"]["overlay_sha256"] = "0" * 64
    assert "not the current overlay" in results.case_table(other, ["GBps"]).notes[2]


@pytest.mark.parametrize("name", list(results.TABLES))
def test_every_named_table_is_drawn_from_its_file(name: str) -> None:
    table = results.table(name)
    assert table.rows and all(len(row) == len(table.header) for row in table.rows)


def test_an_unknown_name_is_a_result_error() -> None:
    with pytest.raises(results.ResultError, match="no table 'nothing'"):
        results.table("nothing")


def test_the_compile_timeline_draws_the_official_and_the_fork_wheel() -> None:
    """The benchmarks page's timeline: the 3 GiB compile with the offload on, a panel per
    wheel, each with host, GPU and their sum and the compile's phases shaded."""
    figure = results.plot("compile-timeline")
    titles = [axes.get_title() for axes in figure.axes]
    assert titles == ["official, mlp-3gib, offload on", "fork, mlp-3gib, offload on"]
    for axes in figure.axes:
        assert len(axes.lines) == 3 and len(axes.patches) > 5


def test_the_phase_table_names_the_compile_peak_in_module_creation() -> None:
    """Every W of the compile's peak has a phase: the peak's phase is the module creation."""
    document = results.result_file("compile_record")
    table = results.table("compile-phases")
    peaks = {row[0]: float(row[2].split()[0]) for row in table.rows}
    official = results.case(document, "official-mlp-3gib-offload-on-r1")
    assert official["peak_phase"] == "module creation"
    assert peaks["module creation"] == pytest.approx(official["figures"]["sum_peak_w"], abs=0.01)


def test_timelines_draw_memory_and_phases() -> None:
    """A case with series.timeline and series.phases becomes a panel: host, GPU and their
    sum over time, each phase shaded."""
    case = _case("c", "official, 3 GiB", 1.0)
    case["series"] = {
        "timeline": {"t_s": [0, 1, 2], "host_bytes": [0, results.GiB, 0], "gpu_bytes": [0, 0, 1]},
        "phases": [{"name": "build", "start_s": 0.5, "end_s": 1.5}],
    }
    figure = results.plot_timelines(_result([case, _case("d", "no timeline", 2.0)]), ["c"])
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == ["host", "GPU", "host + GPU"]
    assert list(axes.get_lines()[0].get_ydata()) == [0, 1, 0]
    assert [text.get_text() for text in axes.texts] == ["build"]
    with pytest.raises(results.ResultError, match="no series.timeline in d"):
        results.plot_timelines(_result([case, _case("d", "no timeline", 2.0)]), ["c", "d"])
