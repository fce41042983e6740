"""The tables and plots of the result files (``evidence/tables.py``, ``evidence/plots.py``)."""

from __future__ import annotations

import copy
from typing import Any

import matplotlib
import pytest

from evidence import plots, tables
from evidence.result import ResultError, find_case, result_file
from tests.evidence.test_result import small_case, small_result

matplotlib.use("Agg")


@pytest.mark.parametrize(
    "value, unit, shown",
    [
        pytest.param(3 * tables.GiB, "bytes", "3.00 GiB", id="gib"),
        pytest.param(5 * tables.MiB, "bytes", "5 MiB", id="mib"),
        pytest.param(0.0032, "s", "3.20 ms", id="short-time-in-ms"),
        pytest.param(14.11, "GB/s", "14.1 GB/s", id="unit"),
        pytest.param(2.4, "x", "2.40 x", id="ratio"),
        pytest.param(None, "s", "-", id="missing"),
    ],
)
def test_number(value: Any, unit: str, shown: str) -> None:
    assert tables.number(value, unit) == shown


def test_repeats_are_one_row_with_their_median_and_range() -> None:
    document = small_result(
        [small_case("a1", "fork", 1.0), small_case("a2", "fork", 3.0)]
        + [small_case("a3", "fork", 2.0), small_case("b", "other", 5.0, headline=False)]
    )
    table = tables.case_table(document, ["GBps"])
    assert table.rows == [
        ["fork", "2.00 GB/s (3 runs: 1.00 GB/s to 3.00 GB/s)"],
        ["other", "5.00 GB/s"],
    ]
    assert tables.case_table(document, ["GBps"], headline=True).rows[1:] == []


def test_notes_describe_the_measures_and_the_run() -> None:
    document = small_result([small_case("a", "fork", 1.0)])
    document["notes"] = ["A sentence the reader needs."]
    document["_file"] = "benchmarks/results/demo.json"
    notes = tables.case_table(document, ["GBps"]).notes
    assert notes[0] == "speed: how fast."
    assert notes[1] == "A sentence the reader needs."
    assert "`benchmarks/results/demo.json`" in notes[2] and "(the current one)" in notes[2]
    other = copy.deepcopy(document)
    other["provenance"]["overlay_sha256"] = "0" * 64
    assert "not the current overlay" in tables.case_table(other, ["GBps"]).notes[2]


@pytest.mark.parametrize("name", tables.TABLE_NAMES)
def test_every_named_table_is_drawn_from_its_file(name: str) -> None:
    table = tables.table(name)
    assert table.rows and all(len(row) == len(table.header) for row in table.rows)


def test_an_unknown_name_is_a_result_error() -> None:
    with pytest.raises(ResultError, match="no table 'nothing'"):
        tables.table("nothing")


def test_the_compile_timeline_draws_the_official_and_the_fork_wheel() -> None:
    """The benchmarks page's timeline: the 3 GiB compile with the offload on, a panel per
    wheel, each with host, GPU and their sum and the compile's phases shaded."""
    figure = plots.plot("compile-timeline")
    titles = [axes.get_title() for axes in figure.axes]
    assert titles == ["official, mlp-12gib, offload on", "fork, mlp-12gib, offload on"]
    for axes in figure.axes:
        assert len(axes.lines) == 3 and len(axes.patches) > 5


def test_the_phase_table_names_the_compile_peak_in_module_creation() -> None:
    """Every W of the compile's peak has a phase: the peak's phase is the module creation."""
    document = result_file("compile_record")
    table = tables.table("compile-phases")
    official = find_case(document, "official-mlp-12gib-offload-on-r1")
    fork = find_case(document, "fork-mlp-12gib-offload-on-r1")
    for column, case in ((2, official), (4, fork)):
        assert case["peak_phase"] == "module creation"
        peaks = [float(row[column].split()[0]) for row in table.rows if row[column] != "-"]
        created = [row[column] for row in table.rows if row[0] == "module creation"]
        assert max(peaks) == pytest.approx(case["figures"]["sum_peak_w"], abs=0.01)
        assert f"{max(peaks):.2f} W" in created
    # The fork's calls that the official wheel does not make have rows of their own.
    assert ["-", "-"] in [row[1:3] for row in table.rows]


def test_timelines_draw_memory_and_phases() -> None:
    """A case with series.timeline and series.phases becomes a panel: host, GPU and their
    sum over time, each phase shaded."""
    case = small_case("c", "official, 3 GiB", 1.0)
    case["series"] = {
        "timeline": {"t_s": [0, 1, 2], "host_bytes": [0, tables.GiB, 0], "gpu_bytes": [0, 0, 1]},
        "phases": [{"name": "build", "start_s": 0.5, "end_s": 1.5}],
    }
    figure = plots.plot_timelines(small_result([case, small_case("d", "no timeline", 2.0)]), ["c"])
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == ["host", "GPU", "host + GPU"]
    assert list(axes.get_lines()[0].get_ydata()) == [0, 1, 0]
    assert [text.get_text() for text in axes.texts] == ["build"]
    with pytest.raises(ResultError, match="no series.timeline in d"):
        plots.plot_timelines(small_result([case, small_case("d", "no timeline", 2.0)]), ["c", "d"])
