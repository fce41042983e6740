"""The README's figures are the result files' figures: ``benchmarks/readme_tables.py``.

The README's tables of measured figures are generated between markers; these tests fail when
the README differs from what the generator makes of ``benchmarks/results/`` (rerun
``python -m benchmarks tables``), when a figure is typed into the README's prose
outside those tables, and when the generator stops drawing the cases a result file holds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
from wheel_helpers import LABEL

from benchmarks import readme_tables as tables

REPOSITORY = Path(__file__).resolve().parents[2]
README = REPOSITORY / "README.md"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "tables", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
    )


def _outside_tables(text: str) -> str:
    """The README without its generated blocks and its indented or fenced code."""
    for name in tables.TABLES:
        start, end = tables.markers(name)
        text = text[: text.find(start)] + text[text.find(end) + len(end) :]
    text = re.sub(
        r"<!-- supported-matrix:start -->.*<!-- supported-matrix:end -->", "", text, flags=re.S
    )
    text = re.sub(r"<!-- memory-sizing:start -->.*<!-- memory-sizing:end -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.startswith("    "))


def test_readme_tables_match_the_results() -> None:
    current = README.read_text(encoding="utf-8")
    expected = tables.render_readme(current)
    assert (
        tables.drifted(current, expected) == []
    ), "README.md's tables differ from benchmarks/results; run python -m benchmarks tables"
    assert current == expected


def test_check_command_passes_on_the_repository() -> None:
    result = _run("--check")
    assert result.returncode == 0, result.stderr


def test_check_command_names_a_drifted_table(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    start, end = tables.markers("host-heap")
    block = text[text.find(start) : text.find(end)]
    changed = block.replace(" GiB (", " GiB  (", 1)
    assert changed != block
    readme.write_text(text.replace(block, changed), encoding="utf-8")
    result = _run("--check", "--readme", str(readme))
    assert result.returncode == 1
    assert "tables differ from the results: host-heap;" in result.stderr
    assert "python -m benchmarks tables" in result.stderr
    assert readme.read_text(encoding="utf-8") != text, "--check must not write"


def test_rewrite_restores_the_tables(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    start, end = tables.markers("offload-headline")
    emptied = text[: text.find(start) + len(start)] + "\n" + text[text.find(end) :]
    readme.write_text(emptied, encoding="utf-8")
    assert _run("--readme", str(readme)).returncode == 0
    assert readme.read_text(encoding="utf-8") == text
    assert not list(tmp_path.glob(".*.tmp")), "a temporary file was left behind"


def test_missing_marker_is_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    start, _ = tables.markers("build-speed")
    readme.write_text(README.read_text(encoding="utf-8").replace(start, ""), encoding="utf-8")
    result = _run("--check", "--readme", str(readme))
    assert result.returncode == 1
    assert result.stderr.startswith("error: README.md has no <!-- results:build-speed:start -->")


def test_no_measured_figure_is_typed_into_the_prose() -> None:
    """Speeds, times, percentages and fractional sizes belong in the generated tables."""
    prose = _outside_tables(README.read_text(encoding="utf-8"))
    typed = re.findall(
        r"\b\d+(?:\.\d+)?\s*(?:GB/s|%)|\b\d+\.\d+\s*(?:GiB|MiB|GB|MB|s\b|W\b)", prose
    )
    assert typed == [], f"README.md's prose types figures by hand: {typed}"


def _tool_constant(pattern: str) -> str:
    for path in sorted((REPOSITORY / "tools" / "patched_wheel").rglob("*.py")):
        match = re.search(pattern, path.read_text(encoding="utf-8"), re.M)
        if match is not None:
            return match.group(1)
    raise AssertionError(f"tools/patched_wheel: nothing matches {pattern!r}")


def test_readme_names_the_build_tools_releases_and_label() -> None:
    """The release and label the README shows are the build tool's default and label."""
    releases = re.findall(
        r'"([^"]+)"', _tool_constant(r"^SUPPORTED_RELEASES(?:: [^=]+)? = \(([^)]*)\)")
    )
    text = README.read_text(encoding="utf-8")
    assert set(re.findall(rf"\b(\d+\.\d+\.\d+)\+{re.escape(LABEL)}\b", text)) == {releases[-1]}
    named = set(re.findall(r"\b\d+\.\d+\.\d+\b", _outside_tables(text)))
    assert named <= {releases[0], releases[-1]}, f"README.md names releases {sorted(named)}"
    assert f"({releases[0]} to {releases[-1]})" in text


