"""Every command the repository documents works as written.

Commands are read from where a reader finds them, each place found afresh:

* Markdown (``README.md``, the benchmarks' READMEs): every line of an indented code block;
* every page of the docs (``docsrc/**/*.rst``): the ``$`` lines of ``console`` code blocks and
  of ``parsed-literal`` blocks, and the command lines of ``::`` literal blocks. A line that ends
  in ``\\`` goes on on the next, and a ``parsed-literal`` block's substitutions (``|name|``, from
  ``docsrc/conf.py``) are replaced as the built page shows them;
* docstrings (``benchmarks/``, ``tools/``, ``docsrc/``, ``setup.py``,
  ``tests/fetch_wheels.py``): the command lines of their indented blocks and their
  ``python ...`` literals;
* help texts: the ``--help`` of the build tool and each of its commands, of each benchmark and
  of ``setup.py``, and the ``python`` commands they name;
* the pages workflow's ``run:`` steps.

Each command either runs here and must exit 0, or is listed in :data:`NOT_RUN` with the reason
(a GPU, TensorRT, a download, a file of the user's, a placeholder): a new command must be
reviewed into one or the other, and an entry whose command is gone fails too. A command runs
in a fresh copy of this checkout (its files as they are, git-ignored ones left out, ``.cache``
linked, one commit of them), with ``python``, ``python3`` and ``pip`` the Python that runs the
tests and, but for :data:`TAKES_A_BASE`, no package index (``PIP_NO_INDEX``): what it writes
never reaches the checkout, and one that would download fails instead.
"""

from __future__ import annotations

import argparse
import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from tests.conftest import build_once

REPOSITORY = Path(__file__).resolve().parents[2]
DOCSRC = REPOSITORY / "docsrc"
WORKFLOWS = REPOSITORY / ".github" / "workflows"
MARKDOWN = [REPOSITORY / "README.md", *sorted((REPOSITORY / "benchmarks").rglob("*.md"))]
DOCSTRING_FILES = [REPOSITORY / "setup.py", REPOSITORY / "tests" / "fetch_wheels.py"]
DOCSTRING_FILES += [
    p for d in ("benchmarks", "tools", "docsrc") for p in (REPOSITORY / d).rglob("*.py")
]
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]

# A command line: environment settings, then one of these programs.
COMMAND = re.compile(r"(?:[A-Z][A-Z0-9_]*=\S*\s+)*(?:python3?|pip|uv|rm|make|cat|git|apt-get)\s")
# A python command named in prose: up to a bracket, a quote, a semicolon or a clause's end.
PROSE_COMMAND = re.compile(r"(?<![\w/.-])python3? [^()'\";\n]*?(?=[)'\";]|, |: |\.?\s*$)", re.M)

NETWORK = "downloads from PyPI or another index"
INSTALLS = "installs torch and TensorRT (GBs): " + NETWORK
NEEDS_TORCHTRT = "needs torch_tensorrt installed, which needs TensorRT"
MATRIX = "builds all 141 wheels of the supported matrix from as many official ones (454 MB)"
PLACEHOLDER = "a placeholder, not a command to run as it stands"
SUITE = "the test suite itself"
DOCS_BUILD = "builds the docs (5 s here); tests/docs builds them once a run, with -W -n"
WORKFLOW = "a step of the pages workflow: tests/site runs every one in a fresh clone, as CI"
RTX_WHEELS = "needs the wheels the two downloads above fetch"
RTX_BASE = "torch_tensorrt_rtx-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"
ISOLATED = "pip's isolated build installs packaging and pip from an index: " + NETWORK
PATCHED_312 = "torch_tensorrt-2.14.0+memfix1.4-cp312-cp312-manylinux_2_28_x86_64.whl"
OWN = "compiles on a GPU with TensorRT (tests/benchmarks/test_own_compile.py runs its path on CPU)"

