"""The patch, the wheel format under it, and the package's shape: synthetic wheels mostly,
the official wheels where truth needs them."""

from __future__ import annotations

import ast
import io
import os
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Dict

import packaging
import pytest
from helpers import UTILS, make_wheel, pip_environment, run_tool
from packaging.version import Version
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_OVERLAY, REPOSITORY, TARGET
from patched_wheel.lock import Lock, open_base
from patched_wheel.patch import FIXES, Origin, patch_wheel, rewrite_metadata_version
from patched_wheel.provenance import SourceRevision
from patched_wheel.settings import BaseChoice, choice_from_environment
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.wheel import BaseWheel, Entry, write_zip, zip_date_time

# A synthetic overlay written here. Its prepare_inputs takes the parameter name upstream's
# callers pass by keyword (backends.py: disable_memory_format_check=True), as the call-site
# check demands where test_distributions splices it into the official 2.8-2.11 wheels.
OVERLAY = b"""import gc


def deallocate_module(module, delete_module=True):
    gc.collect()


def release_host_and_device_memory():
    gc.collect()


def prepare_inputs(inputs, disable_memory_format_check=False):
    return inputs


def _helper():
    return 1
"""
ORIGIN = Origin("memfix1.2", SourceRevision("0" * 40, False), "1" * 64)


def patched(base: Path, overlay: bytes = OVERLAY, origin: Origin = ORIGIN) -> bytes:
    return patch_wheel(
        BaseWheel(base.read_bytes(), base.name), overlay_from_bytes(overlay, "o"), origin=origin
    ).data


def members(data: bytes) -> Dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _definition(source: str, name: str) -> str:
    """The source text of top-level function ``name`` in ``source``."""
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == name)
    segment = ast.get_source_segment(source, node)
    assert segment is not None
    return segment


def test_only_the_fixes_whose_hooks_are_found_are_spliced(tmp_path: Path) -> None:
    copies = make_wheel(tmp_path / "a")
    own = UTILS.replace(b"return torch.tensor(example)", b"return example")
    keeps = make_wheel(tmp_path / "b", utils=own)
    spliced, kept = (members(patched(w))[TARGET].decode() for w in (copies, keeps))
    assert "return inputs\n\n\ndef _helper" in spliced and "torch.tensor(example)" not in spliced
    # Where upstream's prepare_inputs makes no copy, it stays as upstream wrote it.
    assert _definition(kept, "prepare_inputs") == _definition(own.decode(), "prepare_inputs")
    sbom = next(v for k, v in members(patched(keeps)).items() if k.endswith("cdx.json")).decode()
    assert "offload,host-trim" in sbom and "input-copy" not in sbom


def test_a_base_where_no_fix_applies_is_refused(tmp_path: Path) -> None:
    base = make_wheel(tmp_path, utils=b"def other():\n    pass\n")
    with pytest.raises(PatchError, match="no fix of the overlay applies"):
        patched(base)


def test_the_fix_table_names_its_hooks() -> None:
    assert [fix.name for fix in FIXES] == ["offload", "host-trim", "input-copy", "engine-bytes"]


def test_only_new_members_are_stored_and_the_rest_copied_raw(tmp_path: Path) -> None:
    base = make_wheel(tmp_path)
    out = patched(base)
    with zipfile.ZipFile(io.BytesIO(out)) as archive, zipfile.ZipFile(base) as original:
        kinds = {i.filename: i.compress_type for i in archive.infolist()}
        assert kinds[TARGET] == zipfile.ZIP_STORED
        assert kinds["torch_tensorrt/__init__.py"] == zipfile.ZIP_DEFLATED
        assert archive.getinfo("torch_tensorrt/bin/torchtrtc").external_attr >> 16 == 0o755
        assert archive.testzip() is None
        assert archive.read("torch_tensorrt/bin/torchtrtc") == original.read(
            "torch_tensorrt/bin/torchtrtc"
        )


def test_the_bytes_do_not_depend_on_the_compressor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = make_wheel(tmp_path)
    before = patched(base)
    real = zlib.compressobj
    monkeypatch.setattr(
        zlib, "compressobj", lambda *a, **k: real(1, zlib.DEFLATED, -15, 9, zlib.Z_FILTERED)
    )
    assert patched(base) == before


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14"])
def test_the_bytes_are_the_same_on_every_python(tmp_path: Path, version: str) -> None:
    found = (
        [
            Path(f"/root/.pyenv/versions/{v}/bin/python{version}")
            for v in os.listdir("/root/.pyenv/versions")
        ]
        if Path("/root/.pyenv/versions").is_dir()
        else []
    )
    python = next(
        (p for p in found if p.exists() and p.parent.parent.name.startswith(version + ".")), None
    )
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    base = make_wheel(tmp_path / "base")
    overlay = tmp_path / "overlay.py"
    overlay.write_bytes(OVERLAY)
    env = dict(os.environ, PYTHONPATH=str(Path(packaging.__file__).parents[1]))
    outputs = []
    for interpreter in (sys.executable, str(python)):
        out = tmp_path / interpreter.replace("/", "_")
        command = [
            interpreter,
            str(REPOSITORY / "tools/patched_wheel"),
            "build",
            "--base-wheel",
            str(base),
            "--unlocked",
            "--overlay",
            str(overlay),
            "--out",
            str(out),
        ]
        subprocess.run(command, env=env, check=True, capture_output=True)
        outputs.append(next(out.glob("*.whl")).read_bytes())
    assert outputs[0] == outputs[1]


