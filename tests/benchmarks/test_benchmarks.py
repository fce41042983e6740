"""The benchmarks' package: one entry point, the plan as data, one result shape.

The figures themselves come from the machines that ran them; these tests check what holds on
any machine: the dispatcher runs each benchmark's ``run()``, measuring never imports the
presenter, the offload plan names a known strategy and mix, and every benchmark's result
file is of the shape the docs' loader checks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest
import results

from benchmarks import __main__ as dispatcher
from benchmarks import build_speed, harness
from benchmarks.host_heap import run as host_heap
from benchmarks.host_heap import steady_loop
from benchmarks.offload import run

REPOSITORY = Path(__file__).resolve().parents[2]
# A provenance for the tests of a result's shape (making a real one imports torch: seconds).
RECORD = dict.fromkeys(results.schema()["properties"]["provenance"]["required"], "recorded")


def _benchmarks(*args: str) -> "subprocess.CompletedProcess[str]":
    command = [sys.executable, "-m", "benchmarks", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPOSITORY)


def test_list_names_every_benchmark() -> None:
    listed = _benchmarks("list")
    assert listed.returncode == 0, listed.stderr
    names = [line.split()[0] for line in listed.stdout.splitlines()]
    assert names == list(dispatcher.BENCHMARKS)


def test_an_unknown_benchmark_is_refused_with_the_names() -> None:
    refused = _benchmarks("run", "no-such-benchmark")
    assert refused.returncode == 2
    assert ", ".join(dispatcher.BENCHMARKS) in refused.stderr


@pytest.mark.parametrize("name", list(dispatcher.BENCHMARKS))
def test_run_hands_its_options_to_the_benchmark(name: str) -> None:
    helped = _benchmarks("run", name, "--help")
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith(f"usage: python -m benchmarks run {name}")


def test_a_benchmark_that_cannot_run_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A benchmark's BenchmarkError ends the run with exit status 1 and one ``error:`` line;
    no library function exits the process itself."""
    (tmp_path / "refusing.py").write_text(
        "from benchmarks import harness\n"
        "def run(argv):\n"
        "    raise harness.BenchmarkError(f'cannot run with {argv}')\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(dispatcher.BENCHMARKS, "refusing", ("refusing", "a test's benchmark"))
    assert dispatcher.main(["run", "refusing", "--size", "3"]) == 1
    assert capsys.readouterr().err == "error: cannot run with ['--size', '3']\n"


def test_measuring_never_imports_the_presenter() -> None:
    """The benchmarks write data; the docs' presenter reads it: no import runs the other way."""
    modules = [module for module, _ in dispatcher.BENCHMARKS.values()]
    code = f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
    code += "print(sorted({'results', 'evidence.sizing'} & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY / "tools")}  # as the dispatcher runs
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPOSITORY, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr


def test_the_plan_names_known_strategies_and_mixes() -> None:
    known_mixes = {"llm", "small", *run.TRANSFORMERS_MIXES}
    for size, mix, strategy, probed, timed in run.PLAN:
        assert strategy in run.STRATEGIES and mix in known_mixes, (size, mix, strategy)
        assert probed or timed, (size, mix, strategy)


def _loaded(tmp_path: Path, document: Dict[str, Any]) -> Dict[str, Any]:
    """``document`` saved by the harness and read back by the docs' loader."""
    harness.save_result(tmp_path / "results" / "x.json", document)
    assert [path.name for path in (tmp_path / "results").iterdir()] == ["x.json"]
    return results.load(tmp_path / "results" / "x.json")


def test_a_result_carries_its_provenance_and_only_the_measures_it_uses(tmp_path: Path) -> None:
    record = harness.provenance(["-m", "benchmarks", "run", "offload"])
    cases = [harness.case("a", "A", {"seconds": 1.5}, parameters={"size": 1})]
    measures = {"seconds": {"label": "s", "unit": "s", "description": "time"}}
    measures["unused"] = {"label": "u", "unit": "", "description": "never measured"}
    document = _loaded(tmp_path, harness.result("demo", "a run", record, measures, cases))
    assert document["provenance"]["command"] == "python -m benchmarks run offload"
    assert document["provenance"]["overlay_sha256"] == harness.overlay_sha256()
    assert list(document["measures"]) == ["seconds"]


def _offload_case(strategy: str, repeat: int) -> Dict[str, Any]:
    figures = dict.fromkeys(("overshoot_W", "GBps", "fraction_of_copy_ceiling"), 1.0)
    case = {"size_gib": 3, "mix": "llm", "strategy": strategy, "repeat": repeat}
    return {**case, "probes": False, **figures}


def test_an_offload_run_describes_itself(tmp_path: Path) -> None:
    """Repeats share a label and get ids of their own; the run's ceilings are cases too."""
    ceiling = {"GBps": 20.0, "median_GBps": 19.0, "samples_GBps": [20.0], "threads": 2, "bytes": 1}
    limit = {"threads": 2, "copy_GBps": 30.0, "bandwidth_GBps": 60.0, "limit_GBps": {"4": 15.0}}
    raw = [_offload_case("fork", 0), _offload_case("fork", 1), _offload_case("upstream", 0)]
    document = _loaded(tmp_path, run.offload_result(RECORD, raw, ceiling, limit, {}))
    ids = [case["id"] for case in document["cases"]]
    assert ids[:3] == ["3gib-llm-fork", "3gib-llm-fork-r1", "3gib-llm-upstream"]
    assert ids[3:] == ["copy-ceiling", "host-limit"]
    fork = run.STRATEGIES["fork"].label
    assert {case["label"] for case in document["cases"][:2]} == {f"3 GiB llm, {fork} (`fork`)"}
    assert "speed of the move" in document["title"]
    assert document["cases"][4]["figures"]["limit_4_GBps"] == 15.0


def test_a_host_heap_run_is_a_case_per_setting_and_size(tmp_path: Path) -> None:
    runs = [
        dict.fromkeys(host_heap.MEASURES, float(repeat))
        | {"case": name, "burst_gib": 1.0, "burst_bytes": 100, "repeat": repeat}
        for name in ("upstream", "fork")
        for repeat in range(3)
    ]
    document = _loaded(tmp_path, host_heap.host_heap_result(RECORD, runs, {}))
    fork = results.case(document, "fork-1gib")
    assert fork["figures"]["kept_after_trim"] == 1.0 and fork["headline"]
    assert fork["figures"]["kept_fraction"] == 0.01 and len(fork["series"]["runs"]) == 3


def test_build_speed_steps_keep_their_runs(tmp_path: Path) -> None:
    plain = build_speed.step("plain_read", {"seconds": 0.15}, series={"runs_s": [0.1, 0.2]})
    pip = build_speed.step("pip_wheel", {"seconds": 3.0, "exit_status": 0}, command="pip wheel")
    made = harness.result("build-speed", "t", RECORD, build_speed.MEASURES, [plain, pip])
    document = _loaded(tmp_path, made)
    plain = results.case(document, "plain-read")
    assert plain["figures"]["seconds"] == 0.15 and plain["series"] == {"runs_s": [0.1, 0.2]}
    assert results.case(document, "pip-wheel")["parameters"] == {"command": "pip wheel"}


def test_steady_loop_compares_both_settings_per_block(tmp_path: Path) -> None:
    runs = [
        {"block_mib": 4, "case": case, "repeat": repeat, "median_s": seconds * (repeat + 1)}
        for case, seconds in (("dynamic", 0.001), ("fixed", 0.004))
        for repeat in range(3)
    ]
    made = steady_loop.steady_loop_result(RECORD, runs, {})
    figures = results.case(_loaded(tmp_path, made), "4mib")["figures"]
    assert figures == {"dynamic_s": 0.002, "fixed_s": 0.008, "ratio": 4.0}


def test_revision_file_names_a_copied_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree without git takes its revision from the file written before it was copied."""
    monkeypatch.setattr(harness, "REPOSITORY", tmp_path)
    monkeypatch.setattr(harness, "REVISION_FILE", tmp_path / ".source-revision.json")
    assert harness.source_revision() == {"revision": "unknown", "dirty": None}
    (tmp_path / ".source-revision.json").write_text('{"revision": "abc", "dirty": false}')
    assert harness.source_revision() == {"revision": "abc", "dirty": False}
