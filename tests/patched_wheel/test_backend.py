"""The routes into the build: the CLI, pip, python -m build and uv give the same bytes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Dict

import pytest
from patched_wheel.config import DEFAULT_RELEASE, REPOSITORY
from uv import find_uv_bin

from tests.patched_wheel.helpers import names


@pytest.mark.network
def test_every_route_gives_the_same_bytes(base_wheels: Dict[str, Path], tmp_path: Path) -> None:
    base = base_wheels[DEFAULT_RELEASE]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHTRT_BASE_")}
    env.update(TORCHTRT_BASE_WHEEL=str(base))
    routes = {
        "cli": [sys.executable, "tools/patched_wheel", "build", "--base-wheel", str(base), "--out"],
        "pip": [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "-q", "-w"],
        "build": [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir"],
        "uv": [find_uv_bin(), "build", "--wheel", "-q", "--out-dir"],
    }
    digests = {}
    for name, command in routes.items():
        out = tmp_path / name
        subprocess.run(
            command + [str(out)], cwd=REPOSITORY, env=env, check=True, capture_output=True
        )
        (wheel,) = out.glob("*.whl")
        digests[name] = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert len(set(digests.values())) == 1, digests


def test_the_sdist_carries_the_revision_file_with_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHTRT_BASE_VERSION", DEFAULT_RELEASE)
    from patched_wheel.backend import build_sdist

    name = build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / name) as archive:
        member = archive.extractfile(f"{name[: -len('.tar.gz')]}/.source-revision.json")
        assert member is not None and b'"files"' in member.read()


def test_editable_installs_are_refused_with_what_to_run() -> None:
    from patched_wheel.backend import build_editable

    with pytest.raises(SystemExit) as refused:
        build_editable(".")
    assert names(refused.value.code, "'pip install .'").startswith("error: ")
