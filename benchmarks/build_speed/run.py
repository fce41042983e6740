"""How long the patched-wheel tool takes, against a plain read of the base, side by side.

Usage, from the repository root::

    python -m benchmarks run build-speed [--repeat 7] [--skip-matrix] [--with-tests]

Figures (issue 24's four, each with its ratio or target):

* ``plain_read``: the official wheel of the default release for this Python and platform,
  cached, opened with ``zipfile`` and every member read and hashed (sha256): the floor;
* ``one_wheel``: that base read, checked against the lock and patched, in process, the
  call-site cache cleared first (as a fresh process has it) (target: at most 1.5 x
  ``plain_read``); runs alternate with ``plain_read`` so both see one machine;
* ``verify``: ``verify`` of the released patched wheel in a temporary repository whose main
  branch holds this tree's tool and overlay (target: at most 2 x ``plain_read``);
* ``matrix``: every wheel the lock holds for each distribution's supported releases,
  platforms and Pythons, as ``matrix`` builds them without options, bases cached (target: the
  75 wheels of then in at most 15 s, so 0.2 s a wheel);
* ``pip_wheel``: ``pip wheel . --no-deps`` end to end, base cached (pip's isolated build);
* ``test_command`` (``--with-tests``): the README's test command, ``python -m pytest``
  (target: at most 90 s on this 2-core machine type).

Prints a table and writes ``benchmarks/results/build_speed.json`` through the harness (with
its provenance). Not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from patched_wheel.config import (
    DEFAULT_CACHE_DIR,
    DEFAULT_RELEASE,
    DISTRIBUTIONS,
    OVERLAY_PATH,
    PLATFORMS,
    PYTHONS,
    TOOL_PATH,
)
from patched_wheel.lock import load_lock, open_base
from patched_wheel.matrix import build_matrix, requests_for
from patched_wheel.patch import build_patched_wheel
from patched_wheel.settings import BaseChoice, BaseRequest
from patched_wheel.splice import _calls as call_sites_cache
from patched_wheel.verify import verify_file

from evidence import REPOSITORY, RESULTS, result
from evidence.result import Measure

ROOT = REPOSITORY
RESULTS = RESULTS / "build_speed.json"


def _median(runs: List[float]) -> float:
    return round(statistics.median(runs), 4)


def plain_read(path: Path) -> None:
    """The floor: every member of the wheel read and hashed with zipfile."""
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            hashlib.sha256(archive.read(info)).digest()


def _timed(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _release_repository(folder: Path) -> Path:
    """This tree's tool and overlay committed on ``main`` of a new repository, released."""
    repo = folder / "repo"
    shutil.copytree(
        ROOT / TOOL_PATH, repo / TOOL_PATH, ignore=shutil.ignore_patterns("__pycache__")
    )
    (repo / OVERLAY_PATH).parent.mkdir(parents=True)
    shutil.copy(ROOT / OVERLAY_PATH, repo / OVERLAY_PATH)
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    tool = [sys.executable, str(repo / TOOL_PATH)]
    subprocess.run(tool + ["register-overlay"], check=True, capture_output=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "release"], check=True)
    return repo


def time_side_by_side(repeat: int) -> List[Dict[str, Any]]:
    """plain read, one wheel, verify: alternated, ``repeat`` runs each."""
    lock = load_lock()
    request = BaseRequest(DEFAULT_RELEASE)

    def base_of() -> Any:
        return open_base(BaseChoice(request), lock=lock, cache_dir=DEFAULT_CACHE_DIR)

    base = base_of()
    path = DEFAULT_CACHE_DIR / base.filename
    runs: Dict[str, List[float]] = {"plain_read": [], "one_wheel": [], "verify": []}
    with tempfile.TemporaryDirectory() as folder:
        repo = _release_repository(Path(folder))
        tool = [sys.executable, str(repo / TOOL_PATH), "build"]
        tool += ["--base-wheel", str(path), "--out", folder]
        built = subprocess.run(tool, check=True, capture_output=True, text=True)
        released = Path(built.stdout.strip())
        for _ in range(repeat):
            call_sites_cache.cache_clear()  # each build as a fresh process makes it
            runs["plain_read"].append(_timed(lambda: plain_read(path)))
            one = Path(folder) / "one"
            runs["one_wheel"].append(_timed(lambda: build_patched_wheel(base_of(), out_dir=one)))
            call_sites_cache.cache_clear()
            verification: List[Any] = []
            runs["verify"].append(
                _timed(
                    lambda: verification.append(verify_file(released, lock=lock, repository=repo))
                )
            )
            assert verification[0].verified, verification[0].verdict
    floor = _median(runs["plain_read"])
    cases = []
    for name, times in runs.items():
        figures: Dict[str, Any] = {"seconds": _median(times)}
        if name == "plain_read":
            figures["base_mib"] = round(path.stat().st_size / 2**20, 1)
        else:
            figures["ratio_to_plain_read"] = round(_median(times) / floor, 2)
            figures["target_ratio"] = TARGET_RATIOS[name]
        runs_s = [round(t, 4) for t in times]
        cases.append(step(name, figures, series={"runs_s": runs_s}))
    cases[0]["parameters"]["base_wheel"] = base.filename
    return cases


