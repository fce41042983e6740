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

Each command either runs here and must exit 0, or says beside it why it is not run (a GPU,
TensorRT, a download, a file of the user's): a page's block follows a comment ``.. not run:
WHY`` (a README's, ``<!-- not run: WHY -->``), a docstring's command line ends in ``# not run:
WHY``. Placeholders and the test suite itself are known by their words; the few commands named
only in code's prose are in :data:`NOT_RUN_IN_CODE`, an entry of which whose command is gone
fails. A new command runs unless its page says why not. A command runs
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
from typing import Dict, Iterator, List, Optional, Tuple

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

NOT_RUN = re.compile(r"^\s*(?:\.\. |<!-- )not run: (.*?)(?: -->)?$")
WORKFLOW = "a step of the pages workflow: tests/site runs every one in a fresh clone, as CI"
# What a command is, by its words: a placeholder (<...>, [options], an upper-case NAME, ...),
# or the test suite itself.
PLACEHOLDER = re.compile(r"<[^>]*>|\[[^\]]*\]|(?<![\w=$/-])[A-Z][A-Z_]{2,}(?![\w=])|\.\.\.")
SUITE = re.compile(r"(?:^|&& |\s)python3? -m pytest(?: -q)?$")

# Commands named only in code (a docstring's prose, a help text), where no comment can stand
# beside them; a page or a README says why beside the block instead (``.. not run: WHY`` or
# ``<!-- not run: WHY -->`` just before it; in a docstring's indented block, ``# not run: WHY``).
NOT_RUN_IN_CODE: Dict[str, str] = {
    "python -m build": "pip's isolated build downloads packaging and pip from PyPI",
    "python -m build --sdist": "pip's isolated build downloads packaging and pip from PyPI",
    "python tools/patched_wheel matrix": "builds all 141 wheels of the supported matrix",
    "python -m benchmarks run compile": "needs --wheels, a GPU and TensorRT-RTX",
    "python -m benchmarks run own-compile benchmarks.own_compile.example:small_llama": (
        "compiles on a GPU with TensorRT, and needs transformers"
    ),
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


def _reason(lines: List[str]) -> Optional[str]:
    """The reason of the last ``not run:`` comment in ``lines`` (a comment may go on, indented,
    over the lines after it), or ``None``."""
    found = None
    for number, line in enumerate(lines):
        match = NOT_RUN.match(line)
        if match is not None:
            indent = len(line) - len(line.lstrip())
            more = []
            for following in lines[number + 1 :]:
                if not following.strip() or len(following) - len(following.lstrip()) <= indent:
                    break
                more.append(following.strip())
            found = " ".join([match.group(1), *more])
    return found


def _markdown_commands(text: str) -> List[Tuple[str, Optional[str]]]:
    """Each command of an indented block, with the reason of a comment just before it."""
    found = []
    start = 0
    for block in re.finditer(r"(?:\A|\n\n)((?:(?: {4,}\S.*)(?:\n|\Z))+)", text):
        why = _reason(text[start : block.start()].splitlines())
        found += [(command, why) for command in _joined(block.group(1).splitlines())]
        start = block.end()
    return found


def _rst_blocks(text: str) -> Iterator[Tuple[str, List[str], Optional[str]]]:
    """(kind, lines, why not run) of each literal block: ``console``, another code-block
    language (``substituted console`` where the docs' substitutions are replaced in it),
    ``parsed-literal`` or ``literal`` (a paragraph's ``::``); why: the reason of a
    ``.. not run:`` comment between the block before and this one."""
    lines = text.splitlines()
    after_last = 0
    for number, line in enumerate(lines):
        directive = re.match(
            r"\s*\.\. (substitution-)?(?:code-block|code|sourcecode)::\s*(\S+)", line
        )
        if directive is not None:
            kind = ("substituted " if directive.group(1) else "") + directive.group(2)
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
        yield kind, textwrap.dedent("\n".join(body)).splitlines(), _reason(lines[after_last:number])
        after_last = number + 1 + len(body)


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


def _page_commands(text: str, replace: Dict[str, str]) -> List[Tuple[str, Optional[str]]]:
    commands = []
    for kind, lines, why in _rst_blocks(text):
        if kind == "parsed-literal" or kind.startswith("substituted "):
            lines = [re.sub(r"\|([^|\s]+)\|", lambda m: replace[m.group(1)], x) for x in lines]
            kind = kind.replace("substituted ", "")
        if kind in ("console", "parsed-literal", "literal"):
            commands += [(command, why) for command in _shown_commands(lines)]
        elif kind in ("bash", "sh", "shell"):
            commands += [(c, why) for c in _joined(lines) if not c.startswith("#")]
    return commands


def _docstring_commands(docstring: str) -> List[Tuple[str, Optional[str]]]:
    """The command lines of a docstring's indented blocks (with the reason of a trailing
    ``# not run: WHY``), and its ``python ...`` literals."""
    indented = [line for line in docstring.splitlines() if line.startswith("    ")]
    reasons = [re.search(r"\s#\s+not run: (.*)$", line) for line in indented]
    commands = []
    for command, why in zip(_joined(indented), [r and r.group(1) for r in reasons]):
        if COMMAND.match(command):
            commands.append((command, why))
    for literal in re.findall(r"``(.+?)``", docstring, re.S):
        literal = " ".join(literal.split())
        if re.match(r"(?:[A-Z][A-Z0-9_]*=\S*\s+)*python3? ", literal):
            commands.append((literal, None))
    return commands


def _docstrings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            docstring = ast.get_docstring(node)
            if docstring:
                yield docstring


def _workflow_steps() -> List[Tuple[str, str, Optional[str]]]:
    import yaml  # the test requirements' YAML reader, here only

    steps = []
    for path in sorted(WORKFLOWS.glob("*.yml")):
        workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
        for job in workflow["jobs"].values():
            for step in job.get("steps", []):
                if "run" in step:
                    where = str(path.relative_to(REPOSITORY))
                    steps += [(where, c, WORKFLOW) for c in _joined(step["run"].splitlines())]
    return steps


def _pages() -> List[Path]:
    return sorted(p for p in DOCSRC.rglob("*.rst") if "_build" not in p.relative_to(DOCSRC).parts)


def documented() -> List[Tuple[str, str, Optional[str]]]:
    """(where, command, why not run) of every command the files document; help texts apart."""
    found: List[Tuple[str, str, Optional[str]]] = []
    for path in MARKDOWN:
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPOSITORY))
        found += [(where, c, why) for c, why in _markdown_commands(text)]
    replace = substitutions()
    for path in _pages():
        text = path.read_text(encoding="utf-8")
        where = str(path.relative_to(REPOSITORY))
        found += [(where, c, why) for c, why in _page_commands(text, replace)]
    for path in sorted(set(DOCSTRING_FILES)):
        where = f"{path.relative_to(REPOSITORY)} (docstring)"
        for docstring in _docstrings(path):
            found += [(where, c, why) for c, why in _docstring_commands(docstring)]
    return found + _workflow_steps()


def why_not_run(command: str) -> Optional[str]:
    """Why the test does not run ``command``: a reason beside it where it is shown, a rule
    (a placeholder, the test suite), or :data:`NOT_RUN_IN_CODE`; ``None``: it runs."""
    if command in REASONS:
        return REASONS[command]
    if PLACEHOLDER.search(command):
        return "a placeholder, not a command to run as it stands"
    if SUITE.search(command):
        return "the test suite itself"
    return NOT_RUN_IN_CODE.get(command)


def help_commands() -> List[str]:
    """The ``--help`` of the build tool and each of its commands, of each benchmark (the
    placeholders ``<command>`` and ``NAME`` made real) and of ``setup.py``."""
    from patched_wheel.__main__ import argument_parser

    from benchmarks.__main__ import benchmarks

    actions = argument_parser()._actions
    (subparsers,) = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
    tool = ["python tools/patched_wheel --help"]
    tool += [f"python tools/patched_wheel {name} --help" for name in subparsers.choices]
    tool += [f"python -m benchmarks run {name} --help" for name in benchmarks()]
    return tool + ["python -m benchmarks --help", "python setup.py --help"]


DOCUMENTED = documented()
FIRST_SHOWN: Dict[str, str] = {}  # command -> where it is first documented
REASONS: Dict[str, str] = {}  # command -> why it is not run, from any place that shows it
for _where, _command, _why in DOCUMENTED:
    FIRST_SHOWN.setdefault(_command, _where)
    if _why:
        REASONS.setdefault(_command, _why)
RUN = [(where, command) for command, where in FIRST_SHOWN.items() if not why_not_run(command)]
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
    read = {where for where, _, _ in DOCUMENTED}
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
    assert _page_commands(text, replace) == [(command, None) for command in expected]


def test_a_reason_beside_a_block_is_its_commands_and_no_others() -> None:
    """``.. not run:`` (it may go on, indented) covers the next block's commands only."""
    text = "Run::\n\n   cat a\n\n.. not run: needs\n   a GPU\n\n.. code-block:: console\n\n"
    text += "   $ gpu-a\n   $ gpu-b\n\nThen::\n\n   cat b\n"
    assert _page_commands(text, {}) == [
        ("cat a", None),
        ("gpu-a", "needs a GPU"),
        ("gpu-b", "needs a GPU"),
        ("cat b", None),
    ]
    readme = "<!-- not run: needs a GPU -->\n\n    gpu-a\n\nand\n\n    cat b\n"
    assert _markdown_commands(readme) == [("gpu-a", "needs a GPU"), ("cat b", None)]


@pytest.mark.parametrize(
    "command, why",
    [
        (
            "python -m benchmarks run NAME --help",
            "a placeholder, not a command to run as it stands",
        ),
        ('pip install "git+<url>@<commit>"', "a placeholder, not a command to run as it stands"),
        (
            "python -m benchmarks run build-speed [--repeat 7]",
            "a placeholder, not a command to run as it stands",
        ),
        ("PIP_NO_INDEX=1 UV_OFFLINE=1 python -m pytest", "the test suite itself"),
        ("python -m benchmarks list", None),
        ("TORCHTRT_BASE_VERSION=2.12.1 python tools/patched_wheel build", None),
    ],
)
def test_placeholders_and_the_suite_are_known_by_their_words(command: str, why: str) -> None:
    assert why_not_run(command) == why


def test_the_build_requirements_substitution_is_expanded() -> None:
    install = "docsrc/getting_started/installation.rst"
    shown = [c for where, c, _ in DOCUMENTED if where == install and c.startswith("python -m pip")]
    assert shown == ['python -m pip install "packaging>=24" "pip"']


def test_no_substitution_shows_unexpanded() -> None:
    """A ``|name|`` in a console or literal block is shown as it is typed, not replaced."""
    names = substitutions()
    shown = [c for _, c, _ in DOCUMENTED if any(f"|{name}|" in c for name in names)]
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
        missing += [(where, c) for w, c, _ in DOCUMENTED if w == where and c not in shown]
    assert missing == []


def test_every_entry_of_the_list_is_still_documented(
    help_texts: Dict[str, Dict[str, object]],
) -> None:
    shown = {command for _, command, _ in DOCUMENTED}
    shown.update(c for text in help_texts.values() for c in commands_in(str(text["output"])))
    assert sorted(set(NOT_RUN_IN_CODE) - shown) == []


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
        if not why_not_run(command) and command not in HELP:
            folder = tmp_path / str(number)
            folder.mkdir()
            done = _run(command, folder)
            if done.returncode != 0:
                failed.append(f"{help_command}: {command!r}:\n{done.stdout}\n{done.stderr}")
    assert failed == []