def _offload_case(**fields: Any) -> Dict[str, Any]:
    case: Dict[str, Any] = {
        "size_gib": 16,
        "mix": "many-small",
        "strategy": "fork",
        "W_bytes": 16 * 1024**3,
        "largest_tensor_bytes": 8 * 1024**2,
        "tensors": 4000,
        "overshoot_bytes": 3 * 1024**3 // 10,
        "overshoot_W": 0.01875,
        "overshoot_over_largest_MiB": 299.2,
        "seconds": 1.0,
        "GBps": 17.18,
        "host_after_minus_W_MiB": 3.0,
    }
    case.update(fields)
    return case


@pytest.fixture()
def results(tmp_path: Path) -> Path:
    """A copy of the repository's result files, for tests that add cases to them."""
    folder = tmp_path / "results"
    shutil.copytree(REPOSITORY / "benchmarks" / "results", folder)
    return folder


def _write(path: Path, document: Dict[str, Any]) -> None:
    path.write_text(json.dumps(document), encoding="utf-8")


def _provenance(overlay_sha256: str) -> Dict[str, Any]:
    return {"overlay_sha256": overlay_sha256, "revision": "0" * 40, "dirty": False}


def test_headline_rows_are_runs_that_ran_every_strategy(results: Path) -> None:
    """A model of a run becomes a headline row only when that run measured the fork, the
    plain move and the 1 GiB step side by side; the ratios are of that run's figures."""
    run = {
        "benchmark": "offload",
        "provenance": _provenance(tables.current_overlay_sha256()),
        "cases": [
            _offload_case(strategy="upstream", overshoot_bytes=16 * 1024**3, overshoot_W=1.0),
            _offload_case(strategy="step-1GiB-plain", overshoot_bytes=1024**3, overshoot_W=1 / 16),
            _offload_case(overshoot_bytes=256 * 1024**2, overshoot_W=1 / 64),
            _offload_case(mix="fork-only"),
        ],
    }
    _write(results / "offload_zz.json", run)
    rows = tables.offload_headline(results).rows
    current = tables.current_overlay_sha256()[: tables.SHORT_SHA]
    assert [
        "16 GiB many-small",
        "1.000 W",
        "0.062 W",
        "0.016 W",
        "0.02",
        "0.25",
        "32.00",
        current,
    ] in rows
    assert not [row for row in rows if row[0] == "16 GiB fork-only"], "a row with a missing case"


def test_speed_headline_compares_within_one_run(results: Path) -> None:
    run = {
        "benchmark": "offload",
        "cases": [
            _offload_case(probes=False, strategy="upstream", GBps=2.0),
            _offload_case(probes=False, strategy="step-1GiB-plain", GBps=2.5),
            _offload_case(probes=False, GBps=17.0),
            _offload_case(probes=False, GBps=16.0, mix="no-step-run"),
            _offload_case(probes=False, strategy="upstream", GBps=2.0, mix="no-step-run"),
        ],
    }
    _write(results / "offload_zz_timing.json", run)
    table = tables.offload_speed(results)
    row = ["16 GiB many-small", "2.00 GB/s", "2.50 GB/s", "17.00 GB/s", "8.5", "6.8"]
    assert row + ["overlay unknown"] in table.rows
    assert not [row for row in table.rows if "no-step-run" in row[0]], "a row with a missing case"
    assert "From `benchmarks/results/offload_zz_timing.json`." in table.notes


