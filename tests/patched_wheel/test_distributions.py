"""Both distributions (``torch-tensorrt``, ``torch-tensorrt-rtx``) and the releases where only
some fixes apply: chosen, built, recorded, verified, listed on their own index pages."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Tuple

import pytest
from helpers import (
    UTILS,
    make_wheel,
    pip_environment,
    record_hash,
    release_repo,
    run_tool,
    write_lock,
)
from patched_wheel import PatchError
from patched_wheel.config import (
    DISTRIBUTIONS,
    FIX_NAMES,
    OVERLAY_RELEASES_FILE,
    REPOSITORY,
    RTX_RELEASES,
    TARGET,
)
from patched_wheel.lock import load_lock
from patched_wheel.patch import FIXES, patch_wheel
from patched_wheel.settings import BaseRequest, canonical_distribution, choice_from_environment
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.wheel import BaseWheel
from test_patch import ORIGIN, OVERLAY
from wheel_helpers import fetch

# The label of the newest released overlay, which a release repository's build gives.
RELEASED = "memfix1." + str(
    max(map(int, json.loads(OVERLAY_RELEASES_FILE.read_text(encoding="utf-8"))["overlays"]))
)

RTX = "torch_tensorrt_rtx"
# An upstream utils.py of 2.8 and 2.9 in miniature: deallocate_module, no host-trim hook.
UTILS_2_8 = b"""def deallocate_module(module, delete_module=True):
    del module
