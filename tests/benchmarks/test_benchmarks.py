"""The benchmarks' package: one entry point, the plan as data, one result shape.

The figures themselves come from the machines that ran them; these tests check what holds on
any machine: the dispatcher finds and runs each benchmark folder's ``run()``, the offload plan
names a known strategy and mix, and every benchmark's result file is of the shape the
evidence package reads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from benchmarks import __main__ as dispatcher
from benchmarks.build_speed import run as build_speed
from benchmarks.host_heap import run as host_heap
from benchmarks.host_heap_steady_loop import run as steady_loop
from benchmarks.offload import run
from evidence import REPOSITORY, result

# A provenance for the tests of a result's shape (making a real one imports torch: seconds).
RECORD = dict.fromkeys(result.schema()["properties"]["provenance"]["required"], "recorded")
BENCHMARKS = dispatcher.benchmarks()


def _benchmarks(*args: str) -> "subprocess.CompletedProcess[str]":
    command = [sys.executable, "-m", "benchmarks", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=REPOSITORY)


def test_every_folder_with_a_run_module_is_a_benchmark() -> None:
    """Found by folder: each ``benchmarks/<name>/run.py`` (``-`` for ``_``), no other."""
    folders = sorted(p.parent.name for p in (REPOSITORY / "benchmarks").glob("*/run.py"))
    assert list(BENCHMARKS) == [name.replace("_", "-") for name in folders]
    assert "host-heap-steady-loop" in BENCHMARKS and "build-speed" in BENCHMARKS
    listed = _benchmarks("list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()] == list(BENCHMARKS)


def test_an_unknown_benchmark_is_refused_with_the_names() -> None:
    refused = _benchmarks("run", "no-such-benchmark")
    assert refused.returncode == 2
    assert ", ".join(BENCHMARKS) in refused.stderr


@pytest.mark.parametrize("name", list(BENCHMARKS))
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
    monkeypatch.setattr(dispatcher, "benchmarks", lambda: {"refusing": "refusing"})
    assert dispatcher.main(["run", "refusing", "--size", "3"]) == 1
    assert capsys.readouterr().err == "error: cannot run with ['--size', '3']\n"


def test_the_plan_names_known_strategies_and_mixes() -> None:
    known_mixes = {"llm", "small", *run.TRANSFORMERS_MIXES}
    for size, mix, strategy, probed, timed in run.PLAN:
        assert strategy in run.STRATEGIES and mix in known_mixes, (size, mix, strategy)
        assert probed or timed, (size, mix, strategy)


def _loaded(tmp_path: Path, document: Dict[str, Any]) -> Dict[str, Any]:
    """``document`` written and read back by the evidence package."""
    result.save(tmp_path / "x.json", document)
    return result.load(tmp_path / "x.json")


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
        dict.fromkeys((m.key for m in host_heap.MEASURES), float(repeat))
        | {"case": name, "burst_gib": 1.0, "burst_bytes": 100, "repeat": repeat}
        for name in ("upstream", "fork")
        for repeat in range(3)
    ]
    document = _loaded(tmp_path, host_heap.host_heap_result(RECORD, runs, {}))
    fork = result.find_case(document, "fork-1gib")
    assert fork["figures"]["kept_after_trim"] == 1.0 and fork["headline"]
    assert fork["figures"]["kept_fraction"] == 0.01 and len(fork["series"]["runs"]) == 3


def test_build_speed_steps_keep_their_runs(tmp_path: Path) -> None:
    plain = build_speed.step("plain_read", {"seconds": 0.15}, series={"runs_s": [0.1, 0.2]})
    pip = build_speed.step("pip_wheel", {"seconds": 3.0, "exit_status": 0}, command="pip wheel")
    made = result.result("build-speed", "t", RECORD, build_speed.MEASURES, [plain, pip])
    document = _loaded(tmp_path, made)
    plain = result.find_case(document, "plain-read")
    assert plain["figures"]["seconds"] == 0.15 and plain["series"] == {"runs_s": [0.1, 0.2]}
    assert result.find_case(document, "pip-wheel")["parameters"] == {"command": "pip wheel"}


def test_steady_loop_compares_both_settings_per_block(tmp_path: Path) -> None:
    runs = [
        {"block_mib": 4, "case": case, "repeat": repeat, "median_s": seconds * (repeat + 1)}
        for case, seconds in (("dynamic", 0.001), ("fixed", 0.004))
        for repeat in range(3)
    ]
    made = steady_loop.steady_loop_result(RECORD, runs, {})
    figures = result.find_case(_loaded(tmp_path, made), "4mib")["figures"]
    assert figures == {"dynamic_s": 0.002, "fixed_s": 0.008, "ratio": 4.0}