@pytest.mark.parametrize(
    ("provenance", "shown"),
    [
        pytest.param(None, "overlay unknown", id="no-provenance"),
        pytest.param("current", "{short}", id="current-overlay"),
        pytest.param("f" * 64, "{other} (other overlay)", id="other-overlay"),
    ],
)
def test_overlay_mark(provenance: Any, shown: str) -> None:
    current = tables.current_overlay_sha256()
    document: Dict[str, Any] = {"cases": []}
    if provenance is not None:
        recorded = current if provenance == "current" else provenance
        document["provenance"] = _provenance(recorded)
    mark = tables.overlay_mark(document, current)
    other = "f" * tables.SHORT_SHA
    assert mark.text == shown.format(short=current[: tables.SHORT_SHA], other=other)


HEADLINES = ("offload-headline", "offload-speed")


@pytest.mark.parametrize("name", HEADLINES)
def test_headline_figures_name_their_overlay(name: str) -> None:
    """Every headline row names the overlay it measured, marked when it is not the current
    overlay (another one, or none recorded): a stale figure never passes for a current one."""
    current = tables.current_overlay_sha256()[: tables.SHORT_SHA]
    table = tables.TABLES[name]()
    assert table.header[-1] == "overlay"
    for row in table.rows:
        overlay = row[-1]
        assert (
            overlay == current
            or overlay in (tables.UNKNOWN_OVERLAY,)
            or overlay.endswith(f"({tables.OTHER_OVERLAY})")
        ), f"{name}: {row[0]}: overlay cell {overlay!r} neither current nor marked"
    marked = [row for row in table.rows if row[-1] != current]
    if marked:
        note = " ".join(table.notes)
        assert "current overlay is " + current in note, f"{name}: no note says what is current"


def test_headline_readme_rows_name_their_overlay() -> None:
    """The same in the README as committed: each headline row's last cell is its overlay."""
    text = README.read_text(encoding="utf-8")
    current = tables.current_overlay_sha256()[: tables.SHORT_SHA]
    for name in HEADLINES:
        start, end = tables.markers(name)
        block = text[text.find(start) : text.find(end)]
        rows = [line for line in block.splitlines() if line.startswith("| ") and "---" not in line]
        for line in rows[1:]:
            overlay = line.rstrip(" |").rsplit("| ", 1)[-1]
            stale = overlay != current
            assert (
                not stale or tables.UNKNOWN_OVERLAY in overlay or tables.OTHER_OVERLAY in (overlay)
            ), f"README.md {name}: a figure from another overlay is not marked: {line}"


def test_host_heap_table_names_its_overlay() -> None:
    notes = " ".join(tables.host_heap().notes)
    assert "Overlay of this run: " in notes


@pytest.mark.parametrize(
    ("recorded", "portable"),
    [
        pytest.param(
            "/tmp/venv/bin/python benchmarks/host_heap/run.py",
            "python benchmarks/host_heap/run.py",
            id="interpreter-of-a-venv",
        ),
        pytest.param(
            "python benchmarks/offload/run.py --out /root/out/offload.json",
            "python benchmarks/offload/run.py --out benchmarks/results/offload.json",
            id="output-folder-in-a-home",
        ),
        pytest.param(
            "python benchmarks/offload/run.py --out /root/o/x.json --timing-out /root/o/y.json",
            "python benchmarks/offload/run.py --out benchmarks/results/offload.json"
            " --timing-out benchmarks/results/y.json",
            id="several-files-outside-the-repository",
        ),
        pytest.param(
            "/opt/venv/bin/python3 -m benchmarks run offload --plan headline --out /root/out/a.json",
            "python -m benchmarks run offload --plan headline"
            " --out benchmarks/results/offload.json",
            id="the-dispatcher",
        ),
        pytest.param(
            "python3.12 benchmarks/build_speed.py ",
            "python benchmarks/build_speed.py",
            id="versioned-interpreter",
        ),
    ],
)
def test_portable_command(recorded: str, portable: str) -> None:
    """A recorded command as a reader runs it from the repository's root."""
    assert tables.portable_command(recorded, "benchmarks/results/offload.json") == portable


