"""Every command the README and the docs' own pages show works as written.

Commands are read from the files: the README's indented code blocks, and the docs pages'
``console`` blocks (``$`` lines) and literal blocks of shell commands. Each one either runs
here, from the repository's root, and must exit 0, or is listed in :data:`NOT_RUN` with the
reason (a GPU, the network, a file of the user's): a new command must be reviewed into one or
the other, and an entry whose command is gone fails too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
PAGES = ["index.rst", "benchmarks.rst", "debugging/troubleshooting.rst"]
PAGES += ["tutorials/resource_memory/resource_management.rst"]
SHELL = ("python", "python3", "pip", "uv", "rm", "make", "cat", "TORCHTRT_", "PIP_", "LD_")
NETWORK = "downloads from PyPI or another index"
RTX_WHEELS = "needs the wheels the two downloads above fetch"
RTX_BASE = "torch_tensorrt_rtx-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"

# command (as written) -> why this test does not run it
NOT_RUN: Dict[str, str] = {
    "rm -rf dist/default && pip wheel . --no-deps -w dist/default": NETWORK,
    "python3 -m pip install -r tests/requirements.txt && python3 -m pytest": "the suite itself",
    "pip install dist/default/torch_tensorrt-*.whl": "installs torch and TensorRT: " + NETWORK,
    "pip install .": NETWORK,
    'pip install "git+<url of this repository>@<commit>"': "a placeholder: " + NETWORK,
    'pip install --extra-index-url file://$PWD/DIR/simple "torch_tensorrt==2.14.0+memfix1.4"': (
        "needs a site built into DIR: " + NETWORK
    ),
    'uv pip install --extra-index-url file://$PWD/DIR/simple "torch_tensorrt==2.14.0+memfix1.4"': (
        "needs a site built into DIR: " + NETWORK
    ),
    "rm -rf dist/installed && TORCHTRT_BASE_VERSION=installed pip wheel . --no-deps -w "
    "dist/installed": "needs torch_tensorrt installed, which needs TensorRT",
    "pip install --no-deps dist/installed/torch_tensorrt-*.whl": "follows the line above",
    'pip install --force-reinstall --no-deps "torch_tensorrt===2.14.0" --index-url '
    "https://pypi.org/simple": NETWORK,
    'uv pip install --reinstall --no-deps "torch_tensorrt===2.14.0" --index-url '
    "https://pypi.org/simple --index-strategy unsafe-best-match": NETWORK,
    "python3 -m pip install --extra-index-url https://download.pytorch.org/whl/cpu -r "
    "tests/requirements.txt && python3 -m pytest": "the suite itself, " + NETWORK,
    "python3 tests/fetch_wheels.py": NETWORK,
    "PIP_NO_INDEX=1 UV_OFFLINE=1 python3 -m pytest": "the suite itself",
    "pip show torch_tensorrt": "needs torch_tensorrt installed, which needs TensorRT",
    "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM=0 python compile_my_model.py": "the user's own script",
    "cat /sys/fs/cgroup/memory.max": "reads the machine's cgroup, which may have no limit",
    "cat /sys/fs/cgroup/memory.events": "reads the machine's cgroup",
    "cat /sys/fs/cgroup/memory.peak": "reads the machine's cgroup",
    # benchmarks.rst: the compile benchmark, fetched here and run on a GPU machine
    "pip download --no-deps --only-binary=:all: --python-version 3.12 --platform "
    "manylinux_2_28_x86_64 -d gpu/wheels torch-tensorrt-rtx==2.11.0 "
    "tensorrt-rtx-cu13-bindings==1.4.0.76 tensorrt-rtx-cu13-libs==1.4.0.76 dllist": NETWORK,
    "pip download --no-deps --no-binary=:all: -d gpu/wheels tensorrt-rtx-cu13==1.4.0.76": NETWORK,
    "pip wheel --no-deps -w gpu/wheels gpu/wheels/tensorrt_rtx_cu13-1.4.0.76.tar.gz": RTX_WHEELS,
    "pip install --no-index --no-deps --target gpu/trt gpu/wheels/tensorrt_rtx_cu13*.whl "
    "gpu/wheels/dllist-*.whl": RTX_WHEELS,
    f"pip install --no-index --no-deps --target gpu/official gpu/wheels/{RTX_BASE}": RTX_WHEELS,
    "python tools/patched_wheel build --distribution torch-tensorrt-rtx --base-wheel "
    f"gpu/wheels/{RTX_BASE} --out gpu/forkwheel": RTX_WHEELS,
    "pip install --no-index --no-deps --target gpu/fork gpu/forkwheel/torch_tensorrt_rtx-*.whl": (
        RTX_WHEELS
    ),
    "LD_LIBRARY_PATH=$PWD/gpu/trt/tensorrt_rtx_libs python -m benchmarks run compile --plan "
    "record --trt gpu/trt --wheels official=gpu/official fork=gpu/fork --out "
    "benchmarks/results/compile_record.json": "needs a GPU and TensorRT-RTX (the lines above)",
}


def _readme_commands(text: str) -> List[str]:
    blocks = re.findall(r"(?:\A|\n\n)((?:(?: {4,}\S.*)(?:\n|\Z))+)", text)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def _page_commands(text: str) -> List[str]:
    found = []
    for block in re.findall(r"(?:::|\.\. code-block:: console)\n\n((?:(?: {3,}.*)?\n)+)", text):
        for line in (line.strip() for line in block.splitlines()):
            line = line[2:] if line.startswith("$ ") else line
            if line.startswith(SHELL):
                found.append(line)
    return found


def _documented() -> List[Tuple[str, str]]:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    commands = [("README.md", command) for command in _readme_commands(readme)]
    for page in PAGES:
        text = (REPOSITORY / "docsrc" / page).read_text(encoding="utf-8")
        commands += [(page, command) for command in _page_commands(text)]
    return commands


DOCUMENTED = _documented()
RUN = [item for item in dict.fromkeys(DOCUMENTED) if item[1] not in NOT_RUN]


def test_every_entry_of_the_list_is_still_documented() -> None:
    shown = {command for _, command in DOCUMENTED}
    assert sorted(set(NOT_RUN) - shown) == []


@pytest.mark.parametrize("where, command", [pytest.param(*item, id=item[1]) for item in RUN])
def test_command_works_as_written(where: str, command: str) -> None:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"{where}: {command!r} failed:\n{done.stdout}\n{done.stderr}"