CHECK_INSTALLED = (
    "python -c 'import importlib.metadata as md, json, os; d = md.distribution(md.packages_"
    'distributions()["torch_tensorrt"][0]); f = [p for p in d.files or () if p.name == "patched_'
    'wheel.cdx.json"]; s = {p["name"]: p["value"] for p in json.loads(f[0].read_text())["metadata"]'
    '["component"]["properties"]} if f else {}; print(d.metadata["Name"], d.version, "fixes:", '
    's.get("patched_wheel:fixes", "none (not a patched wheel)")); print("TORCHTRT_* set:", {k: v '
    'for k, v in os.environ.items() if k.startswith("TORCHTRT_")} or "none")\''
)

# command (as written, continuation lines joined) -> why this test does not run it
NOT_RUN: Dict[str, str] = {
    # the install page: a build for a DGX Spark, and the check of an installed wheel
    "rm -rf dist/spark && TORCHTRT_BASE_PLATFORM=manylinux_2_28_aarch64 TORCHTRT_BASE_PYTHON=3.12 "
    "pip wheel . --no-deps -w dist/spark": ISOLATED,
    "python tools/patched_wheel provenance dist/spark/torch_tensorrt-*.whl": "needs the wheel "
    "the line above builds",
    "pip install torch_tensorrt-*-cp312-cp312-manylinux_2_28_aarch64.whl": INSTALLS,
    CHECK_INSTALLED: "needs a patched wheel installed (run by hand on 2.14.0+memfix1.4 installed "
    "with pip --target)",
    # README.md and the docs' first page and install page
    "rm -rf dist/default && pip wheel . --no-deps -w dist/default": ISOLATED,
    "python3 -m pip install -r tests/requirements.txt && python3 -m pytest": SUITE,
    "pip install dist/default/torch_tensorrt-*.whl": INSTALLS,
    "pip install .": INSTALLS,
    'pip install "git+<url of this repository>@<commit>"': PLACEHOLDER,
    'pip install --extra-index-url file://$PWD/DIR/simple "torch_tensorrt==2.14.0+memfix1.4"': (
        "needs a site built into DIR; " + INSTALLS
    ),
    'uv pip install --extra-index-url file://$PWD/DIR/simple "torch_tensorrt==2.14.0+memfix1.4"': (
        "needs a site built into DIR; " + INSTALLS
    ),
    "rm -rf dist/installed && TORCHTRT_BASE_VERSION=installed pip wheel . --no-deps -w "
    "dist/installed": NEEDS_TORCHTRT,
    "pip install --no-deps dist/installed/torch_tensorrt-*.whl": "follows the line above",
    'pip install --force-reinstall --no-deps "torch_tensorrt===2.14.0" --index-url '
    "https://pypi.org/simple": NETWORK,
    'uv pip install --reinstall --no-deps "torch_tensorrt===2.14.0" --index-url '
    "https://pypi.org/simple --index-strategy unsafe-best-match": NETWORK,
    "python3 -m pip install --extra-index-url https://download.pytorch.org/whl/cpu -r "
    "tests/requirements.txt && python3 -m pytest": SUITE + ", " + NETWORK,
    "python tools/patched_wheel site --out site": MATRIX + ", and the docs",
    "python tools/patched_wheel matrix --out wheelhouse": MATRIX,
    "pip install --extra-index-url https://wheels.example.org/simple "
    '"torch_tensorrt==2.14.0+memfix1.4"': "an example host; " + INSTALLS,
    "uv pip install --extra-index-url https://wheels.example.org/simple "
    '"torch_tensorrt==2.14.0+memfix1.4"': "an example host; " + INSTALLS,
    "rm -rf dist/local && python tools/patched_wheel build --release installed --out dist/local": (
        NEEDS_TORCHTRT
    ),
    "pip install --no-deps dist/local/torch_tensorrt-2.10.0a0+abc1234.memfix1.*.whl": (
        "needs a source build of torch_tensorrt 2.10.0a0+abc1234 installed (an example)"
    ),
    "pip install --force-reinstall --no-deps "
    "dist/local/torch_tensorrt-2.10.0a0+abc1234-cp311-cp311-linux_x86_64.whl": (
        "needs a source build of torch_tensorrt 2.10.0a0+abc1234 installed (an example)"
    ),
    "TORCHTRT_BASE_VERSION=2.12.1 TORCHTRT_BASE_PLATFORM=manylinux_2_28_aarch64 "
    "TORCHTRT_BASE_PYTHON=3.12 pip wheel . --no-deps -w dist": (
        "fetches the aarch64 base; " + ISOLATED
    ),
    "pip download torch-tensorrt==2.14.0 --no-deps --only-binary=:all: --platform "
    "manylinux_2_28_x86_64 --python-version 3.12 -d wheels": NETWORK,
    "export TORCHTRT_BASE_WHEEL=$PWD/wheels/torch_tensorrt-2.14.0-cp312-cp312-"
    "manylinux_2_28_x86_64.whl": "only sets the variable that the next line's build reads",
    "pip wheel . --no-deps --no-build-isolation -w dist": (
        "needs the official wheel that the pip download above fetches into wheels/"
    ),
    "pip show torch_tensorrt": NEEDS_TORCHTRT,
    'pip install --force-reinstall --no-deps --index-url https://pypi.org/simple "torch_tensorrt'
    '===2.14.0"': NETWORK,
    "uv pip install --reinstall --no-deps --index-url https://pypi.org/simple --index-strategy "
    'unsafe-best-match "torch_tensorrt===2.14.0"': NETWORK,
    # troubleshooting
    "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM=0 python compile_my_model.py": "the user's own script",
    "cat /sys/fs/cgroup/memory.max": "reads the container's cgroup v2, which a machine may lack",
    "cat /sys/fs/cgroup/memory.events": "reads the container's cgroup v2",
    "cat /sys/fs/cgroup/memory.peak": "reads the container's cgroup v2 (Linux 5.19 or newer)",
    # the build tool's reference
    "python tools/patched_wheel build --base-wheel "
    "~/wheels/torch_tensorrt-2.13.0-cp311-cp311-win_amd64.whl": "a wheel of the user's",
    "python tools/patched_wheel build --release 2.14.0 --platform manylinux_2_28_aarch64 "
    "--python 3.12 --out wheelhouse": "fetches the aarch64 base: " + NETWORK,
    "python tools/patched_wheel build --release installed": NEEDS_TORCHTRT,
    "python tools/patched_wheel matrix --out dist/matrix": MATRIX,
    "python tools/patched_wheel index dist/matrix": "needs the matrix the line above builds",
    'pip install --extra-index-url file://$PWD/dist/matrix/simple "torch_tensorrt==2.14.0+memfix'
    '1.4"': "needs the matrix built above; " + INSTALLS,
    "python tools/patched_wheel lock": "downloads every official wheel afresh (454 MB)",
    "python tools/patched_wheel lock --release 2.14.0": "downloads 25 official wheels afresh",
    "python tools/patched_wheel matrix --update-docs": MATRIX,
    "python tools/patched_wheel matrix --release 2.13.0 --release 2.14.0 --platform "
    "manylinux_2_28_aarch64 --out wheelhouse": "fetches 9 aarch64 bases: " + NETWORK,
    f"python tools/patched_wheel provenance dist/{PATCHED_312}": (
        "needs that wheel (for Python 3.12) in dist/"
    ),
    "python tools/patched_wheel site --out _site": MATRIX + ", and the docs",
    "python -m sphinx -b html docsrc docs-html": DOCS_BUILD,
    "python tools/patched_wheel site --out _site --docs docs-html --release 2.14.0": (
        "needs the docs built above, and fetches 25 bases of 2.14.0: " + NETWORK
    ),
    "python tools/patched_wheel verify "
    "torch_tensorrt-2.14.0+memfix1.2-cp312-cp312-manylinux_2_28_x86_64.whl": (
        "needs that wheel, taken from an index, and fetches its base: " + NETWORK
    ),
    "python tools/patched_wheel verify "
    "dist/torch_tensorrt-2.14.0+memfix1.2-cp312-cp312-manylinux_2_28_x86_64.whl --base-wheel "
    "torch_tensorrt-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl": (
        "needs that wheel and its official base, files of the user's"
    ),
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
    # the benchmarks' READMEs and docstrings
    "apt-get update && apt-get install -y libjemalloc2": "installs a system package: root, "
    + NETWORK,
    "pip install torch": INSTALLS,
    "python -m benchmarks run host-heap": "a benchmark run: 12 GiB bursts (it wants 14 GiB "
    "free), minutes",
    "python -m benchmarks run offload --plan headline": "needs a GPU",
    "python -m benchmarks run host-heap-steady-loop": "a benchmark run (9 s here, too long for "
    "the suite) that rewrites its result file",
    "python -m benchmarks run build-speed [--repeat 7] [--skip-matrix] [--with-tests]": (
        "a usage line ([...] are optional)"
    ),
    "python -m benchmarks run compile": "names the benchmark; it needs --wheels, a GPU and "
    "TensorRT-RTX (the docs' benchmarks page)",
    "python -m benchmarks run own-compile MODULE:FUNCTION": PLACEHOLDER,
    "python -m benchmarks run own-compile MODULE:FUNCTION [options]": PLACEHOLDER,
    "python -m benchmarks run own-compile benchmarks.own_compile.example:small_llama": OWN,
    "python -m benchmarks run own-compile benchmarks.own_compile.example:small_llama --offload "
    "on": OWN,
    "PYTHONPATH=$HOME/mycode python -m benchmarks run own-compile my_model:build --offload on "
    "--out my_compile.json": "a file of the user's; " + OWN,
    "python -m benchmarks run NAME [its options]": PLACEHOLDER,
    "python -m benchmarks run NAME --help": PLACEHOLDER + " (each NAME's --help runs here)",
    "python -m benchmarks run NAME": PLACEHOLDER,
    "python -m benchmarks run NAME ...": PLACEHOLDER,
    "python -m benchmarks.compile.case SPEC": PLACEHOLDER,
    "python -m benchmarks.compile.sampler PID INTERVAL OUT": PLACEHOLDER,
    "python tools/patched_wheel matrix": MATRIX,
    "python -m pytest": SUITE,
    "python3 tests/fetch_wheels.py": "fetches the tests' official wheels and build requirements: "
    + NETWORK,
    "PIP_NO_INDEX=1 UV_OFFLINE=1 python3 -m pytest": SUITE,
    "python tests/fetch_wheels.py": "fetches the tests' official wheels and build requirements: "
    + NETWORK,
    "PIP_NO_INDEX=1 UV_OFFLINE=1 python -m pytest": SUITE,
    # the build tool's docstrings, the docs' conf.py and setup.py
    "python tools/patched_wheel <command>": PLACEHOLDER + " (each command's --help runs here)",
    "python -m build": ISOLATED,
    "python -m build --sdist": ISOLATED,
    "python -m sphinx -b html docsrc DIR": PLACEHOLDER + "; " + DOCS_BUILD,
    "python -m sphinx -W -b html docsrc OUT": PLACEHOLDER + "; " + DOCS_BUILD,
    # the pages workflow
    "python -m pip install -r docsrc/requirements.txt": WORKFLOW,
    "python -m sphinx -b html -W --keep-going -n -q -d docs-doctrees docsrc docs-html": WORKFLOW,
    "python -m pip install 'packaging>=24'": WORKFLOW,
    "python tools/patched_wheel site --out _site --docs docs-html": WORKFLOW,
}

