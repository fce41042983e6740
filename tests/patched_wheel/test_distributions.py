"""Both distributions (``torch-tensorrt``, ``torch-tensorrt-rtx``) and the releases where only
some fixes apply: chosen, built, recorded, verified, listed on their own index pages."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Tuple

import pytest
from patched_wheel.config import DEFAULT_RELEASE, DISTRIBUTIONS, FIX_NAMES, REPOSITORY, TARGET
from patched_wheel.patch import patch_wheel
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.verify import read_provenance
from patched_wheel.wheel import BaseWheel
from uv import find_uv_bin

from tests.patched_wheel.helpers import (
    ORIGIN,
    OVERLAY,
    RELEASED,
    RTX,
    UTILS,
    make_wheel,
    names,
    pip_environment,
    run_tool,
    source_build,
    write_lock,
)
from tests.patched_wheel.wheel_helpers import fetch

# An upstream utils.py of 2.8 and 2.9 in miniature: deallocate_module, no host-trim hook.
UTILS_2_8 = b"""def deallocate_module(module, delete_module=True):
    del module
"""


def test_a_release_with_only_the_offload_hook_carries_only_that_fix(tmp_path: Path) -> None:
    base = make_wheel(tmp_path / "in", version="2.98.0", utils=UTILS_2_8)
    lock = write_lock(tmp_path / "lock.json", base)
    build = ["build", "--base-wheel", str(base), "--lock", str(lock), "--out", str(tmp_path)]
    done = run_tool(REPOSITORY, *build)
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    assert read_provenance(patched.read_bytes(), patched.name).fixes == ("offload",)
    # What it carries and what it does not, in the line the provenance command prints.
    printed = run_tool(REPOSITORY, "provenance", str(patched)).stdout.splitlines()
    (fixes,) = [line for line in printed if line.startswith("fixes:")]
    names(fixes, *FIX_NAMES)


def test_each_distribution_has_its_own_page_and_each_installer_gets_its_own(
    both: Tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, lock, cache = both
    out = tmp_path / "matrix"
    wheels = ["--release", "2.99.0", "--platform", "manylinux_2_28_x86_64", "--python", "3.11"]
    folders = ["--lock", str(lock), "--cache", str(cache), "--out", str(out)]
    done = run_tool(repo, "matrix", *wheels, *folders)
    assert done.returncode == 0, done.stderr
    document = json.loads((out / "supported_matrix.json").read_text())
    assert [(r["distribution"], r["fixes"]) for r in document["releases"]] == [
        (d, ["offload", "host-trim", "input-copy"]) for d in DISTRIBUTIONS
    ]
    pages = {p: (out / "simple" / p / "index.html").read_text() for p in DISTRIBUTIONS}
    assert f"{RTX}-2.99.0+memfix1." in pages["torch-tensorrt-rtx"]
    assert f"{RTX}-" not in pages["torch-tensorrt"]
    # The verdict of every listed wheel, the RTX one too, is a rebuild's.
    rtx_wheel = next(out.glob(f"{RTX}-*.whl"))
    verdict = run_tool(repo, "verify", str(rtx_wheel), "--lock", str(lock), "--cache", str(cache))
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    names(verdict.stdout.splitlines()[-1], "verified", "torch-tensorrt-rtx")
    with zipfile.ZipFile(rtx_wheel) as archive:
        sbom = archive.read(next(n for n in archive.namelist() if n.endswith(".cdx.json")))
    assert json.loads(sbom)["metadata"]["component"]["name"] == "torch-tensorrt-rtx"
    # pip and uv, one index holding both pages, a pin on each: each gets its own project.
    index = (out / "simple").as_uri()
    for project, prefix in (("torch-tensorrt", "torch_tensorrt-2"), ("torch-tensorrt-rtx", RTX)):
        folder = tmp_path / f"pip-{project}"
        pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--index-url", index, "-d"]
        pip += [str(folder), "--only-binary=:all:", "--python-version", "3.11", "--platform"]
        pip += ["manylinux_2_28_x86_64", f"{project}==2.99.0"]
        subprocess.run(pip, check=True, capture_output=True, env=pip_environment())
        assert [p.name.startswith(prefix) for p in folder.iterdir()] == [True]
        uv = [find_uv_bin(), "pip", "compile", "-", "--no-deps", "--index-url"]
        uv += [index, "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"]
        uv += ["--no-header", "--no-annotate"]
        pin = f"{project}==2.99.0\n"
        resolved = subprocess.run(uv, input=pin, check=True, text=True, capture_output=True)
        assert resolved.stdout.split() == [f"{project}==2.99.0+{RELEASED}"], resolved.stdout


@pytest.mark.network
def test_the_official_rtx_wheel_patches_as_its_own_project(tmp_path: Path) -> None:
    base = fetch(DEFAULT_RELEASE, distribution="torch-tensorrt-rtx")
    with zipfile.ZipFile(base) as rtx, zipfile.ZipFile(fetch(DEFAULT_RELEASE)) as plain:
        assert rtx.read(TARGET) == plain.read(TARGET)
    build = ["build", "--distribution", "torch-tensorrt-rtx", "--release", DEFAULT_RELEASE]
    build += ["--platform", "manylinux_2_28_x86_64", "--python", "3.11", "--out", str(tmp_path)]
    done = run_tool(REPOSITORY, *build)
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    with zipfile.ZipFile(patched) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("/METADATA")))
    assert b"Name: torch-tensorrt-rtx\n" in metadata and b"Requires-Dist: tensorrt_rtx" in metadata
    assert read_provenance(patched.read_bytes(), patched.name).fixes[:2] == ("offload", "host-trim")


@pytest.mark.network
@pytest.mark.parametrize(
    "distribution, release, fixes",
    [
        # 2.8 and 2.9 lack the heap trim's hook; their prepare_inputs is 2.10's and copies.
        pytest.param("torch-tensorrt", "2.8.0", ("offload", "input-copy"), id="2.8.0"),
        pytest.param("torch-tensorrt", "2.9.0", ("offload", "input-copy"), id="2.9.0"),
        pytest.param(
            "torch-tensorrt-rtx", "2.11.0", ("offload", "host-trim", "input-copy"), id="rtx-2.11.0"
        ),
        pytest.param("torch-tensorrt-rtx", "2.14.0", ("offload", "host-trim"), id="rtx-2.14.0"),
    ],
)
def test_each_official_base_carries_the_fixes_whose_hooks_it_has(
    distribution: str, release: str, fixes: Tuple[str, ...]
) -> None:
    base = fetch(release, distribution=distribution)  # with test_patch's synthetic overlay
    wheel = patch_wheel(
        BaseWheel(base.read_bytes(), base.name), overlay_from_bytes(OVERLAY, "o"), origin=ORIGIN
    )
    assert wheel.provenance.fixes == fixes


def test_the_pep_517_build_refuses_a_local_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patched_wheel import backend

    monkeypatch.setenv("PYTHONPATH", str(source_build(tmp_path / "site", UTILS)))
    monkeypatch.setenv("TORCHTRT_BASE_VERSION", "installed")
    with pytest.raises(SystemExit) as refused:
        backend.build_wheel(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()
    names(refused.value.code, "torch_tensorrt-2.10.0a0+abc1234-", "--release installed")
