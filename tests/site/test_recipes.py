"""The uv recipe, from the install page and from the site's landing page: a uv project with it
locks ``torch-tensorrt`` to the patched wheel from the site, and every other package to PyPI,
and installs the patched wheel."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from patched_wheel.site import INDEX_URL_PLACEHOLDER
from uv import find_uv_bin

from evidence import facts

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (docsrc/requirements.txt)
    import tomli as tomllib

REPOSITORY = Path(__file__).resolve().parents[2]
INSTALL_PAGE = REPOSITORY / "docsrc" / "getting_started" / "installation.rst"
EXAMPLE_INDEX = "https://wheels.example.org/simple/"
PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"

# What this machine adds to the recipe. The project's name and Python; one platform to lock
# for; and TensorRT's packages left out: on PyPI they are sources that download NVIDIA's own
# wheels, from an index this machine cannot reach.
PROJECT = """\
[tool.uv]
environments = ["sys_platform == 'linux'"]
override-dependencies = [
    "tensorrt-cu13; sys_platform == 'never'",
    "tensorrt-cu13-libs; sys_platform == 'never'",
    "tensorrt-cu13-bindings; sys_platform == 'never'",
]
"""


def install_page_recipes() -> Dict[str, str]:
    """The install page's ``pyproject.toml`` recipes, by the tool whose table they fill."""
    text = INSTALL_PAGE.read_text(encoding="utf-8")
    for name, value in facts.substitutions().items():  # as the built page shows them
        text = text.replace(f"|{name}|", value)
    code = r"\.\. (?:substitution-)?code-block:: toml"
    blocks = re.findall(r"^( *)" + code + r"\n\n((?:\1 +\S.*\n|\n)+)", text, re.M)
    recipes = {}
    for block in (textwrap.dedent(lines) for _, lines in blocks):
        tool = re.search(r"^\[\[tool\.(\w+)\.(?:index|source)\]\]$", block, re.M)
        if tool is not None:
            recipes[tool.group(1)] = block
    return recipes


def landing_page_recipe(site: Path) -> str:
    page = (site / "index.html").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"<pre>(.*?)</pre>", page, re.S) if "tool.uv" in b)
    return html.unescape(re.sub(r"<[^>]+>", "", block))


def test_the_install_page_has_a_recipe_for_uv_poetry_and_pdm() -> None:
    recipes = install_page_recipes()
    assert sorted(recipes) == ["pdm", "poetry", "uv"]
    assert "explicit = true" in recipes["uv"]
    assert 'torch-tensorrt = { index = "torchtrt-memfix" }' in recipes["uv"]
    assert 'priority = "explicit"' in recipes["poetry"]
    assert 'include_packages = ["torch-tensorrt"]' in recipes["pdm"]
    for recipe in recipes.values():
        tomllib.loads(recipe)  # each one is TOML as it stands


def _uv(project: Path, *arguments: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("UV_")}
    environment.update(UV_NO_CONFIG="1", UV_PYTHON=sys.executable)
    completed = subprocess.run(
        [find_uv_bin(), *arguments],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed.stderr


@pytest.mark.network
@pytest.mark.parametrize(
    "recipe, address",
    [
        pytest.param(lambda site: install_page_recipes()["uv"], EXAMPLE_INDEX, id="install-page"),
        pytest.param(landing_page_recipe, INDEX_URL_PLACEHOLDER, id="landing-page"),
    ],
)
def test_a_uv_project_takes_torch_tensorrt_alone_from_the_site(
    site: Path, tmp_path: Path, recipe: Callable[[Path], str], address: str
) -> None:
    index = (site / "simple").as_uri() + "/"
    text = recipe(site).replace(address, index)
    assert index in text
    text = text.replace(
        "[project]\n", f'[project]\nname = "app"\nversion = "0"\nrequires-python = "=={PYTHON}.*"\n'
    )
    (tmp_path / "pyproject.toml").write_text(text + "\n" + PROJECT, encoding="utf-8")
    # Lock: torch-tensorrt from the site, every other package from PyPI
    _uv(tmp_path, "lock")
    packages = tomllib.loads((tmp_path / "uv.lock").read_text(encoding="utf-8"))["package"]
    sources = {p["name"]: p["source"].get("registry", "") for p in packages if p["name"] != "app"}
    from_site = sorted(name for name, source in sources.items() if "pypi.org" not in source)
    assert from_site == ["torch-tensorrt"], sources
    assert "torch" in sources  # torch is resolved, and from PyPI
    version = next(p["version"] for p in packages if p["name"] == "torch-tensorrt")
    assert "+memfix" in version
    # Install from the lock: the patched wheel (the rest would be gigabytes of torch and CUDA)
    others: List[str] = []
    for name in sources:
        if name != "torch-tensorrt":
            others += ["--no-install-package", name]
    _uv(tmp_path, "sync", *others)
    site_packages = list((tmp_path / ".venv").glob("lib*/python*/site-packages")) or list(
        (tmp_path / ".venv").glob("Lib/site-packages")
    )
    installed = [p.name for p in site_packages[0].glob("torch_tensorrt-*.dist-info")]
    assert installed == [f"torch_tensorrt-{version}.dist-info"]
