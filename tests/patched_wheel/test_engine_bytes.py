"""The engine-bytes fix: the overlay's ``convert_module`` spliced into upstream's
``dynamo/conversion/_conversion.py`` (a second module of the base), on the official wheels.

It applies where upstream's ``convert_module`` creates the runtime module with the keywords the
overlay's passes (2.11); elsewhere upstream's module stays byte for byte. Where it applies, only
the fix's definitions change, and what they use that the module lacks is added.
"""

from __future__ import annotations

import ast
import io
import zipfile
from typing import Dict, Tuple

import pytest
from patched_wheel.config import CONVERSION_TARGET, DEFAULT_OVERLAY, TARGET
from patched_wheel.patch import FIXES, _needed_by, patch_wheel
from patched_wheel.splice import overlay_from_bytes, top_level_definitions
from patched_wheel.wheel import BaseWheel

from tests.patched_wheel.helpers import ORIGIN
from tests.patched_wheel.wheel_helpers import fetch

ENGINE_BYTES = next(fix for fix in FIXES if fix.name == "engine-bytes")


def _patched(release: str, distribution: str) -> Tuple[Dict[str, bytes], Tuple[str, ...]]:
    """(the two modules, official and patched, by name) and the fixes of the real overlay."""
    base = fetch(release, distribution=distribution)
    overlay = overlay_from_bytes(DEFAULT_OVERLAY.read_bytes(), "the overlay")
    wheel = patch_wheel(BaseWheel(base.read_bytes(), base.name), overlay, origin=ORIGIN)
    modules = {}
    for name, data in (("official", base.read_bytes()), ("patched", wheel.data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            modules[name] = archive.read(CONVERSION_TARGET)
    return modules, wheel.provenance.fixes


@pytest.mark.network
@pytest.mark.parametrize(
    "distribution, release, applies",
    [
        pytest.param("torch-tensorrt", "2.10.0", False, id="2.10.0"),
        pytest.param("torch-tensorrt", "2.11.0", True, id="2.11.0"),
        pytest.param("torch-tensorrt-rtx", "2.11.0", True, id="rtx-2.11.0"),
        pytest.param("torch-tensorrt", "2.12.0", False, id="2.12.0"),
        pytest.param("torch-tensorrt-rtx", "2.14.0", False, id="rtx-2.14.0"),
    ],
)
def test_engine_bytes_reaches_only_the_releases_whose_convert_module_matches(
    distribution: str, release: str, applies: bool
) -> None:
    modules, fixes = _patched(release, distribution)
    assert ("engine-bytes" in fixes) is applies
    assert (modules["patched"] != modules["official"]) is applies


@pytest.mark.network
def test_only_the_fix_definitions_change_in_the_conversion_module() -> None:
    modules, _ = _patched("2.11.0", "torch-tensorrt-rtx")
    trees = {name: ast.parse(source) for name, source in modules.items()}
    texts = {name: source.decode() for name, source in modules.items()}
    before, after = (top_level_definitions(trees[n]) for n in ("official", "patched"))
    changed = {
        name
        for name in after
        if name not in before
        or ast.get_source_segment(texts["official"], before[name])
        != ast.get_source_segment(texts["patched"], after[name])
    }
    assert changed == set(ENGINE_BYTES.functions)
    assert set(before) <= set(after)
    compile(modules["patched"], CONVERSION_TARGET, "exec")


def test_a_second_module_gets_only_the_imports_and_constants_its_definitions_use() -> None:
    overlay = overlay_from_bytes(
        b"import os\nimport gc, sys as system\nfrom typing import Any, List\n\n"
        b"USED = 'a'\nUNUSED = 'b'\n\n"
        b"def helper():\n    gc.collect()\n\n"
        b"def moved(x: Any) -> None:\n    return system.getsizeof(os.sep + USED)\n",
        "o",
    )
    part = _needed_by(overlay, tuple(d for d in overlay.definitions if d.name == "moved"))
    assert [d.name for d in part.definitions] == ["moved"]
    assert [ast.unparse(node) for node in part.imports] == [
        "import os",
        "import sys as system",
        "from typing import Any",
    ]
    assert [ast.unparse(node) for node in part.constants] == ["USED = 'a'"]


def test_the_fix_names_a_module_other_than_utils() -> None:
    assert ENGINE_BYTES.target == CONVERSION_TARGET != TARGET
