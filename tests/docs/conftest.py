"""The docs build, once per run, shared by every test of the built pages (pytest-xdist's
workers share it through a lock file, as tests/site's workflow run is shared).

The build runs in a subprocess (Sphinx and matplotlib's own warnings are judged by ``-W``, not
by pytest's warning filters), into a temporary folder, with the folders it imports from on
``PYTHONPATH`` as ``make -C docsrc html`` puts them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock
from patched_wheel.site import docs_environment

REPOSITORY = Path(__file__).resolve().parents[2]
DOCSRC = REPOSITORY / "docsrc"
BUILD_TIMEOUT_S = 170


@pytest.fixture(scope="session")
def built_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the HTML docs once, as ``make -C docsrc html`` does; fail with Sphinx's output."""
    shared = tmp_path_factory.getbasetemp().parent  # every worker's temporary folders' parent
    out, doctrees = shared / "docs" / "html", shared / "docs" / "doctrees"
    with FileLock(str(shared / "docs.lock")):
        if not (out / "index.html").is_file():
            _build(out, doctrees)
    return out


def _build(out: Path, doctrees: Path) -> None:
    environment = dict(docs_environment(), MPLBACKEND="Agg", PYTHONWARNINGS="")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    command += ["-d", str(doctrees), str(DOCSRC), str(out)]
    try:
        result = subprocess.run(
            command,
            cwd=REPOSITORY,
            env=environment,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the docs build took more than {BUILD_TIMEOUT_S} s: {' '.join(command)}")
    assert result.returncode == 0, (
        f"the docs build failed (exit {result.returncode}); run "
        f"'make -C docsrc html' to see it:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
    )
