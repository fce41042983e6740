"""The compile benchmark's parts that hold on any machine: the analysis of samples and marks,
the sampler process, the plans' cases, and the phase marks (upstream's package, which needs
TensorRT, is stood in for by a module of its own name; the code under test is the benchmark's).
The compile itself runs on the GPU machine only (``python -m benchmarks run compile``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, List

import pytest

from benchmarks.compile import case, run, sampler
from benchmarks.compile.timeline import Mark, analyse

REPOSITORY = Path(__file__).resolve().parents[2]
W = 1000


def test_peaks_are_above_the_values_before_and_at_one_instant() -> None:
    samples = [(0.0, 100, 50), (1.0, 400, 50), (2.0, 300, 300), (3.0, 100, 60)]
    found = analyse(samples, [], before=(100, 50), window=(0.0, 3.0), weights_bytes=W)
    # host peaks at 1.0, GPU at 2.0; their sum peaks at 2.0 (550 above 150), not 300 + 250
    assert found["figures"] == {
        "host_peak_w": 0.3,
        "gpu_peak_w": 0.25,
        "sum_peak_w": 0.45,
        "host_peak_bytes": 300,
        "gpu_peak_bytes": 250,
        "sum_peak_bytes": 450,
    }


def test_the_peak_is_named_by_the_shortest_phase_around_it() -> None:
    samples = [(t / 10, 100 + (900 if t == 15 else 0), 0) for t in range(30)]
    marks = [Mark("compile", 0.0, 2.9), Mark("module creation", 1.4, 1.6), Mark("build", 0.2, 1.0)]
    found = analyse(samples, marks, before=(100, 0), window=(0.0, 2.9), weights_bytes=W)
    assert found["peak_phase"] == "module creation"
    phases = {p["name"]: p for p in found["phases"]}
    assert phases["module creation"]["host_peak_w"] == 0.9
    assert phases["build"]["host_peak_w"] == 0.0
    assert [p["name"] for p in found["phases"]] == ["compile", "build", "module creation"]


def test_a_phase_starts_at_the_last_sample_before_it() -> None:
    samples = [(0.0, 100, 0), (1.0, 600, 0), (2.0, 600, 0)]
    found = analyse(
        samples, [Mark("late", 1.5, 1.7)], before=(100, 0), window=(0.0, 2.0), weights_bytes=W
    )
    (phase,) = found["phases"]
    assert phase["host_start_w"] == 0.5 and phase["host_peak_w"] == 0.5  # no sample inside


def test_the_timeline_is_thinned_but_keeps_every_peak() -> None:
    samples = [(i / 1000, i % 7, 0) for i in range(10_000)]
    samples[4321] = (4.321, 10**6, 10**6)
    found = analyse(samples, [], before=(0, 0), window=(0.0, 10.0), weights_bytes=W)
    timeline = found["timeline"]
    assert len(timeline["t_s"]) <= 1600
    assert max(timeline["host_bytes"]) == 10**6 and max(timeline["gpu_bytes"]) == 10**6


def test_no_sample_inside_the_compile_is_an_error() -> None:
    with pytest.raises(ValueError, match="no memory sample"):
        analyse([(0.0, 1, 1)], [], before=(1, 1), window=(5.0, 6.0), weights_bytes=W)


def test_the_sampler_sees_another_process_grow(tmp_path: Path) -> None:
    grows = """
import time
time.sleep(0.4)
b = bytearray(300 << 20)
b[::4096] = b'x' * len(b[::4096])
time.sleep(0.6)
"""
    grower = subprocess.Popen([sys.executable, "-c", grows])
    out = tmp_path / "samples.txt"
    watcher = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.compile.sampler", str(grower.pid), "0.01", str(out)],
        cwd=REPOSITORY,
    )
    grower.wait(timeout=30)
    assert watcher.wait(timeout=30) == 0  # it stops by itself when the process exits
    rows = sampler.read_samples(out)
    hosts = [host for _, host, _ in rows]
    assert max(hosts) - hosts[0] > 250 << 20
    assert [t for t, _, _ in rows] == sorted(t for t, _, _ in rows)
    assert not list(tmp_path.glob(".*partial"))


def test_the_official_wheel_skips_trim_off_and_repeats_alternate_the_order() -> None:
    plan = [run.Setting("mlp-3gib", "on"), run.Setting("mlp-3gib", "on", "off")]
    cases = run.cases_of(plan, ["official", "fork"], repeats=2)
    assert [(c["parameters"]["wheel"], c["parameters"]["trim"]) for c in cases] == [
        ("official", "default"),
        ("fork", "default"),
        ("fork", "off"),
        ("fork", "default"),
        ("official", "default"),
        ("fork", "off"),
    ]
    assert len({c["id"] for c in cases}) == len(cases)
    assert [c["headline"] for c in cases[:3]] == [True, True, False]


def test_every_plan_names_known_models() -> None:
    for settings in run.PLANS.values():
        assert {s.model for s in settings} <= set(case.MODELS)


def test_marks_wrap_upstream_functions_wherever_they_were_imported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, caller = ModuleType("torch_tensorrt.stand_in"), ModuleType("torch_tensorrt.caller")

    def build(x: int) -> int:
        time.sleep(0.01)
        return x + 1

    home.build = build  # type: ignore[attr-defined]
    caller.build = build  # type: ignore[attr-defined]  # as "from .stand_in import build" binds it
    monkeypatch.setitem(sys.modules, home.__name__, home)
    monkeypatch.setitem(sys.modules, caller.__name__, caller)
    phases = [("build", "torch_tensorrt.stand_in", "build"), ("absent", "no.such", "f")]
    monkeypatch.setattr(case, "PHASES", phases)
    marks: List[Any] = []
    assert case.install_marks(marks) == ["build"]
    assert caller.build(1) == 2 and home.build(2) == 3  # type: ignore[attr-defined]
    assert [m.name for m in marks] == ["build", "build"]
    assert all(m.end - m.start >= 0.009 for m in marks)
    assert caller.build.__name__ == "build"  # type: ignore[attr-defined]


def test_the_benchmark_is_run_through_the_dispatcher() -> None:
    helped = subprocess.run(
        [sys.executable, "-m", "benchmarks", "run", "compile", "--help"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert helped.returncode == 0, helped.stderr
    assert "--plan {smoke,record,llama-8b,mlp-24gib,settings}" in helped.stdout
