"""A fix may name alternative upstream names for a hook: a rename upstream is a policy change."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Callable

import pytest
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.lock import Lock
from patched_wheel.policy import FIXES, TARGET, Fix, supported_releases_text
from patched_wheel.splice import parse_overlay
from wheel_helpers import sha256

# An upstream release that renamed deallocate_module to offload_module_to_host.
RENAMED_UTILS = b"""\
import gc


def offload_module_to_host(module):
    module.to("cpu")


def release_host_and_device_memory():
    gc.collect()
"""

# The overlay of such a release: it defines the new name (and the old one, for older bases).
OVERLAY = '''\
def deallocate_module(module, delete_module=True):
    """The fork's offload."""


def offload_module_to_host(module):
    """The fork's offload, under the renamed hook."""


def release_host_and_device_memory():
    """The fork's release."""
'''

RENAMED_FIXES = (
    Fix("offload without doubling memory", (("deallocate_module", "offload_module_to_host"),)),
    Fix("host heap trimmed after each engine build", ("release_host_and_device_memory",)),
)


def _build(base: Path, out: Path) -> Path:
    wheel = read_base(base, lock=Lock({base.name: sha256(base)}))
    return build_patched_wheel(
        wheel, out_dir=out, overlay=parse_overlay(OVERLAY), fixes=RENAMED_FIXES
    )


def test_a_hook_under_its_alternative_name_is_found(
    synthetic_wheel: Callable[..., Path], tmp_path: Path
) -> None:
    base = synthetic_wheel({TARGET: RENAMED_UTILS, "torch_tensorrt/dynamo/_compiler.py": b""})
    patched = _build(base, tmp_path / "out")
    with zipfile.ZipFile(patched) as archive:
        spliced = archive.read(TARGET).decode()
    assert '"""The fork\'s offload, under the renamed hook."""' in spliced


def test_the_same_base_is_refused_without_the_alternative(
    synthetic_wheel: Callable[..., Path], tmp_path: Path
) -> None:
    base = synthetic_wheel({TARGET: RENAMED_UTILS, "torch_tensorrt/dynamo/_compiler.py": b""})
    wheel = read_base(base, lock=Lock({base.name: sha256(base)}))
    with pytest.raises(PatchError, match=r"no top-level 'deallocate_module' in "):
        build_patched_wheel(wheel, out_dir=tmp_path / "out", overlay=parse_overlay(OVERLAY))


def test_a_base_with_neither_name_is_refused_naming_both(
    synthetic_wheel: Callable[..., Path], tmp_path: Path
) -> None:
    utils = b"import gc\n\n\ndef release_host_and_device_memory():\n    gc.collect()\n"
    base = synthetic_wheel({TARGET: utils, "torch_tensorrt/dynamo/_compiler.py": b""})
    with pytest.raises(PatchError) as error:
        _build(base, tmp_path / "out")
    assert error.match(
        "^"
        + re.escape(
            f"{base.name}: no top-level 'deallocate_module' or 'offload_module_to_host' in "
            f"{TARGET}, so the fix 'offload without doubling memory' cannot apply (it takes "
            "effect through deallocate_module()); the build makes no wheel with only some of "
            f"the fixes. Supported base releases are {supported_releases_text()}: choose one "
            "with TORCHTRT_BASE_VERSION"
        )
        + "$"
    )


def test_every_hook_reads_as_alternatives() -> None:
    assert RENAMED_FIXES[0].alternatives() == (("deallocate_module", "offload_module_to_host"),)
    assert [fix.alternatives() for fix in FIXES] == [
        (("deallocate_module",),),
        (("release_host_and_device_memory",),),
    ]
