"""What the README and the docs say about memory, checked where a machine can check it.

Claims a careful reader found false (issue 16) must not come back: that without the offload
no host copy of the model is made, that glibc keeps the sum of every build's memory, that the
1 GiB-step strategy is upstream's code. Measured figures in the prose come from result files
(the ``:result:`` role), never typed; every term of the sizing section names its source; the
settings a user reaches for are named.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
DOCSRC = REPOSITORY / "docsrc"
README = REPOSITORY / "README.md"
SIZING_PAGE = DOCSRC / "tutorials" / "resource_memory" / "resource_management.rst"
OVERLAY = REPOSITORY / "py" / "torch_tensorrt" / "dynamo" / "utils.py"


def _texts() -> Dict[str, str]:
    """README.md and every page source of the docs, with each line's breaks joined, so that a
    phrase split over two lines still matches."""
    paths = [README] + sorted(DOCSRC.rglob("*.rst"))
    return {
        str(path.relative_to(REPOSITORY)): re.sub(r"\s+", " ", path.read_text(encoding="utf-8"))
        for path in paths
    }


# Phrases that stated something false about memory, with what is true instead.
FALSE_CLAIMS = [
    pytest.param(
        r"no host copy of the model is made",
        id="no-host-copy-without-offload",
    ),
    pytest.param(r"host never holds the model", id="host-never-holds-the-model"),
    pytest.param(r"B\\ :sub:`1` \+ B\\ :sub:`2`", id="glibc-keeps-the-sum-of-builds"),
    pytest.param(r"kept the freed memory of each build", id="kept-each-builds-memory"),
    pytest.param(r"upstream main \(1 GiB step\)", id="one-gib-step-called-upstream-main"),
    pytest.param(r"The fix on upstream main: tensor by tensor", id="one-gib-step-as-upstream"),
    pytest.param(r"Offload without doubling memory", id="doubling-on-every-machine"),
    pytest.param(r"this move itself held the model twice", id="move-blamed-for-gpu-oom"),
    pytest.param(r"it is the figure measured above", id="unified-memory-said-measured"),
    pytest.param(r"of the CPU-side ceiling measured on the same host", id="best-of-three-boots"),
    # Issue 26: a cache hit refits after building the network again (and caching needs
    # immutable_weights=False); constant folding keeps new tensors on the GPU with the offload
    # off; PyTorch does not describe expandable segments so; the offload spares the
    # converters' copies on one shared memory too.
    pytest.param(r"skips the build, and with it the build's memory", id="cache-hit-saves-memory"),
    pytest.param(r"fewer tensors share a segment", id="expandable-segments-mechanism"),
    pytest.param(r"about 2 W \+ workspace", id="gpu-offload-off-two-w"),
    pytest.param(r"offload frees nothing", id="offload-frees-nothing-shared"),
]


@pytest.mark.parametrize("pattern", FALSE_CLAIMS)
def test_false_claim_is_gone(pattern: str) -> None:
    found = [name for name, text in _texts().items() if re.search(pattern, text, re.I)]
    assert found == [], f"{pattern!r} is back in {found}"


def _prose(text: str) -> List[str]:
    """The lines of an rst page that are prose: no code blocks, literals or ``:result:`` roles."""
    text = re.sub(r":result:`[^`]*`", "", text)
    text = re.sub(r"``[^`]*``", "", text)
    lines: List[str] = []
    block_indent = -1
    for line in text.splitlines():
        indent = len(line) - len(line.lstrip())
        if block_indent >= 0 and (not line.strip() or indent > block_indent):
            continue
        block_indent = -1
        if re.match(r"\s*\.\. (code-block|plot|result-source|cli-)", line) or line.endswith("::"):
            block_indent = indent
            continue
        lines.append(line)
    return lines


TYPED_FIGURE = re.compile(r"\b\d+(?:\.\d+)?\s*(?:GB/s|%)|\b\d+\.\d+\s*(?:GiB|MiB|GB|MB|s\b|W\b)")


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(path, id=str(path.relative_to(REPOSITORY)))
        for path in sorted(DOCSRC.rglob("*.rst"))
        + sorted((REPOSITORY / "benchmarks").rglob("README.md"))
    ],
)
def test_no_measured_figure_is_typed_into_a_page(page: Path) -> None:
    """Speeds, percentages and fractional sizes on a page come from a result file through
    ``:result:`` or a table directive, so that a rerun changes them everywhere; the
    benchmarks' own READMEs name the files and fields instead."""
    typed = [
        match.group(0)
        for line in _prose(page.read_text(encoding="utf-8"))
        for match in TYPED_FIGURE.finditer(line)
    ]
    assert typed == [], f"{page.name} types figures by hand: {typed}"


def _overlay_constant(name: str) -> str:
    for node in ast.parse(OVERLAY.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == name for target in node.targets
        ):
            assert isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            return node.value.value
    raise AssertionError(f"the overlay defines no {name}")


@pytest.mark.parametrize("variable", ["PINNED_BOUNCE_ENV_VAR", "MALLOC_TRIM_ENV_VAR"])
def test_readme_names_the_switches(variable: str) -> None:
    """The README names the environment variables that turn each of the fork's changes off,
    as the overlay spells them."""
    assert f"{_overlay_constant(variable)}=0" in README.read_text(encoding="utf-8")
