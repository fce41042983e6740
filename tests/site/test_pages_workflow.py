"""The pages workflow: linted, pinned, and made of steps that the tests run (conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path
from typing import Dict, List

import pytest

WORKFLOW = Path(__file__).resolve().parents[2] / ".github" / "workflows" / "pages.yml"
# A step's action, pinned by a full commit id with its release as a comment.
PINNED = re.compile(r"^\s*(?:- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+(?:\.\d+)*$")


def _actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    scripts = os.pathsep.join([sysconfig.get_path("scripts"), os.environ.get("PATH", "")])
    linter = shutil.which("actionlint", path=scripts)  # installed beside this Python
    assert (
        linter is not None
    ), "actionlint is missing: python3 -m pip install -r tests/requirements.txt"
    return subprocess.run(
        [linter, "-no-color", str(path)], capture_output=True, text=True, check=False
    )


def test_the_workflow_passes_actionlint() -> None:
    completed = _actionlint(WORKFLOW)
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_every_action_is_pinned_by_commit() -> None:
    uses = [line for line in WORKFLOW.read_text(encoding="utf-8").splitlines() if "uses:" in line]
    # docs: checkout, setup-python, upload-artifact; build: checkout, setup-python, cache,
    # download-artifact, upload-pages-artifact; deploy: deploy-pages
    assert len(uses) == 9, uses
    assert [line for line in uses if not PINNED.match(line)] == []


def test_every_run_step_is_one_the_tests_run(
    workflow_steps: List[str], run_steps: Dict[str, object]
) -> None:
    assert workflow_steps == list(run_steps)


@pytest.mark.network
def test_the_workflow_builds_the_site(site: Path) -> None:
    wheels = sorted(path.name for path in site.glob("*.whl"))
    # One release, platform and Python: one wheel of each distribution.
    assert [wheel.split("-")[0] for wheel in wheels] == ["torch_tensorrt", "torch_tensorrt_rtx"]
    assert all("+memfix" in wheel for wheel in wheels), wheels
    pages = ["simple/torch-tensorrt/index.html", "simple/torch-tensorrt-rtx/index.html"]
    for page in ("index.html", "simple/index.html", *pages):
        assert (site / page).is_file(), page
    assert (site / "docs" / "getting_started" / "installation.html").is_file()
    assert not (site / "docs" / ".doctrees").exists()  # Sphinx's cache stays out of the site
    assert sorted(p.name for p in site.parent.iterdir() if p.name.startswith("._site")) == []
