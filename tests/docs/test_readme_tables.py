"""The README's figures are the result files' figures: ``benchmarks/readme_tables.py``.

The README's tables of measured figures are generated between markers; these tests fail when
the README differs from what the generator makes of ``benchmarks/results/`` (rerun
``python benchmarks/readme_tables.py``), when a figure is typed into the README's prose
outside those tables, and when the generator stops drawing the cases a result file holds.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict

import pytest
from wheel_helpers import LABEL

REPOSITORY = Path(__file__).resolve().parents[2]
GENERATOR = REPOSITORY / "benchmarks" / "readme_tables.py"
README = REPOSITORY / "README.md"


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_tables", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("readme_tables", module)
    spec.loader.exec_module(module)
    return module


tables = _load_generator()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), *args], capture_output=True, text=True, timeout=60
    )


def _outside_tables(text: str) -> str:
    """The README without its generated blocks and its indented or fenced code."""
    for name in tables.TABLES:
        start, end = tables.markers(name)
        text = text[: text.find(start)] + text[text.find(end) + len(end) :]
    text = re.sub(
        r"<!-- supported-matrix:start -->.*<!-- supported-matrix:end -->", "", text, flags=re.S
    )
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.startswith("    "))


def test_readme_tables_match_the_results() -> None:
    current = README.read_text(encoding="utf-8")
    expected = tables.render_readme(current)
    assert (
        tables.drifted(current, expected) == []
    ), "README.md's tables differ from benchmarks/results; run python benchmarks/readme_tables.py"
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
    assert result.stderr == (
        "error: README.md: tables differ from the results: host-heap; "
        "run python benchmarks/readme_tables.py\n"
    )
    assert readme.read_text(encoding="utf-8") != text, "--check must not write"


def test_rewrite_restores_the_tables(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    text = README.read_text(encoding="utf-8")
    start, end = tables.markers("offload-memory")
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


def test_new_offload_cases_become_rows(results: Path) -> None:
    """A model the files did not hold before shows up in both offload tables."""
    memory = json.loads((results / "offload.json").read_text(encoding="utf-8"))
    memory["cases"].append(_offload_case())
    (results / "offload.json").write_text(json.dumps(memory), encoding="utf-8")
    speed = {
        "benchmark": "offload",
        "command": "/opt/venv/bin/python benchmarks/offload/run.py --no-probes --out /home/u/x.json",
        "cases": [_offload_case(probes=False), _offload_case(probes=False, GBps=18.25)],
    }
    (results / "offload_shapes.json").write_text(json.dumps(speed), encoding="utf-8")

    memory_rows = tables.offload_memory(results).rows
    assert ["16 GiB many-small", "not run", "not run", "0.30 GiB (0.019 W)", "not run"] in (
        memory_rows
    )
    speed_table = tables.offload_speed(results)
    assert ["16 GiB many-small", "not run", "not run", "17.18, 18.25 GB/s", "not run"] in (
        speed_table.rows
    )
    probed = {
        "benchmark": "offload",
        "cases": [
            _offload_case(mix="decoder-7b", strategy="upstream", overshoot_bytes=16 * 1024**3)
        ],
    }
    (results / "offload_decoders.json").write_text(json.dumps(probed), encoding="utf-8")
    ceilings = {"benchmark": "offload_ceilings", "decomposition_GBps": {"copy": 23.9}}
    (results / "offload_ceilings.json").write_text(json.dumps(ceilings), encoding="utf-8")
    assert "offload_ceilings.json" not in [path.name for path in tables.offload_files(results)]
    memory_table = tables.offload_memory(results)
    assert ["16 GiB decoder-7b", "16.00 GiB (0.019 W)", "not run", "not run", "not run"] in (
        memory_table.rows
    )
    assert "From `benchmarks/results/offload_decoders.json`." in memory_table.notes
    assert (
        "From `benchmarks/results/offload_shapes.json`, written by `python "
        "benchmarks/offload/run.py --no-probes --out benchmarks/results/offload_shapes.json`."
    ) in speed_table.notes


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
            "python3.12 benchmarks/build_speed.py ",
            "python benchmarks/build_speed.py",
            id="versioned-interpreter",
        ),
    ],
)
def test_portable_command(recorded: str, portable: str) -> None:
    assert tables.portable_command(recorded, "benchmarks/results/offload.json") == portable
