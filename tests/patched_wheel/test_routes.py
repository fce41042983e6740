"""Every route into the build is one function: pip, ``python -m build``, uv and the CLI give the
same bytes, and the backend leaves nothing behind in the tree.

The routes run without build isolation (the isolated routes are the same hooks after pip or uv
installs ``build-system.requires``; ``test_entry_points`` runs them), and from an official wheel
given by ``TORCHTRT_BASE_WHEEL``, so that this file needs no index.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from patched_wheel.__main__ import main
from patched_wheel.backend import EDITABLE_REFUSED, build_sdist
from patched_wheel.paths import REPOSITORY
from patched_wheel.provenance import REVISION_FILE, source_revision
from wheel_helpers import LABEL

RELEASE = "2.13.0"


def _run(command: List[str], env: Dict[str, str], cwd: Path = REPOSITORY) -> str:
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stdout + completed.stderr


def _one_wheel(folder: Path) -> Path:
    (wheel,) = folder.glob("*.whl")
    return wheel


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _installed_matches(target: Path, wheel: Path) -> str:
    """The sha256 of ``wheel`` where every file it installed into ``target`` holds the wheel's
    bytes (``pip install .`` and ``uv pip install .`` leave a tree, not a wheel)."""
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if "/RECORD" not in name and not name.endswith("/"):
                assert (target / name).read_bytes() == archive.read(name), name
    return _sha256(wheel)


ROUTES: Dict[str, Callable[[Path, Dict[str, str]], List[str]]] = {
    "pip wheel .": lambda out, env: [sys.executable, "-m", "pip", "wheel", ".", "--no-deps"]
    + ["--no-build-isolation", "-w", str(out)],
    "python -m build (sdist, then wheel)": lambda out, env: [sys.executable, "-m", "build"]
    + ["--no-isolation", "--outdir", str(out), "."],
    "python -m build --wheel": lambda out, env: [sys.executable, "-m", "build", "--wheel"]
    + ["--no-isolation", "--outdir", str(out), "."],
    "uv build (sdist, then wheel)": lambda out, env: ["uv", "build", "--no-build-isolation"]
    + ["--python", sys.executable, "--out-dir", str(out), "."],
    "uv build --wheel": lambda out, env: ["uv", "build", "--wheel", "--no-build-isolation"]
    + ["--python", sys.executable, "--out-dir", str(out), "."],
}


def test_every_route_gives_the_same_bytes(
    tmp_path: Path, base_wheels: Dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    base = base_wheels[RELEASE]
    env = dict(os.environ, TORCHTRT_BASE_WHEEL=str(base), UV_OFFLINE="1")
    tree_before = sorted(p.name for p in REPOSITORY.iterdir())
    assert main(["build", "--base-wheel", str(base), "--out", str(tmp_path / "cli")]) == 0
    expected = _sha256(_one_wheel(tmp_path / "cli"))
    digests = {"CLI build": expected}
    for number, (route, command) in enumerate(ROUTES.items()):
        out = tmp_path / f"route-{number}"
        output = _run(command(out, env), env)
        assert ".tmp" not in output, output  # no temporary path shown as the wheel's place
        digests[route] = _sha256(_one_wheel(out))
    for installer in (
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation"],
        ["uv", "pip", "install", "--no-deps", "--no-build-isolation", "--python", sys.executable],
    ):
        target = tmp_path / f"target-{installer[0].rsplit('/', 1)[-1]}"
        _run(installer + ["--target", str(target), "."], env)
        digests[" ".join(installer[:3])] = _installed_matches(target, _one_wheel(tmp_path / "cli"))
    assert digests == {route: expected for route in digests}
    assert sorted(p.name for p in REPOSITORY.iterdir()) == tree_before  # no egg-info, no build/
    assert _one_wheel(tmp_path / "cli").name == base.name.replace(RELEASE, f"{RELEASE}+{LABEL}")


def test_the_sdist_is_reproducible_and_names_its_revision(
    tmp_path: Path, base_wheels: Dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHTRT_BASE_WHEEL", str(base_wheels[RELEASE]))
    first = tmp_path / "a" / build_sdist(str(tmp_path / "a"))
    second = tmp_path / "b" / build_sdist(str(tmp_path / "b"))
    assert first.name == f"torch_tensorrt-{RELEASE}+{LABEL}.tar.gz"
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as archive:
        archive.extractall(tmp_path / "tree", filter="data")
    tree = tmp_path / "tree" / first.name[: -len(".tar.gz")]
    assert (tree / REVISION_FILE).is_file()
    assert source_revision(tree) == source_revision()
    assert not (tree / "setup.py").exists()
    assert (tree / "tools" / "patched_wheel" / "official_wheels.lock.json").is_file()


def test_an_editable_install_is_refused_with_a_reason(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."]
        + ["--target", str(tmp_path / "target")],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode != 0
    assert EDITABLE_REFUSED in completed.stdout + completed.stderr
    assert not (tmp_path / "target").exists()
