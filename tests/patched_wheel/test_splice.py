"""The splice on its own: readable before/after cases, and its invariants on every release."""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_OVERLAY as OVERLAY
from patched_wheel.config import DEFAULT_RELEASE, SUPPORTED_RELEASES, TARGET
from patched_wheel.splice import (
    OverlayParts,
    check_call_sites,
    check_splice,
    overlay_from_bytes,
    signature_from_ast,
    source_lines,
    source_segment,
    splice_overlay,
)

from tests.patched_wheel.helpers import names


def parse_overlay(source: str) -> OverlayParts:
    """The overlay of ``source``, read as the build reads the overlay's file."""
    return overlay_from_bytes(source.encode(), "o")


def splice_functions(base: str, overlay: str) -> str:
    """The splice of two sources, the overlay parsed first."""
    return splice_overlay(base, parse_overlay(overlay), ast.parse(base))


def assert_splice(base: str, overlay: str, expected: str) -> None:
    """Splice dedented sources and compare with the dedented expectation."""
    result = splice_functions(textwrap.dedent(base), textwrap.dedent(overlay))
    assert result == textwrap.dedent(expected)


def test_replaces_in_place_and_appends_and_inserts() -> None:
    assert_splice(
        base='''\
            """Upstream's module."""

            from __future__ import annotations

            import gc
            import os  # kept as it is
            from typing import Any

            logger = object()


            @staticmethod
            def keep(x: Any) -> Any:
                return x


            @decorated
            def swap(a):
                return os.getcwd()


            CONSTANT = 1
            ''',
        overlay='''\
            """The overlay's docstring is not copied."""

            from __future__ import annotations

            import functools
            import gc
            from typing import Any, Callable

            logger = object()

            # Comment lines above a constant come with it.
            STEP = 64


            def swap(a, b=STEP):
                return functools.reduce(max, [a, b])


            def added() -> Callable[[], None]:
                return gc.collect
            ''',
        expected='''\
            """Upstream's module."""

            from __future__ import annotations

            import gc
            import os  # kept as it is
            from typing import Any
            import functools
            from typing import Callable

            # Comment lines above a constant come with it.
            STEP = 64

            logger = object()


            @staticmethod
            def keep(x: Any) -> Any:
                return x


            def swap(a, b=STEP):
                return functools.reduce(max, [a, b])


            CONSTANT = 1


            def added() -> Callable[[], None]:
                return gc.collect
            ''',
    )


@pytest.mark.parametrize(
    "overlay",
    [
        pytest.param("", id="empty"),
        pytest.param('"""Docstring only."""\n', id="docstring"),
        pytest.param('"""Doc."""\nfrom __future__ import annotations\n', id="future"),
        pytest.param("import os\n", id="import-already-there"),
    ],
)
def test_nothing_to_splice_gives_the_base_back(overlay: str) -> None:
    base = "import os\n\n\ndef f():  \n    return 1\n"
    assert splice_functions(base, overlay) is base


def test_crlf_base_keeps_its_newlines() -> None:
    base = "import os\r\n\r\n\r\ndef f():\r\n    return 1\r\n"
    result = splice_functions(base, "def f():\n    return 2\n")
    assert result == "import os\r\n\r\n\r\ndef f():\r\n    return 2\r\n"


def test_base_without_final_newline() -> None:
    assert splice_functions("x = 1", "def g():\n    pass\n") == "x = 1\n\n\ndef g():\n    pass\n"


# An overlay the splice refuses, with upstream's module beside it, and what the refusal names:
# the overlay's line, or the overlay's and upstream's versions of the one name.
@pytest.mark.parametrize(
    "base, overlay, named",
    [
        pytest.param(
            "import logging\nlogger = None\n",
            "logger = 1\n",
            ("'logger = 1'", "'logger = None'"),
            id="constant-of-another-value",
        ),
        pytest.param(
            "def prepare_inputs():\n    pass\n",
            "from os import prepare_inputs\n",
            ("'prepare_inputs'",),
            id="import-over-a-definition",
        ),
        pytest.param("x = 1\n", "x = 2\nif x:\n    pass\n", ("line 2", "If"), id="an-if"),
        pytest.param("x = 1\n", "\ndef broken(:\n", ("the overlay", "line 2"), id="no-python"),
    ],
)
def test_an_overlay_the_splice_has_no_rule_for_is_refused(
    base: str, overlay: str, named: Tuple[str, ...]
) -> None:
    with pytest.raises(PatchError) as refused:
        splice_functions(base, overlay)
    names(refused.value, *named)


