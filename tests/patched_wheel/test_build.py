"""The build on the real official wheels: what it keeps, what it changes, what it refuses."""

from __future__ import annotations

import ast
import difflib
import logging
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Set, Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.lock import Lock, load_lock
from patched_wheel.overlay import read_overlay
from patched_wheel.paths import DEFAULT_OVERLAY as OVERLAY
from patched_wheel.policy import SUPPORTED_RELEASES
from patched_wheel.splice import parse_overlay, top_level_definitions
from wheel_helpers import (
    LABEL,
    TARGET,
    TEST_PLATFORM,
    TEST_PYTHON,
    fetch,
    members,
    sha256,
)


def build(base: Path, out_dir: Path, lock: Lock, **options: object) -> Path:
    """Read the base once, verified against ``lock``, and build its patched wheel."""
    unlocked = bool(options.pop("unlocked", False))
    wheel = read_base(base, lock=lock, unlocked=unlocked)
    return build_patched_wheel(wheel, out_dir=out_dir, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def patched_wheels(
    base_wheels: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Dict[str, Path]:
    """Release -> patched wheel, built once per test module with the committed lock."""
    out_dir = tmp_path_factory.mktemp("patched")
    lock = load_lock()
    return {release: build(base, out_dir, lock) for release, base in base_wheels.items()}


releases = pytest.mark.parametrize("release", SUPPORTED_RELEASES)


@releases
def test_names_version_and_metadata(
    release: str, base_wheels: Dict[str, Path], patched_wheels: Dict[str, Path]
) -> None:
    patched = patched_wheels[release]
    assert patched.name == base_wheels[release].name.replace(release, f"{release}+{LABEL}", 1)
    before, after = members(base_wheels[release]), members(patched)
    old, new = f"torch_tensorrt-{release}.dist-info", f"torch_tensorrt-{release}+{LABEL}.dist-info"
    metadata_diff = [
        line
        for line in difflib.ndiff(
            before[f"{old}/METADATA"].decode().splitlines(),
            after[f"{new}/METADATA"].decode().splitlines(),
        )
        if line[:1] in "+-"
    ]
    assert metadata_diff == [f"- Version: {release}", f"+ Version: {release}+{LABEL}"]
    assert after[f"{new}/WHEEL"] == before[f"{old}/WHEEL"]


@releases
def test_every_other_file_is_byte_identical(
    release: str, base_wheels: Dict[str, Path], patched_wheels: Dict[str, Path]
) -> None:
    old, new = f"torch_tensorrt-{release}.dist-info", f"torch_tensorrt-{release}+{LABEL}.dist-info"
    before = {
        name.replace(old, new, 1): data for name, data in members(base_wheels[release]).items()
    }
    after = members(patched_wheels[release])
    changed = {TARGET, f"{new}/METADATA", f"{new}/RECORD"}
    added = {f"{new}/sboms/patched_wheel.cdx.json"}  # the provenance record
    assert set(before) == set(after) - added
    assert {name for name in before if after[name] != before[name]} == changed


@releases
def test_untouched_lines_of_utils_are_byte_identical(
    release: str, base_wheels: Dict[str, Path], patched_wheels: Dict[str, Path]
) -> None:
    base = members(base_wheels[release])[TARGET].decode()
    result = members(patched_wheels[release])[TARGET].decode()
    replaced: List[Tuple[int, int]] = []  # 0-based line spans of the base that were replaced
    names = {d.name for d in parse_overlay(OVERLAY.read_text()).definitions}
    for name, node in top_level_definitions(ast.parse(base)).items():
        if name in names:
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            assert node.end_lineno is not None
            replaced.append((first - 1, node.end_lineno))
    matcher = difflib.SequenceMatcher(
        None, base.splitlines(keepends=True), result.splitlines(keepends=True), autojunk=False
    )
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            assert any(first <= i1 and i2 <= last for first, last in replaced), (tag, i1, i2)


def test_build_is_reproducible(base_wheels: Dict[str, Path], tmp_path: Path) -> None:
    base = base_wheels["2.14.0"]
    base_sha = sha256(base)
    first = build(base, tmp_path / "one", load_lock())
    second = build(base, tmp_path / "two", load_lock())
    assert sha256(first) == sha256(second)
    assert sha256(base) == base_sha  # the base is only read


def test_unsupported_release_is_refused(unsupported_wheel: Path, tmp_path: Path) -> None:
    with pytest.raises(PatchError) as error:
        build(unsupported_wheel, tmp_path, load_lock())
    assert error.match(
        "^"
        + re.escape(
            f"{unsupported_wheel.name}: no top-level 'release_host_and_device_memory' in "
            "torch_tensorrt/dynamo/utils.py, so the fix 'host heap trimmed after each engine "
            "build' cannot apply (it takes effect through release_host_and_device_memory()); "
            "the build makes no wheel with only some of the fixes. Supported base releases "
            f"are {', '.join(SUPPORTED_RELEASES)}: choose one with "
            "TORCHTRT_BASE_VERSION"
        )
        + "$"
    )
    assert list(tmp_path.iterdir()) == []


def test_sha256_not_matching_the_lock_is_refused(
    base_wheels: Dict[str, Path], tmp_path: Path
) -> None:
    base = base_wheels["2.13.0"]
    lock = Lock({base.name: "0" * 64})
    with pytest.raises(PatchError) as error:
        build(base, tmp_path, lock, unlocked=True)  # the opt-in does not cover a known wheel
    assert error.match(
        "^"
        + re.escape(
            f"{base.name}: sha256 {sha256(base)} differs from the official wheel's {'0' * 64} "
            "in the lock; this is not the official file, delete it and download it again"
        )
        + "$"
    )
    assert list(tmp_path.iterdir()) == []


def test_base_unknown_to_the_lock_is_refused(base_wheels: Dict[str, Path], tmp_path: Path) -> None:
    base = base_wheels["2.13.0"]
    with pytest.raises(PatchError) as error:
        build(base, tmp_path, Lock({}))
    assert error.match(
        "^"
        + re.escape(
            f"{base.name} is not in the lock of official wheels, so the build cannot check that "
            f"it is the official file; choose a supported release ({', '.join(SUPPORTED_RELEASES)}"
            ") or, for a wheel you trust from another index (such as a CUDA variant "
            "2.x.y+cu128), set TORCHTRT_BASE_UNLOCKED=1 (or pass build --unlocked)"
        )
        + "$"
    )
    assert list(tmp_path.iterdir()) == []


def test_base_unknown_to_the_lock_builds_when_unlocked_with_a_warning(
    base_wheels: Dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = base_wheels["2.13.0"]
    with caplog.at_level(logging.WARNING, logger="patched_wheel"):
        patched = build(base, tmp_path, Lock({}), unlocked=True)
    assert patched.is_file()
    assert caplog.messages == [
        f"{base.name} is not in the lock of official wheels; building it unchecked, as asked "
        "(TORCHTRT_BASE_UNLOCKED=1 or --unlocked)"
    ]


def test_base_read_once_is_the_base_copied(base_wheels: Dict[str, Path], tmp_path: Path) -> None:
    """Replacing the file after it was read and verified changes nothing in the build."""
    official = base_wheels["2.14.0"]
    base = tmp_path / "bases" / official.name
    base.parent.mkdir()
    shutil.copyfile(official, base)
    wheel = read_base(base, lock=load_lock())
    entries = members(official)
    entries["torch_tensorrt/_version.py"] = b"tampered = True\n"
    with zipfile.ZipFile(base, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    patched = build_patched_wheel(wheel, out_dir=tmp_path / "out")
    assert (
        members(patched)["torch_tensorrt/_version.py"]
        == members(official)["torch_tensorrt/_version.py"]
    )


def test_lock_knows_every_supported_test_base(base_wheels: Dict[str, Path]) -> None:
    lock = load_lock()
    for base in base_wheels.values():
        assert lock.wheels[base.name] == sha256(base)


def test_incompatible_call_site_in_a_real_release_is_refused(
    base_wheels: Dict[str, Path], tmp_path: Path
) -> None:
    overlay = tmp_path / "overlay.py"
    overlay.write_text(
        "def deallocate_module(module):\n    pass\n\n\n"
        "def release_host_and_device_memory():\n    pass\n",
        encoding="utf-8",
    )
    with pytest.raises(PatchError) as error:
        build(base_wheels["2.10.0"], tmp_path / "out", load_lock(), overlay=read_overlay(overlay))
    assert error.match(
        re.escape(
            "torch_tensorrt/dynamo/_compiler.py:378: deallocate_module(exported_program.module(), "
            "delete_module=False) does not fit deallocate_module(module): got an unexpected "
            "keyword argument 'delete_module'"
        )
    )
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_pip_installs_the_patched_wheel(patched_wheels: Dict[str, Path], tmp_path: Path) -> None:
    patched = patched_wheels["2.14.0"]
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--quiet"]
        + ["--only-binary=:all:", "--python-version", TEST_PYTHON, "--platform", TEST_PLATFORM]
        + ["--disable-pip-version-check", "--target", str(target), str(patched)],
        check=True,
    )
    assert (target / TARGET).read_bytes() == members(patched)[TARGET]
    assert (target / f"torch_tensorrt-2.14.0+{LABEL}.dist-info" / "METADATA").is_file()
    shutil.rmtree(target)


@pytest.mark.network
def test_windows_wheel_keeps_its_crlf_newlines(tmp_path: Path) -> None:
    base = fetch("2.14.0", TEST_PYTHON, "win_amd64")
    patched = build(base, tmp_path, load_lock())
    source = members(patched)[TARGET]
    assert source.count(b"\n") == source.count(b"\r\n") > 1000
    assert b"def trim_host_heap() -> None:\r\n" in source


def test_the_core_never_imports_the_network() -> None:
    """Reading, planning and writing a wheel import neither pip's runner nor an HTTP client."""
    core = ["base", "build", "plan", "wheelfile", "lock", "splice", "callsites", "overlay"]
    core += ["labels", "provenance", "provenance_record", "origin", "history"]
    core += ["request", "choice", "installed", "policy", "console"]
    network = ["patched_wheel.download", "patched_wheel.resolve", "urllib.request"]
    imports = "; ".join(f"import patched_wheel.{name}" for name in core)
    check = f"import sys; {imports}; print([m for m in {network!r} if m in sys.modules])"
    completed = subprocess.run(
        [sys.executable, "-c", check],
        env=dict(os.environ, PYTHONPATH=str(OVERLAY.parents[3] / "tools")),
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.strip() == "[]"


def _package_imports() -> Dict[str, Set[str]]:
    """Module -> the modules of ``patched_wheel`` it imports (``__init__`` for the package)."""
    folder = OVERLAY.parents[3] / "tools" / "patched_wheel"
    modules = {path.stem for path in folder.glob("*.py")}
    graph: Dict[str, Set[str]] = {}
    for name in modules:
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        found = {
            node.module.split(".")[1] if "." in node.module else "__init__"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "patched_wheel"
        }
        graph[name] = (found & modules) - {name}
    return graph


def test_the_package_imports_in_seven_floors_without_cycles() -> None:
    """The import graph of tools/patched_wheel: no cycle, and no chain of imports longer than
    seven modules (the package's ``__init__`` counted), one fewer than before issue 18."""
    graph = _package_imports()
    floors: Dict[str, int] = {}

    def floor(name: str, path: Tuple[str, ...]) -> int:
        assert name not in path, f"import cycle: {' -> '.join(path + (name,))}"
        if name not in floors:
            floors[name] = 1 + max((floor(d, path + (name,)) for d in graph[name]), default=0)
        return floors[name]

    highest = max(floor(name, ()) for name in graph)
    assert highest <= 7, {name: f for name, f in floors.items() if f == highest}