def time_matrix() -> Dict[str, Any]:
    """The matrix as ``python tools/patched_wheel matrix`` builds it without options: every
    distribution's supported releases on every platform and Python the lock holds. The
    target was set for its 75 wheels of then (15 s), so it is also given per wheel."""
    requests = requests_for(None, PLATFORMS, PYTHONS, DISTRIBUTIONS)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        entries = build_matrix(
            requests, out_dir=Path(out), cache_dir=DEFAULT_CACHE_DIR, lock=load_lock()
        )
        total = round(time.perf_counter() - start, 2)
    built = [e for e in entries if e.error is None]
    figures = {"wheels": len(built), "failed": len(entries) - len(built), "seconds": total}
    figures.update(target_s=15, target_wheels=75)
    figures["build_s_per_wheel"] = round(total / max(1, len(built)), 3)
    command = "build_matrix (python tools/patched_wheel matrix), bases cached"
    return step("matrix", figures, command=command)


def time_command(name: str, command: List[str], what: str) -> Dict[str, Any]:
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 2)
    figures = {"seconds": seconds, "exit_status": completed.returncode}
    return step(name, figures, command=what)


MEASURES = (
    Measure("seconds", "time", "s", "wall time (the median where the step was repeated)"),
    Measure(
        "ratio_to_plain_read",
        "ratio to the plain read",
        "x",
        "time over the plain read's, both measured side by side",
    ),
    Measure("target_ratio", "target ratio", "x", "the ratio allowed"),
    Measure("target_s", "target", "s", "the time allowed"),
    Measure("wheels", "wheels", "", "wheels built"),
    Measure("failed", "failed", "", "wheels that failed"),
    Measure(
        "target_wheels",
        "wheels of the target",
        "",
        "the number of wheels the matrix's target was set for",
    ),
    Measure("build_s_per_wheel", "a wheel", "s", "time per wheel"),
    Measure("exit_status", "exit status", "", "the command's"),
    Measure("base_mib", "base size", "MiB", "the base wheel's size"),
)
# Each step of the run, by name: its label.
STEPS = {
    "plain_read": "plain read of the base: zipfile, every member read and hashed",
    "one_wheel": "one patched wheel from that base, cached",
    "verify": "`verify` of the released patched wheel, rebuilt in process",
    "matrix": "every wheel of the supported matrix, bases cached",
    "pip_wheel": "`pip wheel . --no-deps -w DIR`, base cached (pip's isolated build included)",
    "test_command": "the README's test command, `python -m pytest`",
}
TARGET_RATIOS = {"one_wheel": 1.5, "verify": 2.0}


def step(name: str, figures: Dict[str, Any], series: Any = None, **parameters: Any) -> Any:
    """One step's case of the result file."""
    label, case_id = STEPS[name], name.replace("_", "-")
    return result.case(case_id, label, figures, headline=True, parameters=parameters, series=series)


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Time every step and write the result file."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks run build-speed", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--skip-matrix", action="store_true")
    parser.add_argument("--with-tests", action="store_true", help="also time python -m pytest")
    args = parser.parse_args(argv)
    record = result.provenance()
    cases = time_side_by_side(args.repeat)
    with tempfile.TemporaryDirectory() as out:
        pip = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w", out]
        cases.append(time_command("pip_wheel", pip, "pip wheel . --no-deps -w <tmp>"))
    if not args.skip_matrix:
        cases.append(time_matrix())
    if args.with_tests:
        pytest = [sys.executable, "-m", "pytest", "-q"]
        cases.append(time_command("test_command", pytest, "python -m pytest"))
        cases[-1]["figures"]["target_s"] = 90
    title = "Time of building patched wheels, against a plain read of the base wheel"
    document = result.result("build-speed", title, record, MEASURES, cases)
    for entry in document["cases"]:
        print(f"{entry['label'][:60]:<60} {entry['figures']['seconds']:8.3f} s")
    result.save(RESULTS, document)
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(run())