def test_development_labels_sort_below_releases_for_pip(tmp_path: Path) -> None:
    folder = tmp_path / "wheels"
    for label in ("memfix1.dev2.gcd7f5f9a51", "memfix1.2"):
        origin = Origin(label, SourceRevision("0" * 40, False), "1" * 64)
        data = patch_wheel(
            BaseWheel(
                make_wheel(tmp_path / "b").read_bytes(),
                "torch_tensorrt-2.99.0-cp311-cp311-manylinux_2_28_x86_64.whl",
            ),
            overlay_from_bytes(OVERLAY, "o"),
            origin=origin,
        )
        (folder).mkdir(exist_ok=True)
        (folder / data.filename).write_bytes(data.data)
    command = [sys.executable, "-m", "pip", "download", "--no-index", "--find-links", str(folder), "--no-deps",
               "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--only-binary=:all:",
               "-d", str(tmp_path / "got"), "torch_tensorrt==2.99.0"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, env=pip_environment())
    assert [p.name.split("-")[1] for p in (tmp_path / "got").glob("*.whl")] == ["2.99.0+memfix1.2"]
    assert Version("2.99.0+memfix1.dev2.gcd7f5f9a51") < Version("2.99.0+memfix1.2")


@pytest.mark.parametrize(
    "epoch, expected",
    [
        pytest.param("0", (1980, 1, 1, 0, 0, 0), id="floor"),
        pytest.param("1700000000", (2023, 11, 14, 22, 13, 20), id="2023"),
    ],
)
def test_source_date_epoch_sets_the_new_members_time(epoch: str, expected: tuple) -> None:
    assert zip_date_time(epoch) == expected


def test_metadata_changes_in_its_version_only() -> None:
    metadata = b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\nLicense: a\n  b\n\nVersion: 1.0\n"
    assert rewrite_metadata_version(metadata, "1.0+l") == metadata.replace(
        b"Version: 1.0\nL", b"Version: 1.0+l\nL"
    )


def test_an_unlocked_base_is_checked_against_its_record(tmp_path: Path) -> None:
    base = make_wheel(tmp_path, {"torch_tensorrt/x.py": b"a"})
    with zipfile.ZipFile(base, "a") as archive:
        archive.writestr("torch_tensorrt/extra.py", b"not in RECORD")
    with pytest.raises(PatchError, match="extra.py' differs from RECORD"):
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
    with pytest.raises(PatchError, match="not in the lock of official wheels"):
        open_base(BaseChoice(wheel=base), lock=Lock({}))


def test_a_misspelt_variable_is_refused() -> None:
    with pytest.raises(PatchError, match="did you mean TORCHTRT_BASE_VERSION"):
        choice_from_environment({"TORCHTRT_BSAE_VERSION": "2.14.0"})


def test_the_cli_refuses_in_one_line(tmp_path: Path) -> None:
    done = run_tool(REPOSITORY, "build", "--base-wheel", str(tmp_path / "missing.whl"))
    assert (
        done.returncode == 1 and done.stderr.count("\n") == 1 and done.stderr.startswith("error:")
    )


@pytest.mark.parametrize("release", ["2.10.0", "2.11.0", "2.12.0", "2.14.0"])
def test_the_official_wheels_patch_with_their_fixes(
    base_wheels: Dict[str, Path], release: str
) -> None:
    data = base_wheels[release].read_bytes()
    overlay = overlay_from_bytes(DEFAULT_OVERLAY.read_bytes(), "overlay")
    wheel = patch_wheel(BaseWheel(data, base_wheels[release].name), overlay, origin=ORIGIN)
    assert wheel.provenance.fixes[:2] == ("offload", "host-trim")
    assert "input-copy" not in wheel.provenance.fixes or release in ("2.10.0", "2.11.0")
    compile(members(wheel.data)[TARGET], TARGET, "exec")