def test_check_splice_refuses_what_does_not_compile() -> None:
    with pytest.raises(PatchError) as refused:
        check_splice(b"def f(:\n", parse_overlay(""), filename="utils.py")
    names(refused.value, "utils.py", "SyntaxError")


# --- Invariants on the real utils.py of every supported release -----------------------------


@pytest.fixture(scope="module")
def upstream_sources(base_wheels: Dict[str, Path]) -> Dict[str, Dict[str, str]]:
    """Release -> path -> source of every .py file in the official wheel."""
    sources: Dict[str, Dict[str, str]] = {}
    for release, wheel in base_wheels.items():
        with zipfile.ZipFile(wheel) as archive:
            sources[release] = {
                name: archive.read(name).decode("utf-8")
                for name in archive.namelist()
                if name.endswith(".py")
            }
    return sources


@pytest.fixture(scope="module")
def overlay_source() -> str:
    return OVERLAY.read_text(encoding="utf-8")


releases = pytest.mark.parametrize("release", SUPPORTED_RELEASES)


@releases
def test_empty_overlay_is_byte_identical(
    release: str, upstream_sources: Dict[str, Dict[str, str]]
) -> None:
    base = upstream_sources[release][TARGET]
    assert splice_functions(base, "") == base


@releases
def test_unreplaced_nodes_keep_their_source(
    release: str, upstream_sources: Dict[str, Dict[str, str]], overlay_source: str
) -> None:
    base = upstream_sources[release][TARGET]
    result = splice_functions(base, overlay_source)
    replaced = {d.name for d in parse_overlay(overlay_source).definitions}

    def segments(source: str) -> List[str]:
        lines = source_lines(source)  # split once: ast.get_source_segment splits per call
        nodes = ast.parse(source).body
        return [source_segment(lines, n) for n in nodes if getattr(n, "name", None) not in replaced]

    before = segments(base)
    after = segments(result)
    # What the splice added (imports, constants, new functions) is extra; all else is equal.
    kept = set(before)
    assert [segment for segment in after if segment in kept] == before


@releases
def test_result_compiles_and_holds_the_overlay(
    release: str, upstream_sources: Dict[str, Dict[str, str]], overlay_source: str
) -> None:
    result = splice_functions(upstream_sources[release][TARGET], overlay_source)
    compile(result, TARGET, "exec", dont_inherit=True)
    check_splice(result.encode(), parse_overlay(overlay_source), filename=TARGET)


@releases
def test_splicing_twice_equals_splicing_once(
    release: str, upstream_sources: Dict[str, Dict[str, str]], overlay_source: str
) -> None:
    once = splice_functions(upstream_sources[release][TARGET], overlay_source)
    assert splice_functions(once, overlay_source) == once


@releases
def test_missing_imports_are_carried(
    release: str, upstream_sources: Dict[str, Dict[str, str]], overlay_source: str
) -> None:
    base = upstream_sources[release][TARGET]
    result = splice_functions(base, overlay_source)
    assert "import functools" not in base
    assert result.count("\nimport functools\n") == 1
    module = ast.parse(result)
    bound = {
        alias.asname or alias.name.split(".")[0]
        for node in module.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    }
    overlay_imports = {
        alias.asname or alias.name.split(".")[0]
        for node in parse_overlay(overlay_source).imports
        for alias in node.names
    }
    assert overlay_imports <= bound


@releases
def test_every_call_site_binds_to_the_overlay(
    release: str, upstream_sources: Dict[str, Dict[str, str]], overlay_source: str
) -> None:
    sources = {path: text.encode() for path, text in upstream_sources[release].items()}
    functions = [
        f for f in parse_overlay(overlay_source).definitions if f.name == "deallocate_module"
    ]
    assert check_call_sites(sources, functions, wheel=release) >= 1


