"""How long the patched-wheel build takes: one wheel, ``pip wheel .``, and the whole matrix.

Usage (from the repository root)::

    python benchmarks/build_speed.py [--repeat 5] [--skip-matrix]

Figures:

* ``one_wheel``: the official wheel of the default release for this Python and platform,
  already downloaded, read and verified (:func:`read_base`) and patched
  (:func:`build_patched_wheel`), in process (median and range of ``--repeat`` runs);
* ``download``: pip downloading that base into an empty folder, once, its HTTP cache off;
* ``pip_wheel``: ``pip wheel . --no-deps -w <tmp>`` end to end, once (isolated build
  environment included, base cached);
* ``matrix``: every supported release x platform x Python PyPI has, bases cached.

Prints a table and writes ``benchmarks/results/build_speed.json``. Not a test: the figures
depend on the machine and the network.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import harness  # noqa: E402  (benchmarks/harness.py: provenance and the atomic save)
from patched_wheel.base import read_base  # noqa: E402
from patched_wheel.build import build_patched_wheel  # noqa: E402
from patched_wheel.download import pip_download  # noqa: E402
from patched_wheel.lock import load_lock  # noqa: E402
from patched_wheel.matrix import build_matrix, requests_for  # noqa: E402
from patched_wheel.overlay import read_overlay  # noqa: E402
from patched_wheel.paths import DEFAULT_CACHE_DIR  # noqa: E402
from patched_wheel.policy import (  # noqa: E402
    DEFAULT_RELEASE,
    PLATFORMS,
    PYTHONS,
    SUPPORTED_RELEASES,
)
from patched_wheel.request import BaseRequest  # noqa: E402
from patched_wheel.resolve import ensure_cached  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "build_speed.json"

SOURCE_BUILD_NOTE = (
    "Not measured here: a source build of upstream needs Bazel, the CUDA toolkit, libtorch "
    "and the TensorRT SDK, and compiles the C++ runtime and converters; none of that can be "
    "installed on this machine. The patched build needs Python, pip and packaging only."
)


def _seconds(start: float) -> float:
    return round(time.perf_counter() - start, 3)


def time_one_wheel(repeat: int) -> Dict[str, object]:
    lock = load_lock()
    base = ensure_cached(BaseRequest(DEFAULT_RELEASE), lock=lock, cache_dir=DEFAULT_CACHE_DIR)
    runs: List[float] = []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(repeat):
            start = time.perf_counter()
            wheel = read_base(base, lock=lock)
            build_patched_wheel(wheel, out_dir=Path(out), overlay=read_overlay())
            runs.append(_seconds(start))
    return {
        "base_wheel": base.name,
        "base_mib": round(base.stat().st_size / 2**20, 1),
        "what": "read_base (read once, lock, every check) + build_patched_wheel, in process",
        "runs_s": runs,
        "median_s": round(statistics.median(runs), 3),
    }


def time_download() -> Dict[str, object]:
    """From the index into an empty folder, as the build downloads (pip's cache off)."""
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        _, name = pip_download(BaseRequest(DEFAULT_RELEASE), Path(folder))
        return {"base_wheel": name, "seconds": _seconds(start), "pip_cache": "off"}


def time_pip_wheel() -> Dict[str, object]:
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-w", out, "-q"]
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True)
        return {"command": "pip wheel . --no-deps -w <tmp>", "seconds": _seconds(start)}


def time_matrix() -> Dict[str, object]:
    requests = requests_for(SUPPORTED_RELEASES, PLATFORMS, PYTHONS)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        entries = build_matrix(
            requests, out_dir=Path(out), cache_dir=DEFAULT_CACHE_DIR, lock=load_lock()
        )
        total = _seconds(start)
    built = [e for e in entries if e.error is None]
    return {
        "command": "python tools/patched_wheel matrix (bases cached, index listed once)",
        "wheels": len(built),
        "failed": len(entries) - len(built),
        "total_s": total,
        "build_s_per_wheel": round(sum(e.seconds for e in built) / max(1, len(built)), 3),
    }


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-matrix", action="store_true")
    args = parser.parse_args()
    record = harness.provenance()

    figures: Dict[str, object] = {
        "one_wheel": time_one_wheel(args.repeat),
        "download": time_download(),
        "pip_wheel": time_pip_wheel(),
    }
    if not args.skip_matrix:
        figures["matrix"] = time_matrix()

    one = figures["one_wheel"]
    assert isinstance(one, dict)
    rows = [
        ("one patched wheel (base cached), median", f"{one['median_s']:.2f} s"),
        ("download of the base by pip", f"{figures['download']['seconds']:.2f} s"),  # type: ignore[index]
        ("pip wheel . end to end (base cached)", f"{figures['pip_wheel']['seconds']:.2f} s"),  # type: ignore[index]
    ]
    if "matrix" in figures:
        matrix = figures["matrix"]
        assert isinstance(matrix, dict)
        rows.append(
            (
                f"whole matrix, {matrix['wheels']} wheels (bases cached)",
                f"{matrix['total_s']:.1f} s",
            )
        )
        rows.append(
            ("  build time per wheel in the matrix", f"{matrix['build_s_per_wheel']:.2f} s")
        )
    width = max(len(label) for label, _ in rows)
    for label, value in rows:
        print(f"{label:<{width}}  {value:>9}")

    document = {
        "platform": platform.platform(),
        "versions": {name: _version(name) for name in ("pip", "setuptools", "packaging")},
        "figures": figures,
        "source_build_of_upstream": SOURCE_BUILD_NOTE,
    }
    harness.save_result(RESULTS, "build_speed", document, record)
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
