"""The benchmarks' package: one entry point, plans as named data, one result shape.

The figures themselves come from the GPU machine; these tests check what holds on any
machine: the dispatcher names and runs each benchmark, every plan's cases name a known
strategy and mix, and a result file is written whole with its ``provenance``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as dispatcher
from benchmarks import harness, strategies
from benchmarks.offload import run

REPOSITORY = Path(__file__).resolve().parents[2]


def _benchmarks(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPOSITORY,
    )


def test_list_names_every_benchmark() -> None:
    listed = _benchmarks("list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == list(dispatcher.BENCHMARKS)


def test_run_refuses_an_unknown_benchmark() -> None:
    refused = _benchmarks("run", "no-such-benchmark")
    assert refused.returncode == 2
    assert "invalid choice: 'no-such-benchmark'" in refused.stderr


def test_run_hands_its_options_to_the_benchmark() -> None:
    helped = _benchmarks("run", "offload", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "usage: python -m benchmarks run offload" in helped.stdout
    assert "--plan {headline,designs" in helped.stdout


@pytest.mark.parametrize("name", list(dispatcher.BENCHMARKS))
def test_every_benchmark_has_a_main(name: str) -> None:
    import importlib

    module = importlib.import_module(dispatcher.BENCHMARKS[name][0])
    assert callable(module.main)


@pytest.mark.parametrize("plan", list(run.PLANS))
def test_every_plan_names_known_strategies_and_mixes(plan: str) -> None:
    known_mixes = {"llm", "llm-2gpu", "one-large", "small", "fp32-64MiB", *run.TRANSFORMERS_MIXES}
    for case in run.PLANS[plan]:
        assert case.strategy in strategies.OFFLOAD_BY_NAME, f"{plan}: {case.strategy}"
        assert case.mix in known_mixes, f"{plan}: {case.mix}"


def test_plan_selection_keeps_the_plans_timed_runs_unless_repeats_say_otherwise() -> None:
    chosen = ["--plan", "headline", "--sizes", "24", "--mixes", "llm"]
    args = run.parse_args(chosen + ["--timing-out", "t.json"])
    cases = run.selected_cases(args)
    assert (24, "llm", "fork", True, 3) in cases
    args = run.parse_args(chosen + ["--timing-out", "t.json", "--repeats", "1"])
    assert (24, "llm", "fork", True, 1) in run.selected_cases(args)
    args = run.parse_args(chosen)  # no timing file: timed runs would overwrite --out
    assert all(timed == 0 for *_, timed in run.selected_cases(args))


def test_save_result_writes_the_provenance_and_leaves_no_temporary(tmp_path: Path) -> None:
    record = harness.provenance(["-m", "benchmarks", "run", "offload"])
    target = tmp_path / "results" / "x.json"
    harness.save_result(target, "offload", {"cases": []}, record)
    document = json.loads(target.read_text(encoding="utf-8"))
    assert document["benchmark"] == "offload"
    assert document["provenance"]["command"] == "python -m benchmarks run offload"
    assert document["provenance"]["overlay_sha256"] == harness.overlay_sha256()
    assert set(document["provenance"]) >= {"revision", "dirty", "date", "host"}
    assert [path.name for path in target.parent.iterdir()] == ["x.json"]


def test_revision_file_names_a_copied_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree without git takes its revision from the file written before it was copied."""
    monkeypatch.setattr(harness, "REPOSITORY", tmp_path)
    monkeypatch.setattr(harness, "REVISION_FILE", tmp_path / ".source-revision.json")
    assert harness.source_revision() == {"revision": "unknown", "dirty": None}
    (tmp_path / ".source-revision.json").write_text('{"revision": "abc", "dirty": false}')
    assert harness.source_revision() == {"revision": "abc", "dirty": False}