# Commands that take the default release's official wheel for this Python, from the cache
# where it is there (tests/fetch_wheels.py fetches it), else from the index: marked ``network``,
# as the fixtures that fetch are, and run with the index.
TAKES_A_BASE = {"python tools/patched_wheel build", "python setup.py bdist_wheel"}


def _joined(lines: List[str]) -> List[str]:
    """Lines with each ``\\`` continuation joined to the line before, trailing comments cut."""
    commands: List[str] = []
    going_on = False
    for line in (line.strip() for line in lines):
        if going_on:
            commands[-1] = commands[-1][:-1].rstrip() + " " + line
        else:
            commands.append(line)
        going_on = line.endswith("\\")
    return [re.sub(r"\s+#\s.*$", "", command) for command in commands if command]


def _markdown_commands(text: str) -> List[str]:
    blocks = re.findall(r"(?:\A|\n\n)((?:(?: {4,}\S.*)(?:\n|\Z))+)", text)
    return [command for block in blocks for command in _joined(block.splitlines())]


def _rst_blocks(text: str) -> Iterator[Tuple[str, List[str]]]:
    """(kind, lines) of each literal block: ``console``, another code-block language,
    ``parsed-literal`` or ``literal`` (a paragraph's ``::``)."""
    lines = text.splitlines()
    for number, line in enumerate(lines):
        directive = re.match(r"\s*\.\. (?:code-block|code|sourcecode)::\s*(\S+)", line)
        if directive is not None:
            kind = directive.group(1)
        elif re.match(r"\s*\.\. parsed-literal::\s*$", line):
            kind = "parsed-literal"
        elif line.rstrip().endswith("::") and not line.lstrip().startswith(".."):
            kind = "literal"
        else:
            continue
        indent = len(line) - len(line.lstrip())
        body = []
        for following in lines[number + 1 :]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            body.append(following)
        yield kind, textwrap.dedent("\n".join(body)).splitlines()


