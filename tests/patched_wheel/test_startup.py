"""What runs is what is hashed: the tool starts isolated, runs its own modules from their source,
and refuses a module that would stand in for an installed one, on every route in."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path
from typing import Tuple

import pytest

from tests.patched_wheel.helpers import RELEASED, TOOL_PATH, refusal, run_tool

Released = Tuple[Path, Path, Path, Path]

# A module that leaves a mark where $MARK says, then runs the standard library's module of its
# name in its place (so that nothing else tells it apart), or nothing for sitecustomize.
SHADOW = """\
import os
open(os.environ["MARK"], "a").write(__name__ + " ran\\n")
_std = os.path.join(os.path.dirname(os.__file__), __name__ + ".py")
if os.path.exists(_std):
    exec(compile(open(_std).read(), _std, "exec"))
"""


def _build(repo: Path, base: Path, lock: Path, mark: Path, **environ: str) -> Tuple[int, str]:
    out = repo.parent / "dist"
    options = ["--base-wheel", str(base), "--lock", str(lock), "--out", str(out)]
    done = run_tool(repo, "build", *options, MARK=str(mark), **environ)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    "planted",
    [
        pytest.param("tools/tokenize.py", id="beside-the-package"),
        pytest.param("tools/packaging.py", id="packaging-beside-the-package"),
        pytest.param("tools/patched_wheel/reprlib.py", id="in-the-package-at-start-up"),
    ],
)
def test_a_module_standing_in_for_an_installed_one_is_refused(
    released: Released, planted: str
) -> None:
    repo, base, lock, _ = released
    (repo / planted).write_text(SHADOW)
    mark = repo.parent / "mark"
    done = run_tool(repo, "build", "--base-wheel", str(base), "--lock", str(lock), MARK=str(mark))
    refusal(done, os.path.basename(planted))
    assert not (repo / "dist").exists()


def test_nothing_on_pythonpath_runs_in_the_build(released: Released, tmp_path: Path) -> None:
    repo, base, lock, _ = released
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "tokenize.py").write_text(SHADOW)
    mark = tmp_path / "mark"
    status, output = _build(repo, base, lock, mark, PYTHONPATH=str(tmp_path / "path"))
    assert status == 0 and f"+{RELEASED}-" in output and not mark.exists()
    # A sitecustomize there runs before any file of the tool: refused, once it has
    (tmp_path / "path" / "sitecustomize.py").write_text(SHADOW)
    done = run_tool(repo, "--version", MARK=str(mark), PYTHONPATH=str(tmp_path / "path"))
    refusal(done, "sitecustomize.py", "PYTHONPATH")


def test_a_pyc_beside_a_module_of_the_tool_never_runs(released: Released) -> None:
    """A ``.pyc`` that Python would run without looking at the source (an unchecked hash)."""
    repo, base, lock, _ = released
    tool, mark = repo / TOOL_PATH, repo.parent / "mark"
    changed = repo.parent / "patch.py"
    changed.write_text((tool / "patch.py").read_text() + SHADOW.split("_std")[0])
    tag = sys.implementation.cache_tag
    unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
    py_compile.compile(
        str(changed), cfile=str(tool / f"__pycache__/patch.{tag}.pyc"), invalidation_mode=unchecked
    )
    status, output = _build(repo, base, lock, mark)
    assert status == 0 and f"+{RELEASED}-" in output and not mark.exists()


def test_the_backend_refuses_a_module_beside_the_package(released: Released) -> None:
    """pip imports the backend from ``backend-path`` (``tools``), where it finds any module
    first: refused before the build imports anything more."""
    repo, base, _, _ = released
    for name in ("pyproject.toml", "setup.py"):
        (repo / name).write_bytes((Path(__file__).parents[2] / name).read_bytes())
    (repo / "tools" / "packaging.py").write_text(SHADOW)
    mark = repo.parent / "mark"
    environ = {**os.environ, "MARK": str(mark), "TORCHTRT_BASE_WHEEL": str(base)}
    environ["TORCHTRT_BASE_UNLOCKED"] = "1"
    pip = [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation"]
    for command in (pip + ["-w", "out"], [sys.executable, "setup.py", "bdist_wheel"]):
        done = subprocess.run(command, cwd=repo, env=environ, capture_output=True, text=True)
        assert done.returncode != 0 and "tools/packaging.py' would run" in done.stderr
        assert not mark.exists() and not list(repo.glob("*/*.whl"))
