"""matrix: every locked base of the request patched, its table, and its index of releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Tuple

from helpers import run_tool

Released = Tuple[Path, Path, Path, Path]


def test_the_matrix_builds_the_locked_bases_and_indexes_releases(released: Released) -> None:
    repo, base, lock, cache = released
    out = repo.parent / "matrix"
    done = run_tool(repo, "matrix", "--release", "2.99.0", "--platform", "manylinux_2_28_x86_64",
                    "--python", "3.11", "--python", "3.12", "--lock", str(lock), "--cache",
                    str(cache), "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "supported_matrix.json").read_text())
    assert [w["python"] for r in document["releases"] for w in r["wheels"]] == ["3.11"]
    assert "+memfix1." in (out / "simple" / "torch-tensorrt" / "index.html").read_text()


def test_a_development_matrix_gets_no_index(released: Released) -> None:
    repo, base, lock, cache = released
    with (repo / "py/torch_tensorrt/dynamo/utils.py").open("a") as overlay:
        overlay.write("\n# an edit\n")
    out = repo.parent / "matrix"
    done = run_tool(repo, "matrix", "--release", "2.99.0", "--platform", "manylinux_2_28_x86_64",
                    "--python", "3.11", "--lock", str(lock), "--cache", str(cache), "--out", str(out))  # fmt: skip
    assert done.returncode == 0 and "is a development build, which no index lists" in done.stderr
    assert not (out / "simple").exists()


def test_a_release_the_lock_lacks_is_told_before_any_network(tmp_path: Path) -> None:
    from patched_wheel.config import BaseRequest
    from patched_wheel.lock import load_lock

    lock = load_lock()
    assert "older than 2.8.0" in lock.unknown_request(BaseRequest("2.7.0"))
    assert "not built for 'macosx_11_0_arm64'" in lock.unknown_request(
        BaseRequest("2.14.0", "macosx_11_0_arm64", "3.12")
    )
    assert "set TORCHTRT_BASE_PYTHON" in lock.unknown_request(
        BaseRequest("2.10.0", "manylinux_2_28_x86_64", "3.9")
    )
