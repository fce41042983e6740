"""The site as the pages workflow builds it: every ``run:`` step of
``.github/workflows/pages.yml``, run in a fresh clone of this repository.

The one place where a test departs from the workflow's lines is written here, in
:data:`RUN_STEPS`: the workflow builds the whole matrix (141 wheels, whose bases a CI
runner downloads); here the site command gets ``--release``, ``--platform`` and ``--python``
for the one wheel this machine can install, from the bases the tests already cache.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from patched_wheel.config import DEFAULT_RELEASE

from tests.conftest import build_once

REPOSITORY = Path(__file__).resolve().parent.parent.parent
WORKFLOW = REPOSITORY / ".github" / "workflows" / "pages.yml"
BASE_WHEELS = REPOSITORY / ".cache" / "base-wheels"

RELEASE = DEFAULT_RELEASE  # its patched wheel is the one installed here
PLATFORM = "manylinux_2_28_aarch64" if platform.machine() == "aarch64" else "manylinux_2_28_x86_64"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE_STEP = "python tools/patched_wheel site --out _site --docs docs-html"
# What the docs job hands the build job (its artifact, the same folder of this clone here).
DOCS_STEP = "python -m sphinx -b html -W --keep-going -n -q -d docs-doctrees docsrc docs-html"

# Each run: step of the workflow (the docs job's, then the build job's), and what this machine
# adds to run it. The pip steps install what tests/requirements.txt already installed here, so
# they run with no index (they must find everything installed and change nothing).
RUN_STEPS: Dict[str, Dict[str, object]] = {
    "python -m pip install -r docsrc/requirements.txt": {
        "environment": {"PIP_NO_INDEX": "1"},
        "options": [],
    },
    DOCS_STEP: {"environment": {}, "options": []},
    "python -m pip install 'packaging>=24'": {
        "environment": {"PIP_NO_INDEX": "1"},
        "options": [],
    },
    SITE_STEP: {
        "environment": {},
        "options": ["--release", RELEASE, "--platform", PLATFORM, "--python", PYTHON],
    },
}


def workflow_run_steps() -> List[str]:
    """The ``run:`` steps of the pages workflow, in order, across its jobs."""
    import yaml  # the test requirements' YAML reader, here only

    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    return [
        step["run"].strip()
        for job in workflow["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]


@pytest.fixture(scope="session")
def run_steps() -> Dict[str, Dict[str, object]]:
    """:data:`RUN_STEPS`, for the tests of this folder."""
    return RUN_STEPS


@pytest.fixture(scope="session")
def workflow_steps() -> List[str]:
    """:func:`workflow_run_steps`, for the tests of this folder."""
    return workflow_run_steps()


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``_site`` of a fresh clone in which every ``run:`` step of the workflow has run, with the
    bases cached as the workflow's cache step restores them; built once for all the test
    processes of a run (``build_once``)."""
    folder = build_once(tmp_path_factory, "pages", lambda f: _run_the_workflow(f / "clone"))
    return folder / "clone" / "_site"


def _run_the_workflow(clone: Path) -> None:
    subprocess.run(["git", "clone", "--quiet", str(REPOSITORY), str(clone)], check=True)
    # As CI's clone of main is: the site indexes only wheels of main's released overlays.
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "-B", "main"], check=True)
    # The workflow's cache step: the bases of earlier runs, at the same path
    BASE_WHEELS.mkdir(parents=True, exist_ok=True)
    (clone / ".cache").mkdir()
    (clone / ".cache" / "base-wheels").symlink_to(BASE_WHEELS, target_is_directory=True)
    # setup-python's ``python``: the Python running the tests
    bin_dir = clone.parent / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    for step in workflow_run_steps():
        how = RUN_STEPS[step]
        environment = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        environment.update(how["environment"])  # type: ignore[arg-type]
        command = " ".join([step, *how["options"]])  # type: ignore[list-item]
        completed = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command],
            cwd=clone,
            env=environment,
            capture_output=True,
            text=True,
            check=False,
        )
        assert completed.returncode == 0, f"{command}\n{completed.stdout}{completed.stderr}"