def test_a_call_that_does_not_fit_is_named() -> None:
    overlay = parse_overlay("def deallocate_module(module):\n    pass\n")
    sources = {"torch_tensorrt/x.py": b"deallocate_module(m, delete_module=True)\n"}
    with pytest.raises(PatchError, match=r"x.py:1: deallocate_module\(\.\.\.\) does not fit"):
        check_call_sites(sources, overlay.definitions, wheel="w")


def test_every_way_of_writing_a_call_is_found() -> None:
    """Only lines where a name is followed by ``(`` are searched: each call below is still
    found, in ``ast.walk``'s order, and no definition or string counts as one."""
    overlay = parse_overlay("def deallocate_module(module):\n    pass\n")
    source = (
        "def deallocate_module(a, b):\n"
        "    'deallocate_module(a, b) in a docstring'\n"
        "class deallocate_module2: pass\n"
        "@deallocate_module(1, 2)\n"
        "def g(x=(deallocate_module)(3, 4)):\n"
        "    return obj.deallocate_module \\\n"
        "        (5, 6)\n"
        "h = [deallocate_module  # a comment (with a paren\n"
        "     (7, 8)]\r"
        "s = f'{deallocate_module(9, 10)}'\r\n"
        "async def deallocate_module(x): pass\n"
    )
    with pytest.raises(PatchError, match=r"w: 5 call\(s\)") as refused:
        check_call_sites({"p/x.py": source.encode()}, overlay.definitions, wheel="w")
    assert re.findall(r"x\.py:(\d+):", str(refused.value)) == ["4", "5", "6", "8", "10"]


def test_signature_from_the_ast_matches_the_imported_overlay(
    overlay_source: str, overlay_module: ModuleType
) -> None:
    for function in parse_overlay(overlay_source).definitions:
        if isinstance(function, ast.ClassDef):
            continue
        from_ast = signature_from_ast(function)
        imported = inspect.signature(getattr(overlay_module, function.name))
        assert [(p.name, p.kind, p.default is p.empty) for p in from_ast.parameters.values()] == [
            (p.name, p.kind, p.default is p.empty) for p in imported.parameters.values()
        ]


