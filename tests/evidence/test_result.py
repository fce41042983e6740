"""The result file's one shape: written by the benchmarks, read by the presenters
(``evidence/result.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

import pytest

from evidence import REPOSITORY, RESULTS, result

COMMITTED = sorted(RESULTS.glob("*.json"))


def small_result(cases: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A small valid result: one measure in GB/s, the given cases."""
    required = result.schema()["properties"]["provenance"]["required"]
    provenance = {key: None for key in required}
    provenance.update(overlay_sha256=result.overlay_sha256(), host={"cpus": 2})
    return {
        "benchmark": "demo",
        "title": "a demonstration",
        "provenance": provenance,
        "measures": {"GBps": {"label": "speed", "unit": "GB/s", "description": "how fast"}},
        "cases": cases,
    }


def small_case(case_id: str, label: str, value: Any, headline: bool = True) -> Dict[str, Any]:
    return result.case(case_id, label, {"GBps": value}, headline=headline)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in COMMITTED])
def test_every_committed_result_has_the_shape(path: Path) -> None:
    document = result.load(path)
    assert document["cases"] and document["measures"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    """One error lists each problem on a line of its own, not the first one only: the schema's
    and the two it cannot express (ids used twice, figures no measure describes)."""
    cases = [small_case("a", "A", 1.0), small_case("a", "B", "fast"), {"label": "no id"}]
    document = small_result(cases)
    document["cases"][0]["figures"]["unknown"] = 2
    del document["title"], document["provenance"]["command"]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(result.ResultError) as raised:
        result.load(path)
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
    with pytest.raises(result.ResultError, match="cannot be read"):
        result.load(tmp_path / "broken.json")


def test_a_document_not_of_the_shape_is_not_written(tmp_path: Path) -> None:
    """The writer checks what the reader checks: nothing is written that could not be read."""
    document = small_result([small_case("a", "A", "fast")])
    with pytest.raises(result.ResultError, match="cases/0/figures/GBps"):
        result.save(tmp_path / "x.json", document)
    assert list(tmp_path.iterdir()) == []


def test_a_written_result_reads_back_with_only_the_measures_it_uses(tmp_path: Path) -> None:
    """Written under a temporary name and renamed (nothing else left in the folder), with the
    provenance of this checkout and only the measures its cases have figures of."""
    measures = [result.Measure("seconds", "time", "s", "wall time")]
    measures += [result.Measure("unused", "u", "", "never measured")]
    record = result.provenance(["-m", "benchmarks", "run", "offload"])
    cases = [result.case("a", "A", {"seconds": 1.5}, parameters={"size": 1})]
    result.save(tmp_path / "x.json", result.result("demo", "a run", record, measures, cases))
    assert [path.name for path in tmp_path.iterdir()] == ["x.json"]
    document = result.load(tmp_path / "x.json")
    assert document["provenance"]["command"] == "python -m benchmarks run offload"
    assert document["provenance"]["overlay_sha256"] == result.overlay_sha256()
    assert document["measures"] == {
        "seconds": {"label": "time", "unit": "s", "description": "wall time"}
    }
    assert result.find_case(document, "a")["figures"] == {"seconds": 1.5}


def test_an_unknown_case_names_the_ids_there_are() -> None:
    with pytest.raises(result.ResultError, match="no case 'z'; ids: a, b"):
        result.find_case(small_result([small_case("a", "A", 1), small_case("b", "B", 2)]), "z")


def test_reading_and_presenting_results_needs_no_psutil() -> None:
    """The docs build installs docsrc/requirements.txt only: reading, tabling and sizing the
    result files must import without psutil, which only the measuring needs."""
    code = (
        "import sys; sys.modules['psutil'] = None\n"
        "import evidence.result, evidence.tables, evidence.sizing\n"
        "evidence.tables.table('compile')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPOSITORY, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
