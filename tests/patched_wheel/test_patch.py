"""The patch, the wheel format under it, and the package's shape: synthetic wheels mostly,
the official wheels where truth needs them."""

from __future__ import annotations

import ast
import io
import os
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Optional

import packaging
import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_OVERLAY, REPOSITORY, TARGET
from patched_wheel.patch import Origin, patch_wheel, rewrite_metadata_version
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.verify import read_provenance
from patched_wheel.wheel import BaseWheel

from tests.patched_wheel.helpers import ORIGIN, OVERLAY, UTILS, make_wheel, names, refusal, run_tool


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
    overlays = _definition(OVERLAY.decode(), "prepare_inputs")
    assert _definition(spliced, "prepare_inputs") == overlays
    # Where upstream's prepare_inputs makes no copy, it stays as upstream wrote it, and the
    # wheel's record leaves the fix out.
    assert _definition(kept, "prepare_inputs") == _definition(own.decode(), "prepare_inputs")
    overlay = overlay_from_bytes(OVERLAY, "o")
    wheel = patch_wheel(BaseWheel(keeps.read_bytes(), keeps.name), overlay, origin=ORIGIN)
    assert read_provenance(wheel.data, wheel.filename).fixes == ("offload", "host-trim")


def test_a_base_where_no_fix_applies_is_refused(tmp_path: Path) -> None:
    base = make_wheel(tmp_path, utils=b"def other():\n    pass\n")
    with pytest.raises(PatchError) as refused:
        patched(base)
    names(refused.value, base.name)


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