def test_current_overlay_runs_replace_stale_rows(results: Path) -> None:
    """Once a model is measured on the current overlay, the headline shows that run alone for
    it; models not yet measured again keep their older run, marked. Repeats in one run show
    their median and range."""
    current = tables.current_overlay_sha256()
    for rerun in results.glob("offload_3gib*.json"):
        rerun.unlink()
    older = {  # a run that records no overlay: 3 GiB llm is a model with only an older run
        "benchmark": "offload",
        "cases": [
            _offload_case(size_gib=3, mix="llm", strategy=name)
            for name in ("upstream", "step-1GiB-plain", "fork")
        ],
    }
    _write(results / "offload_older.json", older)
    fork_runs = [
        _offload_case(size_gib=24, mix="llm", overshoot_bytes=size, overshoot_W=size / 24 / 1024**3)
        for size in (1100 * 1024**2, 1000 * 1024**2, 1200 * 1024**2)
    ]
    run = {
        "benchmark": "offload",
        "provenance": _provenance(current),
        "cases": [
            _offload_case(
                size_gib=24, mix="llm", strategy="upstream", overshoot_bytes=24 * 1024**3
            ),
            _offload_case(
                size_gib=24, mix="llm", strategy="step-1GiB-plain", overshoot_bytes=2 * 1024**3
            ),
            *fork_runs,
        ],
    }
    _write(results / "offload_headline.json", run)
    table = tables.offload_headline(results)
    by_model = {}
    for row in table.rows:
        by_model.setdefault(row[0], []).append(row)
    assert len(by_model["24 GiB llm"]) == 1, "the stale 24 GiB run is still shown"
    row = by_model["24 GiB llm"][0]
    assert row[-1] == current[: tables.SHORT_SHA]
    assert "(3 runs: " in row[3], row
    assert by_model["3 GiB llm"][0][-1] == tables.UNKNOWN_OVERLAY
    assert any("offload_headline.json" in note for note in table.notes)


def _summary_case(**fields: Any) -> Dict[str, Any]:
    return _offload_case(
        probes=False,
        fraction_of_copy_ceiling=fields.get("GBps", 10.0) / 20.0,
        fraction_of_host_limit=fields.get("GBps", 10.0) / 25.0,
        **fields,
    )


def test_run_summary_sets_each_case_against_the_runs_ceilings() -> None:
    """A case's speed is the median of its timed runs, with its fractions of the run's copy
    ceiling and host limit; its overshoot above the floor comes from the probed run."""
    limit = {
        "bandwidth_GBps": 100.0,
        "copy_GBps": 40.0,
        "read_GBps": 100.0,
        "fault_in_GBps": 20.0,
        "chunked_copy_fresh_GBps": 15.0,
        "chunked_copy_prefaulted_GBps": 45.0,
        "limit_GBps": {"2": 50.0, "4": 25.0},
    }
    timed = {
        "copy_ceiling": {"GBps": 20.0},
        "host_limit": limit,
        "cases": [_summary_case(GBps=value) for value in (9.0, 10.0, 14.0)]
        + [_summary_case(strategy="upstream", GBps=1.0)],
    }
    probed = {"cases": [_offload_case(overshoot_over_floor_MiB=55.4)]}
    table = tables.run_summary(probed, timed)
    fork = ["16 GiB many-small", "`fork`", "10.00 GB/s (3 runs: 9.00-14.00)", "0.50", "0.40"]
    assert table.rows[0] == fork + ["+55 MiB"]
    assert table.rows[1][-1] == "-", "a case that was not probed has no overshoot"
    assert "25.0 GB/s for 4" in " ".join(table.notes)
    only_fork = tables.run_summary(probed, timed, ["fork"])
    assert [row[1] for row in only_fork.rows] == ["`fork`"]
