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


def _sizing_terms() -> List[List[str]]:
    """The rows of the sizing section's table of terms (``:class: sizing-terms``), each a list
    of its cells' text."""
    text = SIZING_PAGE.read_text(encoding="utf-8")
    start = text.index(":class: sizing-terms")
    table = text[start : text.index("\n\n", text.index("* - ", start) + 1 + 2000)]
    rows = [row for row in re.split(r"\n   \* - ", table)[1:]]
    return [[re.sub(r"\s+", " ", cell) for cell in re.split(r"\n     - ", row)] for row in rows]


SOURCES = ("Measured here", "read from upstream's code", "NVIDIA", "upstream's page", "published")


def test_every_sizing_term_names_its_source() -> None:
    """Each term of the sizing section says where its figure comes from: a result file, a
    named file and function of upstream's code, or a published page."""
    rows = _sizing_terms()
    terms = [row[0] for row in rows[1:]]
    assert len(terms) >= 6, f"the sizing section lists too few terms: {terms}"
    for row in rows[1:]:
        where = row[-1]
        assert any(
            source.lower() in where.lower() for source in SOURCES
        ), f"sizing term {row[0]!r} names no source: {where[:120]!r}"
        if "read from upstream's code" in where:
            assert re.search(r"``[\w/]+\.py``", where), f"{row[0]!r}: which upstream file?"


def test_sizing_covers_each_setting_and_machine() -> None:
    text = re.sub(r"\s+", " ", SIZING_PAGE.read_text(encoding="utf-8"))
    for needed in (
        "offload off",
        "offload on, upstream release",
        "offload on, fork",
        "trim off",
        "resource partitioning on",
        "host peak (discrete GPU)",
        "GPU peak (discrete GPU)",
        "host + GPU (one shared memory)",
        "enable_resource_partitioning",
        "cpu_memory_budget",
        "lazy_engine_init",
        "enable_weight_streaming",
        "expandable_segments:True",
        "no machine with one memory has been measured here",
    ):
        assert needed in text, f"the memory page no longer covers {needed!r}"


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


def test_readme_answers_the_sizing_question() -> None:
    """The README itself says how much host and GPU memory a compile takes, per setting and
    per kind of machine, and sends the reader to the terms and their sources."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## How much memory a compile needs") :]
    section = section[: section.index("\n## ", 5)]
    for needed in ("host peak, discrete GPU", "GPU peak, discrete GPU", "one shared memory"):
        assert needed in section
    for setting in ("offload off", "offload on, upstream release", "offload on, this fork"):
        assert setting in section
    assert "docsrc/tutorials/resource_memory/resource_management.rst" in section


def test_readme_sends_docs_builders_to_the_docs_requirements() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Documentation") :]
    assert "docsrc/requirements.txt" in section.split("## ", 2)[1]


SIZES = (
    "about 2 W + F",
    "about 2 W + workspace",
    "about 4 W + F + workspace",
    "2 to 3 W + F",
    "3 to 4 W + F + workspace",
    "W + the largest tensor",
)


@pytest.mark.parametrize("size", SIZES)
def test_readme_and_docs_size_alike(size: str) -> None:
    """The README's sizing table and the memory page's give the same multiples of W."""
    readme = re.sub(r"\s+", " ", README.read_text(encoding="utf-8"))
    page = re.sub(r"\s+", " ", SIZING_PAGE.read_text(encoding="utf-8"))
    page = page.replace("W + largest", "W + the largest tensor")
    assert size in readme, f"README.md's sizing table lacks {size!r}"
    assert size in page, f"the memory page's sizing table lacks {size!r}"