def _shown_commands(lines: List[str]) -> List[str]:
    """The ``$`` lines of a block where it has any, else its command lines."""
    prompted = [line.startswith("$ ") for line in lines]
    if any(prompted):
        starts = [number for number, is_prompt in enumerate(prompted) if is_prompt]
        commands = []
        for start in starts:
            command = [lines[start][2:]]
            for line in lines[start + 1 :]:
                if not command[-1].rstrip().endswith("\\"):
                    break
                command.append(line)
            commands += _joined(command)
        return commands
    return [command for command in _joined(lines) if COMMAND.match(command)]


def substitutions() -> Dict[str, str]:
    """``|name|`` -> its text as a page shows it, from ``docsrc/conf.py``'s rst_prolog and
    rst_epilog (conf.py run in a process of its own: it changes ``sys.path``)."""
    script = (
        "import runpy, sys; conf = runpy.run_path(sys.argv[1]); "
        "print(conf.get('rst_prolog', '') + conf.get('rst_epilog', ''))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(DOCSRC / "conf.py")],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.findall(r"^\.\. \|([^|]+)\| replace:: (.*)$", done.stdout, re.M)
    return {name: re.sub(r"``(.+?)``", r"\1", value) for name, value in found}


def _page_commands(text: str, replace: Dict[str, str]) -> List[str]:
    commands = []
    for kind, lines in _rst_blocks(text):
        if kind == "parsed-literal":
            lines = [re.sub(r"\|([^|\s]+)\|", lambda m: replace[m.group(1)], x) for x in lines]
        if kind in ("console", "parsed-literal", "literal"):
            commands += _shown_commands(lines)
        elif kind in ("bash", "sh", "shell"):
            commands += [c for c in _joined(lines) if not c.startswith("#")]
    return commands


def _docstring_commands(docstring: str) -> List[str]:
    """The command lines of a docstring's indented blocks, and its ``python ...`` literals."""
    indented = [line for line in docstring.splitlines() if line.startswith("    ")]
    commands = [command for command in _joined(indented) if COMMAND.match(command)]
    for literal in re.findall(r"``(.+?)``", docstring, re.S):
        literal = " ".join(literal.split())
        if re.match(r"(?:[A-Z][A-Z0-9_]*=\S*\s+)*python3? ", literal):
            commands.append(literal)
    return commands


def _docstrings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                yield docstring


def _workflow_steps() -> List[Tuple[str, str]]:
    import yaml  # the test requirements' YAML reader, here only

    steps = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job in workflow["jobs"].values():
            for step in job.get("steps", []):
                if "run" in step:
                    where = str(path.relative_to(REPOSITORY))
                    steps += [(where, command) for command in _joined(step["run"].splitlines())]
    return steps


def _pages() -> List[Path]:
    return sorted(p for p in DOCSRC.rglob("*.rst") if "_build" not in p.relative_to(DOCSRC).parts)


def documented() -> List[Tuple[str, str]]:
    """(where, command) of every command the files document; help texts apart."""
    found: List[Tuple[str, str]] = []
    for path in MARKDOWN:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPOSITORY))
        found += [(where, command) for command in _markdown_commands(text)]
    replace = substitutions()
    for path in _pages():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPOSITORY))
        found += [(where, command) for command in _page_commands(text, replace)]
    for path in sorted(set(DOCSTRING_FILES)):
        where = f"{path.relative_to(REPOSITORY)} (docstring)"
        for docstring in _docstrings(path):
            found += [(where, command) for command in _docstring_commands(docstring)]
    return found + _workflow_steps()


