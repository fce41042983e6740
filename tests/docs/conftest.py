"""The docs build, once per run for every worker (``build_once``), as a reader runs it.

``python -m sphinx -W --keep-going -n -b html docsrc OUT`` in a subprocess with nothing on
``PYTHONPATH``: ``docsrc/conf.py`` finds its extensions itself, as Sphinx's convention has it
(Sphinx's and matplotlib's own warnings are judged by ``-W``, not by pytest's filters).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import build_once

REPOSITORY = Path(__file__).resolve().parents[2]
DOCSRC = REPOSITORY / "docsrc"
BUILD_TIMEOUT_S = 170


@pytest.fixture(scope="session")
def built_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML docs, built once; a failed build fails with Sphinx's output."""
    return build_once(tmp_path_factory, "docs", _build) / "html"


def _build(folder: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment.update(MPLBACKEND="Agg", PYTHONWARNINGS="")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html"]
    command += ["-d", str(folder / "doctrees"), str(DOCSRC), str(folder / "html")]
    try:
        result = subprocess.run(
            command,
            cwd=folder.parent,
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