def another_python(version: str) -> Optional[str]:
    """An interpreter of Python ``version`` that runs: pyenv's (``$PYENV_ROOT``, else
    ``~/.pyenv``), else ``python<version>`` on the PATH, as on CI."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p) for p in sorted(root.glob(f"{version}.*/bin/python{version}"))]
    for candidate in [*candidates, shutil.which(f"python{version}")]:
        if candidate and subprocess.run([candidate, "-c", ""], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14"])
def test_the_bytes_are_the_same_on_every_python(tmp_path: Path, version: str) -> None:
    python = another_python(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    base = make_wheel(tmp_path / "base")
    overlay = tmp_path / "overlay.py"
    overlay.write_bytes(OVERLAY)
    # The tool starts isolated (no PYTHONPATH): the other Python gets packaging in a venv.
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
    other = str(next(venv.glob("*/python")))
    install = [sys.executable, "-m", "pip", "--python", other, "install", "-q", "packaging>=24"]
    subprocess.run(install, check=True, capture_output=True)
    outputs = []
    for interpreter in (sys.executable, other):
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
        subprocess.run(command, check=True, capture_output=True)
        outputs.append(next(out.glob("*.whl")).read_bytes())
    assert outputs[0] == outputs[1]


def test_metadata_changes_in_its_version_only() -> None:
    metadata = b"Metadata-Version: 2.1\nName: x\nVersion: 1.0\nLicense: a\n  b\n\nVersion: 1.0\n"
    assert rewrite_metadata_version(metadata, "1.0+l") == metadata.replace(
        b"Version: 1.0\nL", b"Version: 1.0+l\nL"
    )


def test_the_cli_refuses_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "missing.whl"
    done = run_tool(REPOSITORY, "build", "--base-wheel", str(missing), "--out", str(tmp_path))
    refusal(done, str(missing))
    assert done.stderr.count("\n") == 1 and list(tmp_path.iterdir()) == []


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


# The two places that put a folder on sys.path, and why: Sphinx's convention puts the local
# extensions' folder there (``python -m sphinx docsrc OUT`` builds with nothing on
# ``PYTHONPATH``); ``python tools/patched_wheel`` runs the package's ``__main__`` alone with its
# own folder first on sys.path, which its entry swaps for the parent so the package imports as
# itself (the alternative, a file-location loader, is what the repository keeps to one).
SYS_PATH_EDITS = {"docsrc/conf.py", "tools/patched_wheel/__main__.py"}


def test_no_python_file_of_the_repository_edits_sys_path() -> None:
    """The tool, the tests, the benchmarks and the docs import without path hacks, except
    the two entries of :data:`SYS_PATH_EDITS`."""
    tracked = subprocess.run(
        ["git", "-C", str(REPOSITORY), "ls-files", "*.py"], capture_output=True, text=True
    ).stdout.split()
    assert tracked, "no tracked Python files: is this a git checkout?"
    edits = [
        f"{name}:{node.lineno}"
        for name in tracked
        if name not in SYS_PATH_EDITS
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


def test_one_file_location_loader() -> None:
    """The repository imports by file location in one place, ``evidence.import_file`` (for the
    overlay, and for the build tool where ``tools`` is not on the path: its docstring says so)."""
    tracked = subprocess.run(
        ["git", "-C", str(REPOSITORY), "ls-files", "*.py"], capture_output=True, text=True
    ).stdout.split()
    loaders = [
        name
        for name in tracked
        for node in ast.walk(ast.parse((REPOSITORY / name).read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute) and node.attr == "spec_from_file_location"
    ]
    assert loaders == ["evidence/__init__.py"], loaders


def _with_member(base: BaseWheel, name: str, data: bytes) -> BaseWheel:
    """``base`` with the member ``name`` added and listed in its RECORD (the rest copied raw)."""
    from patched_wheel.wheel import Entry, record_hash, record_text, write_zip

    record = f"{base.dist_info}/RECORD"
    rows = [(path, *entry) for path, entry in base.record().items() if path != record]
    rows += [(name, record_hash(data), str(len(data))), (record, "", "")]
    template = base.by_name[record]
    entries = [Entry.copied(i.filename, i, base) for i in base.infos if i.filename != record]
    entries += [Entry.stored(name, data, template, None)]
    entries += [Entry.stored(record, record_text(rows), template, None)]
    return BaseWheel(write_zip(entries), base.filename)


@pytest.mark.network
def test_bytecode_that_would_run_instead_of_a_patched_module_is_refused() -> None:
    """An unchecked-hash ``.pyc`` in ``__pycache__`` runs instead of its source, and an install
    with ``--no-compile`` (uv's default) never rewrites it; a sourceless ``.pyc`` is imported
    where no source is. For every module the build patches (each fix's target, read from the
    fixes), a base holding its bytecode in either place, for any Python, is refused."""
    import importlib.util

    from patched_wheel.patch import FIXES

    from tests.patched_wheel.wheel_helpers import fetch

    official = fetch("2.11.0")  # engine-bytes applies: a second module is patched
    base = BaseWheel(official.read_bytes(), official.name)
    overlay = overlay_from_bytes(DEFAULT_OVERLAY.read_bytes(), "o")
    applied = patch_wheel(base, overlay, origin=ORIGIN).provenance.fixes
    targets = sorted({TARGET, *(fix.target for fix in FIXES if fix.name in applied)})
    assert len(targets) > 1, applied
    for target in targets:
        sourceless = target[: -len(".py")] + ".pyc"
        cached = importlib.util.cache_from_source(target)
        other_python = cached.replace(sys.implementation.cache_tag, "cpython-399")
        for bytecode in (cached, importlib.util.cache_from_source(target, optimization=2)):
            for name in (bytecode, other_python, sourceless):
                with pytest.raises(PatchError) as refused:
                    patch_wheel(_with_member(base, name, b"\0" * 16), overlay, origin=ORIGIN)
                names(refused.value, repr(name), target)
    # Bytecode of a module the build leaves alone is not in the way.
    beside = importlib.util.cache_from_source(TARGET.replace("/utils.py", "/utils_other.py"))
    patch_wheel(_with_member(base, beside, b"\0" * 16), overlay, origin=ORIGIN)


def test_the_input_copy_hook_reads_nested_branches_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook walked each ``isinstance(..., Tensor)`` branch's body again for every branch
    around it: 25 nested branches over 380 KB cost 22 s. Each node is read about once now
    (counted: the children asked of ``ast``), and a copy at the bottom is still found."""
    from patched_wheel.patch import _copies_tensor_input

    lines = ["def prepare_inputs(x):"]
    lines += [" " * (d + 1) + "if isinstance(x, torch.Tensor):" for d in range(60)]
    lines += [" " * 61 + "y = f(x) + g(x) * h(x)"] * 500
    real, asked = ast.iter_child_nodes, []

    def counted(node: ast.AST) -> object:
        asked.append(node)
        return real(node)

    for last, copies in (("z = 1", False), ("z = torch.tensor(x)", True)):
        module = ast.parse("\n".join([*lines, " " * 61 + last]) + "\n")
        nodes = sum(1 for _ in ast.walk(module))
        asked.clear()
        monkeypatch.setattr(ast, "iter_child_nodes", counted)
        assert _copies_tensor_input(module, {}) is copies
        monkeypatch.undo()
        assert len(asked) < 2 * nodes, (len(asked), nodes)