"""


def test_the_fix_names_are_the_fix_table() -> None:
    assert tuple(fix.name for fix in FIXES) == FIX_NAMES


def test_the_distribution_is_chosen_by_its_variable() -> None:
    choice = choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "torch-tensorrt-rtx"})
    assert choice.request.distribution == "torch-tensorrt-rtx"
    assert canonical_distribution("torch_tensorrt_rtx") == "torch-tensorrt-rtx"
    with pytest.raises(PatchError, match="TORCHTRT_BASE_DISTRIBUTION='tensorrt-rtx' is not one"):
        choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "tensorrt-rtx"})


def test_the_lock_holds_every_rtx_wheel_and_2_8_and_2_9() -> None:
    lock = load_lock()
    rtx = [n for n in lock.wheels if n.startswith(f"{RTX}-")]
    # cp310-cp313 x (Linux x86_64, Windows) per release, and cp314 for 2.14.0; no aarch64.
    assert len(rtx) == 8 * len(RTX_RELEASES) + 2 and not [n for n in rtx if "aarch64" in n]
    assert lock.official_name(BaseRequest("2.8.0", "manylinux_2_28_x86_64", "3.11")) == (
        "torch_tensorrt-2.8.0-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_34_x86_64.whl"
    )
    assert "older than 2.11.0" in lock.unknown_request(
        BaseRequest("2.10.0", distribution="torch-tensorrt-rtx")
    )
    assert "not built for 'manylinux_2_28_aarch64'" in lock.unknown_request(
        BaseRequest("2.14.0", "manylinux_2_28_aarch64", "3.11", "torch-tensorrt-rtx")
    )


def test_a_release_with_only_the_offload_hook_carries_only_that_fix(tmp_path: Path) -> None:
    base = make_wheel(tmp_path / "in", version="2.98.0", utils=UTILS_2_8)
    lock = write_lock(tmp_path / "lock.json", base)
    done = run_tool(REPOSITORY, "build", "--base-wheel", str(base), "--lock", str(lock),
                    "--out", str(tmp_path / "out"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = run_tool(REPOSITORY, "provenance", done.stdout.strip())
    assert "fixes:           offload (not host-trim, input-copy, engine-bytes)" in record.stdout


@pytest.fixture
def both(tmp_path: Path) -> Tuple[Path, Path, Path]:
    """(release repo, lock, cache) with a synthetic base of each distribution, one release."""
    cache = tmp_path / "cache"
    bases = [make_wheel(cache, name=name) for name in ("torch_tensorrt", RTX)]
    return release_repo(tmp_path), write_lock(tmp_path / "lock.json", *bases), cache


def test_each_distribution_has_its_own_page_and_each_installer_gets_its_own(
    both: Tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, lock, cache = both
    out = tmp_path / "matrix"
    done = run_tool(repo, "matrix", "--release", "2.99.0", "--platform", "manylinux_2_28_x86_64",
                    "--python", "3.11", "--lock", str(lock), "--cache", str(cache), "--out",
                    str(out))  # fmt: skip
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
    assert "verified: the official torch-tensorrt-rtx wheel" in verdict.stdout, verdict.stderr
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
        uv = [shutil.which("uv") or "uv", "pip", "compile", "-", "--no-deps", "--index-url"]
        uv += [index, "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"]
        resolved = subprocess.run(uv + ["--no-header", "--no-annotate"], check=True, text=True,
                                  input=f"{project}==2.99.0\n", capture_output=True)  # fmt: skip
        assert resolved.stdout.split() == [f"{project}==2.99.0+{RELEASED}"], resolved.stdout


@pytest.mark.network
def test_the_official_rtx_wheel_patches_as_its_own_project(tmp_path: Path) -> None:
    base, official = fetch("2.14.0", distribution="torch-tensorrt-rtx"), fetch("2.14.0")
    with zipfile.ZipFile(base) as rtx, zipfile.ZipFile(official) as plain:
        assert rtx.read("torch_tensorrt/dynamo/utils.py") == plain.read(
            "torch_tensorrt/dynamo/utils.py"
        )
    done = run_tool(REPOSITORY, "build", "--distribution", "torch-tensorrt-rtx", "--release",
                    "2.14.0", "--platform", "manylinux_2_28_x86_64", "--python", "3.11", "--out",
                    str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    with zipfile.ZipFile(patched) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith("/METADATA")))
    assert b"Name: torch-tensorrt-rtx\n" in metadata and b"Requires-Dist: tensorrt_rtx" in metadata
    assert "offload, host-trim" in run_tool(REPOSITORY, "provenance", str(patched)).stdout


def test_2_7_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_tool(REPOSITORY, "build", "--release", "2.7.0", "--out", str(tmp_path))
    assert done.returncode == 1 and "older than 2.8.0" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def _source_build(
    folder: Path,
    utils: bytes,
    name: str = "torch_tensorrt",
    version: str = "2.10.0a0+abc1234",
    tag: str = "cp311-cp311-linux_x86_64",
) -> Path:
    """A fake install (by default of a source build, ``2.10.0a0+abc1234``, no official wheel of
    it): the package, a dist-info with METADATA, WHEEL and RECORD, as pip leaves them."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        "torch_tensorrt/__init__.py": b"",
        "torch_tensorrt/dynamo/__init__.py": b"",
        TARGET: utils,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "\n".encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        f"{dist_info}/INSTALLER": b"pip\n",
    }
    rows = [f"{path},{record_hash(data)},{len(data)}" for path, data in files.items()]
    rows += ["torch_tensorrt/__pycache__/__init__.cpython-311.pyc,,", f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


@pytest.mark.network
def test_a_source_build_install_is_patched_from_its_own_files_and_reversed(
    tmp_path: Path,
) -> None:
    with zipfile.ZipFile(fetch("2.10.0")) as official:
        utils = official.read(TARGET)
    site = _source_build(tmp_path / "site", utils)
    out = tmp_path / "out"
    done = run_tool(REPOSITORY, "build", "--release", "installed", "--out", str(out),
                    PYTHONPATH=str(site))  # fmt: skip
    assert done.returncode == 0, done.stderr
    patched = Path(done.stdout.strip())
    assert patched.name.startswith("torch_tensorrt-2.10.0a0+abc1234.memfix1.")
    assert "pip install --force-reinstall --no-deps" in done.stderr
    record = run_tool(REPOSITORY, "provenance", str(patched)).stdout
    assert "(a local install's files, not an official file)" in record
    assert "fixes:           offload, host-trim" in record
    verdict = run_tool(REPOSITORY, "verify", str(patched))
    assert verdict.returncode == 1 and "made from a local install" in verdict.stdout
    # The reversal: the saved original, installed over the patched wheel, is the install again.
    original = out / "torch_tensorrt-2.10.0a0+abc1234-cp311-cp311-linux_x86_64.whl"
    target = tmp_path / "target"
    for wheel in (patched, original):
        pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--upgrade", "--target"]
        subprocess.run(pip + [str(target), str(wheel)], check=True, capture_output=True)
        installed = (target / TARGET).read_bytes()
        assert (installed == utils) == (wheel == original)


def test_an_install_that_differs_from_its_record_is_refused(tmp_path: Path) -> None:
    site = _source_build(tmp_path / "site", UTILS)
    (site / TARGET).write_bytes(UTILS + b"# edited\n")
    done = run_tool(REPOSITORY, "build", "--release", "installed", "--out", str(tmp_path / "out"),
                    PYTHONPATH=str(site))  # fmt: skip
    assert done.returncode == 1 and "utils.py differs from its RECORD row" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_install_where_no_fix_applies_is_refused(tmp_path: Path) -> None:
    site = _source_build(tmp_path / "site", b"def other():\n    pass\n")
    done = run_tool(REPOSITORY, "build", "--release", "installed", "--out", str(tmp_path / "out"),
                    PYTHONPATH=str(site))  # fmt: skip
    assert done.returncode == 1 and "no fix of the overlay applies" in done.stderr


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


def test_an_installed_rtx_release_takes_the_official_rtx_base(
    both: Tuple[Path, Path, Path], tmp_path: Path
) -> None:
    repo, lock, cache = both
    site = _source_build(
        tmp_path / "site", UTILS, RTX, "2.99.0", "cp311-cp311-manylinux_2_28_x86_64"
    )
    done = run_tool(repo, "build", "--release", "installed", "--lock", str(lock), "--cache",
                    str(cache), "--out", str(tmp_path / "out"), PYTHONPATH=str(site))  # fmt: skip
    assert done.returncode == 0 and "local install" not in done.stderr, done.stderr
    assert Path(done.stdout.strip()).name.startswith(f"{RTX}-2.99.0+{RELEASED}-cp311")


def test_refreshing_one_distribution_keeps_the_others_wheels_of_that_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patched_wheel.lock as lock_module

    bases = [make_wheel(tmp_path, name=name) for name in ("torch_tensorrt", RTX)]
    (tmp_path / "index").mkdir()
    fresh = make_wheel(tmp_path / "index")  # downloaded again: the same file

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        assert request.distribution == "torch-tensorrt"  # only the release asked for
        return Path(shutil.copy(fresh, folder))  # pip's download, without the network

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", *bases)
    refreshed = lock_module.refresh_lock([BaseRequest("2.99.0")], path=path)
    rtx_digest = load_lock(tmp_path / "lock.json").wheels[bases[1].name]
    assert set(refreshed.wheels) == {fresh.name, bases[1].name} == set(load_lock(path).wheels)
    assert refreshed.wheels[bases[1].name] == rtx_digest  # the RTX wheel of 2.99.0 kept
    assert refreshed.wheels[fresh.name] == hashlib.sha256(fresh.read_bytes()).hexdigest()


def test_refreshing_one_platform_keeps_the_releases_other_platforms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import patched_wheel.lock as lock_module

    linux = make_wheel(tmp_path / "linux", tag="cp311-cp311-manylinux_2_28_x86_64")
    windows = make_wheel(tmp_path / "windows", tag="cp311-cp311-win_amd64")
    fresh = make_wheel(tmp_path / "index")  # downloaded again: the same file

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        assert request.platform == "manylinux_2_28_x86_64"  # only the platform asked for
        return Path(shutil.copy(fresh, folder))

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", linux, windows)
    lock_module.refresh_lock([BaseRequest("2.99.0", "manylinux_2_28_x86_64", "3.11")], path=path)
    wheels = load_lock(path).wheels
    assert set(wheels) == {linux.name, windows.name}  # the Windows wheel of 2.99.0 kept
    assert wheels[linux.name] == hashlib.sha256(fresh.read_bytes()).hexdigest()
    assert wheels[windows.name] == hashlib.sha256(windows.read_bytes()).hexdigest()


def test_the_pep_517_build_refuses_a_local_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from patched_wheel import backend

    monkeypatch.setenv("PYTHONPATH", str(_source_build(tmp_path / "site", UTILS)))
    monkeypatch.setenv("TORCHTRT_BASE_VERSION", "installed")
    with pytest.raises(SystemExit, match="is a local install .* --release installed"):
        backend.build_wheel(str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_lock_refuses_another_sha256_for_a_known_file_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PyPI never re-uploads a file name: a re-zipped copy an index serves is not a refresh."""
    import patched_wheel.lock as lock_module

    base = make_wheel(tmp_path)
    rezipped = make_wheel(tmp_path / "index", {"torch_tensorrt/new.py": b""})  # the same name

    def download(request: BaseRequest, folder: Path, **_: object) -> Path:
        return Path(shutil.copy(rezipped, folder))

    monkeypatch.setattr(lock_module, "pip_download", download)
    path = write_lock(tmp_path / "lock.json", base)
    before = path.read_bytes()
    with pytest.raises(PatchError, match="never re-uploads a file name"):
        lock_module.refresh_lock([BaseRequest("2.99.0")], path=path)
    assert path.read_bytes() == before
