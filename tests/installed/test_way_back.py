"""The docs' way back to the official wheel holds where an index of patched wheels is set up.

A patched version ``2.14.0+<label>`` meets ``==2.14.0`` (PEP 440), so with the patched index
configured as an extra index (``PIP_EXTRA_INDEX_URL``, pip.conf, ``UV_EXTRA_INDEX_URL``,
``UV_INDEX``) a plain ``==2.14.0`` reinstall takes the patched wheel again. The commands the
README and the install page give are read from them and run here with pip and uv, against a
local index written by the ``index`` code and a folder standing in for PyPI.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from patched_wheel.config import DEFAULT_RELEASE, README, REPOSITORY
from patched_wheel.patch import build_patched_wheel
from patched_wheel.wheel import BaseWheel
from uv import find_uv_bin

from evidence import facts
from tests.installed.installed_helpers import plain_index
from tests.patched_wheel.helpers import make_wheel

PYPI = "https://pypi.org/simple"
INSTALL_PAGE = REPOSITORY / "docsrc" / "getting_started" / "installation.rst"
# A go-back command: pip or uv asking for exactly the release (``===``).
GO_BACK = re.compile(r"^\s*(?:\$ )?((?:uv )?pip install [^\n]*\"torch_tensorrt===[^\n]*)$", re.M)


def go_back_commands(path: Path) -> List[str]:
    """The go-back commands of a page, continuation lines joined."""
    text = re.sub(r"\\\n\s*", "", path.read_text(encoding="utf-8"))
    for name, value in facts.substitutions().items():  # as the built page shows them
        text = text.replace(f"|{name}|", value)
    return GO_BACK.findall(text)


@pytest.fixture(scope="module")
def indexes(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """``pypi``: a folder standing in for PyPI with the official wheel; ``patched``: the
    index of its patched wheel, as ``matrix`` would publish it."""
    official_dir = tmp_path_factory.mktemp("pypi")
    official = make_wheel(official_dir, version=DEFAULT_RELEASE, tag="py3-none-any")
    patched_dir = tmp_path_factory.mktemp("patched")
    build_patched_wheel(BaseWheel(official.read_bytes(), official.name), out_dir=patched_dir)
    return {
        "pypi": plain_index(official_dir).as_uri(),
        "patched": plain_index(patched_dir).as_uri(),
    }


def _environment(**variables: str) -> Dict[str, str]:
    """No configuration of this machine's pip or uv; ``variables`` set."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    environment.update(PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1", **variables)
    return environment


def pip_chooses(command: str, pypi: str, tmp_path: Path, **variables: str) -> List[str]:
    """The versions pip would install for ``command`` (``--dry-run --report``)."""
    arguments = [pypi if a == PYPI else a for a in shlex.split(command)]
    assert arguments[:2] == ["pip", "install"], command
    report = tmp_path / "report.json"
    completed = subprocess.run(
        [sys.executable, "-m", *arguments, "--dry-run", "--quiet", "--report", str(report)],
        capture_output=True,
        text=True,
        env=_environment(**variables),
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return [item["metadata"]["version"] for item in json.loads(report.read_text())["install"]]


def uv_chooses(command: str, pypi: str, tmp_path: Path, **variables: str) -> str:
    """uv's dry-run output for ``command``, installing into a target folder."""
    arguments = [pypi if a == PYPI else a for a in shlex.split(command)]
    assert arguments[:3] == ["uv", "pip", "install"], command
    completed = subprocess.run(
        [find_uv_bin(), *arguments[1:], "--dry-run", "--no-cache", "--target", str(tmp_path)],
        capture_output=True,
        text=True,
        env=_environment(**variables),
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stderr


@pytest.mark.parametrize("page", [README, INSTALL_PAGE], ids=["README", "install-page"])
def test_the_docs_give_a_go_back_command_for_pip_and_uv(page: Path) -> None:
    commands = go_back_commands(page)
    assert [c.split()[0] for c in commands] == ["pip", "uv"], commands


@pytest.mark.parametrize("page", [README, INSTALL_PAGE], ids=["README", "install-page"])
@pytest.mark.parametrize(
    "configured",
    [
        pytest.param("PIP_EXTRA_INDEX_URL", id="extra-index-variable"),
        pytest.param("", id="no-patched-index"),
    ],
)
def test_pip_goes_back_to_the_official_wheel(
    page: Path, configured: str, indexes: Dict[str, str], tmp_path: Path
) -> None:
    command = go_back_commands(page)[0]
    variables = {configured: indexes["patched"]} if configured else {}
    assert pip_chooses(command, indexes["pypi"], tmp_path, **variables) == [DEFAULT_RELEASE]
    on_the_line = f"{command} --extra-index-url {indexes['patched']}"
    assert pip_chooses(on_the_line, indexes["pypi"], tmp_path) == [DEFAULT_RELEASE]


@pytest.mark.parametrize("page", [README, INSTALL_PAGE], ids=["README", "install-page"])
@pytest.mark.parametrize(
    "configured",
    [
        pytest.param("UV_EXTRA_INDEX_URL", id="extra-index-variable"),
        pytest.param("UV_INDEX", id="index-variable"),
        pytest.param("", id="no-patched-index"),
    ],
)
def test_uv_goes_back_to_the_official_wheel(
    page: Path, configured: str, indexes: Dict[str, str], tmp_path: Path
) -> None:
    command = go_back_commands(page)[1]
    variables = {configured: indexes["patched"]} if configured else {}
    output = uv_chooses(command, indexes["pypi"], tmp_path, **variables)
    assert f" + torch-tensorrt=={DEFAULT_RELEASE}\n" in output


def test_a_plain_equals_takes_the_patched_wheel_again(
    indexes: Dict[str, str], tmp_path: Path
) -> None:
    """Why the docs use ``===``: the command they gave before reinstalls the patched wheel."""
    before = f'pip install --force-reinstall --no-deps "torch_tensorrt=={DEFAULT_RELEASE}" --index-url {PYPI}'
    chosen = pip_chooses(before, indexes["pypi"], tmp_path, PIP_EXTRA_INDEX_URL=indexes["patched"])
    assert len(chosen) == 1 and chosen[0].startswith(f"{DEFAULT_RELEASE}+memfix1.")