def help_commands() -> List[str]:
    """The ``--help`` of the build tool and each of its commands, of each benchmark (the
    placeholders ``<command>`` and ``NAME`` made real) and of ``setup.py``."""
    from patched_wheel.__main__ import argument_parser

    from benchmarks.__main__ import BENCHMARKS

    actions = argument_parser()._actions
    (subparsers,) = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
    tool = ["python tools/patched_wheel --help"]
    tool += [f"python tools/patched_wheel {name} --help" for name in subparsers.choices]
    tool += [f"python -m benchmarks run {name} --help" for name in BENCHMARKS]
    return tool + ["python -m benchmarks --help", "python setup.py --help"]


DOCUMENTED = documented()
FIRST_SHOWN: Dict[str, str] = {}  # command -> where it is first documented
for _where, _command in DOCUMENTED:
    FIRST_SHOWN.setdefault(_command, _where)
RUN = [(where, command) for command, where in FIRST_SHOWN.items() if command not in NOT_RUN]
HELP = help_commands()


def _fresh_copy(folder: Path) -> Path:
    """A copy of this checkout's files (tracked, and untracked but not ignored, as they are on
    disk) with one commit of them, the checkout's ``.cache`` linked, and ``bin/`` beside it
    whose ``python``, ``python3`` and ``pip`` are the Python running the tests."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPOSITORY,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copy = folder / "checkout"
    for name in filter(None, listed.split("\0")):
        if (REPOSITORY / name).is_file():  # a tracked file deleted here is left out
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPOSITORY / name, copy / name)
    (REPOSITORY / ".cache" / "base-wheels").mkdir(parents=True, exist_ok=True)
    (copy / ".cache").symlink_to((REPOSITORY / ".cache").resolve(), target_is_directory=True)
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=copy, check=True)
    subprocess.run(["git", "add", "-A"], cwd=copy, check=True)
    subprocess.run([*GIT, "commit", "-q", "-m", "the checkout"], cwd=copy, check=True)
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    for name, program in (("python", ""), ("python3", ""), ("pip", " -m pip")):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}"{program} "$@"\n')
        (bin_dir / name).chmod(0o755)
    return copy


def _run(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    copy = _fresh_copy(folder)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "COLUMNS")}
    if command not in TAKES_A_BASE:
        environment.update(PIP_NO_INDEX="1", UV_OFFLINE="1")
    environment["PATH"] = f"{folder / 'bin'}{os.pathsep}{environment['PATH']}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        cwd=copy,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _param(where: str, command: str) -> object:
    marks = [pytest.mark.network] if command in TAKES_A_BASE else []
    return pytest.param(where, command, id=command, marks=marks)


@pytest.fixture(scope="session")
def help_texts(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Dict[str, object]]:
    """command -> its exit status and output, each help text run once for all workers, in
    one fresh copy (help writes nothing), unwrapped (a wide ``COLUMNS``)."""

    def run_all(folder: Path) -> None:
        copy = _fresh_copy(folder)
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        environment.update(COLUMNS="1000", PATH=f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}")

        def one(command: str) -> Dict[str, object]:
            done = subprocess.run(
                ["bash", "-c", command], cwd=copy, env=environment, capture_output=True, text=True
            )
            return {"status": done.returncode, "output": done.stdout + done.stderr}

        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            outputs = dict(zip(HELP, pool.map(one, HELP)))
        (folder / "help.json").write_text(json.dumps(outputs), encoding="utf-8")

    folder = build_once(tmp_path_factory, "help-texts", run_all)
    return json.loads((folder / "help.json").read_text(encoding="utf-8"))


def commands_in(help_text: str) -> List[str]:
    """The ``python`` commands a help text names (its usage lines left out)."""
    lines = [line for line in help_text.splitlines() if not line.startswith("usage:")]
    return [command.strip() for command in PROSE_COMMAND.findall("\n".join(lines))]


def test_every_page_with_a_prompt_is_read() -> None:
    """A page that shows a ``$`` prompt gives commands: none is in a block of a kind this test
    does not read (or on a page it does not find)."""
    read = {where for where, _ in DOCUMENTED}
    prompting = {
        str(page.relative_to(REPOSITORY))
        for page in _pages()
        if re.search(r"^\s+\$ ", page.read_text(encoding="utf-8"), re.M)
    }
    assert "docsrc/getting_started/installation.rst" in prompting
    assert sorted(prompting - read) == []


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param(
            ".. code-block:: console\n\n   $ pip download a \\\n       b -d w\n   $ ls\n",
            ["pip download a b -d w", "ls"],
            id="console-continued",
        ),
        pytest.param(
            ".. parsed-literal::\n\n   $ python -m pip install |build_requirements|\n",
            ['python -m pip install "packaging>=24" "pip"'],
            id="parsed-literal-substituted",
        ),
        pytest.param(
            "Run::\n\n   python -m benchmarks list\n\nand::\n\n   <out>: sha256 x\n",
            ["python -m benchmarks list"],
            id="literal",
        ),
        pytest.param(
            "  .. code-block:: console\n\n     $ cat x  # a comment\n\n  after\n",
            ["cat x"],
            id="nested-commented",
        ),
    ],
)
def test_a_page_is_read_as_its_reader_sees_it(text: str, expected: List[str]) -> None:
    replace = {"build_requirements": '"packaging>=24" "pip"'}
    assert _page_commands(text, replace) == expected


def test_the_build_requirements_substitution_is_expanded() -> None:
    install = "docsrc/getting_started/installation.rst"
    shown = [c for where, c in DOCUMENTED if where == install and c.startswith("python -m pip")]
    assert shown == ['python -m pip install "packaging>=24" "pip"']


def test_no_substitution_shows_unexpanded() -> None:
    """A ``|name|`` in a console or literal block is shown as it is typed, not replaced."""
    names = substitutions()
    shown = [c for _, c in DOCUMENTED if any(f"|{name}|" in c for name in names)]
    assert shown == []


def test_the_built_pages_show_the_commands_read(built_html: Path) -> None:
    """What the test reads from a page (continuations joined, substitutions replaced) is what
    the built page shows in its code blocks."""
    missing = []
    for page in _pages():
        built = built_html / page.relative_to(DOCSRC).with_suffix(".html")
        shown = set()
        for block in re.findall(r"<pre[^>]*>(.*?)</pre>", built.read_text(encoding="utf-8"), re.S):
            lines = html.unescape(re.sub(r"<[^>]+>", "", block)).splitlines()
            shown.update(_shown_commands(lines))
        where = str(page.relative_to(REPOSITORY))
        missing += [(where, c) for w, c in DOCUMENTED if w == where and c not in shown]
    assert missing == []


def test_every_entry_of_the_list_is_still_documented(
    help_texts: Dict[str, Dict[str, object]],
) -> None:
    shown = {command for _, command in DOCUMENTED}
    shown.update(c for text in help_texts.values() for c in commands_in(str(text["output"])))
    assert sorted(set(NOT_RUN) - shown) == []


@pytest.mark.parametrize("where, command", [_param(*item) for item in RUN])
def test_command_works_as_written(where: str, command: str, tmp_path: Path) -> None:
    done = _run(command, tmp_path)
    assert done.returncode == 0, f"{where}: {command!r} failed:\n{done.stdout}\n{done.stderr}"


@pytest.mark.parametrize("command", HELP)
def test_help_works(command: str, help_texts: Dict[str, Dict[str, object]]) -> None:
    assert help_texts[command]["status"] == 0, help_texts[command]["output"]


def test_the_commands_the_help_texts_name_work(
    help_texts: Dict[str, Dict[str, object]], tmp_path: Path
) -> None:
    named = {c: h for h, text in help_texts.items() for c in commands_in(str(text["output"]))}
    assert named, "no help text names a command: the reading is broken"
    failed = []
    for number, (command, help_command) in enumerate(sorted(named.items())):
        if command not in NOT_RUN and command not in HELP:
            folder = tmp_path / str(number)
            folder.mkdir()
            done = _run(command, folder)
            if done.returncode != 0:
                failed.append(f"{help_command}: {command!r}:\n{done.stdout}\n{done.stderr}")
    assert failed == []
