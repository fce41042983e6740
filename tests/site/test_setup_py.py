"""``setup.py``: a thin entry into the one build. ``python setup.py bdist_wheel`` writes the
bytes ``pip wheel .`` writes; pip itself never runs the file; nothing else is pretended."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.patched_wheel.helpers import names

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (docsrc/requirements.txt)
    import tomli as tomllib

REPOSITORY = Path(__file__).resolve().parents[2]
SETUP = REPOSITORY / "setup.py"
PIP_WHEEL = (sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation")


def _run(*command: str, cwd: Path = REPOSITORY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)


def _one_wheel(folder: Path) -> Path:
    wheels = list(folder.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_help_says_what_it_supports() -> None:
    completed = _run(sys.executable, str(SETUP), "--help")
    assert completed.returncode == 0 and completed.stderr == ""
    usage = completed.stdout.splitlines()[0].split()
    assert usage[:4] == ["usage:", "python", "setup.py", "bdist_wheel"] and "[--dist-dir" in usage


def test_another_command_is_refused_with_what_to_type(tmp_path: Path) -> None:
    completed = _run(sys.executable, str(SETUP), "develop", cwd=tmp_path)
    assert completed.returncode == 2 and completed.stdout == ""
    (line,) = completed.stderr.splitlines()
    assert names(line, "'python setup.py develop'", "pip install .").startswith("error: ")
    assert list(tmp_path.iterdir()) == []


def test_it_names_the_backend_that_pyproject_names() -> None:
    build_system = tomllib.loads((REPOSITORY / "pyproject.toml").read_text())["build-system"]
    source = SETUP.read_text(encoding="utf-8")
    assert f'BACKEND_PATH = "{build_system["backend-path"][0]}"' in source
    assert f'BUILD_BACKEND = "{build_system["build-backend"]}"' in source
    check = f"""
import runpy, sys
sys.argv = ['setup.py', '--help']
try:
    runpy.run_path({str(SETUP)!r}, run_name='__main__')
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.split('.')[0] in ('setuptools', 'distutils')))
"""
    imported = _run(sys.executable, "-c", check)
    assert imported.stdout.splitlines()[-1] == "[]"  # nothing of setuptools, not even imported


@pytest.mark.network
def test_bdist_wheel_writes_the_bytes_pip_wheel_writes(tmp_path: Path) -> None:
    completed = _run(sys.executable, str(SETUP), "bdist_wheel", "--dist-dir", str(tmp_path / "a"))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    completed = _run(*PIP_WHEEL, "-w", str(tmp_path / "b"))
    assert completed.returncode == 0, completed.stdout + completed.stderr
    setup_wheel, pip_wheel = _one_wheel(tmp_path / "a"), _one_wheel(tmp_path / "b")
    assert setup_wheel.name == pip_wheel.name
    digest = hashlib.sha256(setup_wheel.read_bytes()).hexdigest()
    assert digest == hashlib.sha256(pip_wheel.read_bytes()).hexdigest()


@pytest.mark.network
def test_pip_wheel_never_runs_setup_py(tmp_path: Path) -> None:
    """In a copy of the tree whose ``setup.py`` leaves a mark and fails, ``pip wheel .`` still
    builds, and leaves no mark: pip uses the backend that ``pyproject.toml`` names."""
    tree = tmp_path / "tree"
    for name in ("tools", "py"):
        shutil.copytree(
            REPOSITORY / name, tree / name, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPOSITORY / name, tree / name)
    (tree / ".cache").symlink_to(REPOSITORY / ".cache", target_is_directory=True)
    mark = tmp_path / "setup.py-ran"
    (tree / "setup.py").write_text(f"open({str(mark)!r}, 'w').close()\nraise SystemExit(1)\n")
    completed = _run(*PIP_WHEEL, "-w", str(tmp_path / "out"), cwd=tree)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert _one_wheel(tmp_path / "out").name.startswith("torch_tensorrt-")
    assert not mark.exists()