def _edits_sys_path(node: ast.AST) -> bool:
    """``sys.path.<insert|append|extend>(...)`` or ``sys.path[...] = ...``."""

    def is_sys_path(value: ast.AST) -> bool:
        return (
            isinstance(value, ast.Attribute)
            and value.attr == "path"
            and isinstance(value.value, ast.Name)
            and value.value.id == "sys"
        )

    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr in ("insert", "append", "extend") and is_sys_path(node.func.value)
    if isinstance(node, (ast.Assign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(
            is_sys_path(target.value if isinstance(target, ast.Subscript) else target)
            for target in targets
        )
    return False


def test_no_python_file_of_the_repository_edits_sys_path() -> None:
    """The tool, the tests, the benchmarks and the docs import without path hacks, except
    ``docsrc/conf.py``: Sphinx's convention puts the local extensions' folder on ``sys.path``
    there (``python -m sphinx docsrc OUT`` must build with nothing on ``PYTHONPATH``)."""
    tracked = subprocess.run(
        ["git", "-C", str(REPOSITORY), "ls-files", "*.py"], capture_output=True, text=True
    ).stdout.split()
    assert tracked, "no tracked Python files: is this a git checkout?"
    edits = [
        f"{name}:{node.lineno}"
        for name in tracked
        if name != "docsrc/conf.py"
        for node in ast.walk(ast.parse((REPOSITORY / name).read_text(encoding="utf-8")))
        if _edits_sys_path(node)
    ]
    assert edits == [], f"sys.path edited at {edits}"


def test_the_package_has_no_cycles_and_no_network() -> None:
    folder = REPOSITORY / "tools" / "patched_wheel"
    graph = {}
    for path in folder.glob("*.py"):
        tree = ast.parse(path.read_text())
        graph[path.stem] = {
            n.module.split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module
        }

    def visit(name: str, path: tuple) -> None:
        assert name not in path, f"import cycle: {path + (name,)}"
        for dependency in graph.get(name, ()):
            visit(dependency, path + (name,))

    for name in graph:
        visit(name, ())
    core = "; ".join(
        f"import patched_wheel.{m}"
        for m in ("patch", "verify", "index", "splice", "provenance", "releases", "wheel")
    )
    check = f"import sys; {core}; print([m for m in ('urllib.request', 'http.client', 'ssl') if m in sys.modules])"
    out = subprocess.run(
        [sys.executable, "-c", check],
        env=dict(os.environ, PYTHONPATH=str(folder.parent)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def _rezipped(path: Path, *, mode_of: str = "", mode: int = 0, hide_after: str = "") -> None:
    """``path`` written again by the tool's raw writer: ``mode_of``'s mode set to ``mode``,
    bytes hidden after ``hide_after``'s deflate stream (its size and CRC unchanged)."""
    entries = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            data = archive.read(info)
            compressor = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            payload = compressor.compress(data) + compressor.flush()
            payload += b"hidden" if info.filename == hide_after else b""
            attributes = mode << 16 if info.filename == mode_of else info.external_attr
            entries.append(
                Entry(
                    info.filename,
                    info.date_time,
                    attributes,
                    3,
                    zipfile.ZIP_DEFLATED,
                    zlib.crc32(data),
                    len(data),
                    payload,
                )
            )
    path.write_bytes(write_zip(entries))


DIST_INFO = "torch_tensorrt-2.99.0.dist-info"


@pytest.mark.parametrize(
    "files, change, problem",
    [
        pytest.param(
            {}, dict(mode_of="torch_tensorrt/bin/torchtrtc", mode=0o104755), "setuid", id="setuid"
        ),
        pytest.param(
            {"torch_tensorrt/dynamo/UTILS.py": b"x = 1\n"},
            {},
            "differ only in case",
            id="case-variant",
        ),
        pytest.param(
            {f"{DIST_INFO}/WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-any\n"},
            {},
            "WHEEL's Tag",
            id="wheel-tags",
        ),
        pytest.param(
            {f"{DIST_INFO}/METADATA": b"Name: torch_tensorrt\nVersion: 2.98.0\n\n"},
            {},
            "METADATA's Name or Version",
            id="metadata-version",
        ),
        pytest.param(
            {"other-1.0.dist-info/METADATA": b"Name: other\n"},
            {},
            "a second .dist-info",
            id="second-dist-info",
        ),
        pytest.param(
            {}, dict(hide_after="torch_tensorrt/__init__.py"), "hidden after", id="hidden-bytes"
        ),
    ],
)
def test_an_unlocked_base_is_refused_where_installers_refuse_it(
    tmp_path: Path, files: Dict[str, bytes], change: Dict[str, object], problem: str
) -> None:
    base = make_wheel(tmp_path, files, version="2.99.0")
    if change:
        _rezipped(base, **change)  # type: ignore[arg-type]
    with pytest.raises(PatchError, match=problem):
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_local_install_never_reads_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    """A FIFO would block for ever and /dev/zero never ends: neither is read."""
    from packaging.utils import canonicalize_name
    from patched_wheel.fetch import local_install_wheel
    from patched_wheel.settings import BaseRequest

    dist_info = "torch_tensorrt-2.99.0.dist-info"
    package = tmp_path / "torch_tensorrt"
    package.mkdir()
    (tmp_path / dist_info).mkdir()
    if kind == "fifo":
        os.mkfifo(package / "odd.py")
    else:
        (package / "odd.py").symlink_to("/dev/zero")
    (tmp_path / dist_info / "RECORD").write_text("torch_tensorrt/odd.py,sha256=x,1\n")
    request = BaseRequest(
        "2.99.0", "manylinux_2_28_x86_64", "3.11", canonicalize_name("torch-tensorrt")
    )
    with pytest.raises(PatchError, match="odd.py is missing or not a regular file"):
        local_install_wheel((request, "2.99.0", tmp_path, dist_info))