def test_the_splice_reads_the_base_once_however_many_assignments_it_holds(
    base_wheels: Dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Splitting the whole base per top-level assignment (``ast.get_source_segment``) made
    10,000 assignments take 116 s. Every line split of the base is counted, through the two
    ways a source is split into lines: the count must not grow with the assignments."""
    import patched_wheel.splice as splice

    with zipfile.ZipFile(base_wheels[DEFAULT_RELEASE]) as archive:
        official = archive.read(TARGET).decode()
    splits: List[int] = []
    real_segment, real_lines = ast.get_source_segment, splice.source_lines

    def counted_segment(source: str, node: ast.AST, **options: bool) -> object:
        splits.append(len(source))
        return real_segment(source, node, **options)

    def counted_lines(source: str) -> List[str]:
        splits.append(len(source))
        return real_lines(source)

    monkeypatch.setattr(ast, "get_source_segment", counted_segment)
    monkeypatch.setattr(splice, "source_lines", counted_lines)
    overlay = parse_overlay(OVERLAY.read_text())
    counts = []
    for assignments in (100, 2000):
        splits.clear()
        base = official + "".join(f"V_{i} = {i}\n" for i in range(assignments))
        splice.splice_overlay(base, overlay, ast.parse(base))
        counts.append(len(splits))
    assert counts[0] == counts[1] <= 4, counts


def test_a_source_segment_is_the_one_ast_gives() -> None:
    import patched_wheel.splice as splice

    source = "A = 1\r\nB = 'caf\u00e9' + \\\n  'x'\rC = (1,\n 2)  # \u00e9\n\fD = 4\n"
    module = ast.parse(source)
    lines = splice.source_lines(source)
    for node in module.body:
        assert splice.source_segment(lines, node) == ast.get_source_segment(source, node)


def test_a_splice_that_changed_a_definition_is_refused() -> None:
    """A definition of the overlay whose text the splice changed, or lost, is named."""
    overlay = parse_overlay("def first(a):\n    return a\n\n\ndef second():\n    pass\n")
    whole = b"import os\n\n\ndef first(a):\n    return a\n\n\ndef second():\n    pass\n"
    check_splice(whole, overlay, filename="m")
    for spliced, changed in (
        (whole.replace(b"return a", b"return a + 1"), "first"),
        (whole.split(b"\n\n\ndef second")[0] + b"\n", "second"),
    ):
        with pytest.raises(PatchError) as refused:
            check_splice(spliced, overlay, filename="m")
        names(refused.value, "m: ", changed)


def _whole_parse(text: str, lines: object, what: str) -> List[Tuple[ast.stmt, int]]:
    """Every top-level statement of ``text`` (line offset 0): ``_statements_around``'s answer
    from a parse of the whole source."""
    import patched_wheel.splice as splice

    return [(node, 0) for node in splice.parse_source(text, what, compiled=False).body]


def test_the_call_sites_of_every_official_base_are_the_whole_parses(
    upstream_sources: Dict[str, Dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the top-level definitions around a call's line are parsed; in every release's
    package that finds the very calls a parse of the whole source finds, in the same order."""
    import patched_wheel.splice as splice

    names = frozenset(
        node.name for node in ast.parse(OVERLAY.read_text()).body if hasattr(node, "name")
    )
    found = {}
    for whole in (False, True):
        if whole:
            monkeypatch.setattr(splice, "_statements_around", _whole_parse)
        splice._calls.cache_clear()
        found[whole] = {
            (release, path): splice._calls(source.encode(), path, names)
            for release, sources in upstream_sources.items()
            for path, source in sources.items()
            if any(name in source for name in names)
        }
    splice._calls.cache_clear()
    assert sum(map(len, found[True].values())) > 50  # prepare_inputs, deallocate_module, ...
    assert found[False] == found[True]


# Sources up to the size the build takes, each built to defeat a scan that backtracks or that
# redoes work per call: one comment line after a name (67 bytes hung the build), a comment of
# names, names on comment lines, a definition and a call on every line pair.
_HOSTILE = {
    "comment line": 'b"deallocate_module" + b"#" * 50 + b"\\n"',
    "comment of names": 'b"deallocate_module #" * 26000 + b"\\n"',
    "comment lines of names": 'b"#deallocate_module\\n" * 26000 + b"deallocate_module(1)\\n"',
    "calls": 'b"def f():\\n" + b"    deallocate_module(x)\\n" * 20000',
    "definitions and calls": 'b"".join(b"def f%d():\\n deallocate_module(1)\\n" % i for i in range(14000))',
}


@pytest.mark.parametrize("source", _HOSTILE.values(), ids=_HOSTILE.keys())
def test_the_call_site_scan_is_linear_in_any_source(source: str) -> None:
    """Each hostile source is scanned in a fresh process within a bound a linear scan meets
    many times over (about a second here; the backtracking scan never ended on the first, and
    took 17 s on 340 KB of the last)."""
    import subprocess
    import sys

    from patched_wheel.config import REPOSITORY
    from patched_wheel.splice import MAX_SOURCE_BYTES

    code = (
        f"from patched_wheel.splice import _calls\nsource = {source}\n"
        f"assert len(source) <= {MAX_SOURCE_BYTES}, len(source)\n"
        "print(len(_calls(source, 'm.py', frozenset({'deallocate_module'}))))\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPOSITORY / "tools",  # the package, as the tests import it
            capture_output=True,
            text=True,
            timeout=20,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the scan of {len(eval(source)) >> 10} KiB ran past 20 s")
    assert done.returncode == 0, done.stderr


def test_an_unlocked_build_of_a_base_with_a_backtracking_line_ends(tmp_path: Path) -> None:
    """The 67-byte comment line that hung ``build --unlocked`` (and ``verify --unlocked``
    and the local-install route, through the same scan) in a module of the base."""
    import subprocess
    import sys

    from patched_wheel.config import REPOSITORY, TOOL_PATH

    from tests.patched_wheel.helpers import make_wheel

    line = b"deallocate_module" + b"#" * 50 + b"\n"
    base = make_wheel(tmp_path, {"torch_tensorrt/other.py": b"import os\n" + line})
    command = [sys.executable, str(REPOSITORY / TOOL_PATH), "build", "--base-wheel", str(base)]
    command += ["--unlocked", "--out", str(tmp_path / "out")]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("build --unlocked ran past 120 s on one comment line")
    assert done.returncode == 0, done.stderr
