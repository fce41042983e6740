"""Support and settings (config.py, settings.py): what the build supports, what a user asks."""

from __future__ import annotations

import re
import sys

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_RELEASE, FIX_NAMES
from patched_wheel.patch import FIXES
from patched_wheel.settings import canonical_distribution, choice_from_environment


def test_the_fix_names_are_the_fix_table() -> None:
    assert tuple(fix.name for fix in FIXES) == FIX_NAMES


def test_the_distribution_is_chosen_by_its_variable() -> None:
    choice = choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "torch-tensorrt-rtx"})
    assert choice.request.distribution == "torch-tensorrt-rtx"
    assert canonical_distribution("torch_tensorrt_rtx") == "torch-tensorrt-rtx"
    with pytest.raises(PatchError, match="TORCHTRT_BASE_DISTRIBUTION='tensorrt-rtx' is not one"):
        choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "tensorrt-rtx"})


@pytest.mark.parametrize(
    "environ, fragment",
    [
        pytest.param({"TORCHTRT_BASE_RELEASE": "2.13.0"}, "did you mean TORCHTRT_BASE_VERSION (the CLI's --release)", id="alias"),
        pytest.param({"TORCHTRT_BSAE_VERSION": "2.13.0"}, "did you mean TORCHTRT_BASE_VERSION?", id="near-miss"),
        pytest.param({"torchtrt_base_version": "2.13.0"}, "torchtrt_base_version is not read: environment variables are case-sensitive; did you mean TORCHTRT_BASE_VERSION?", id="lower-case", marks=pytest.mark.skipif(sys.platform == "win32", reason="Windows environment names are case-insensitive")),
    ],
)  # fmt: skip
def test_a_variable_the_build_does_not_read_is_refused(environ: dict, fragment: str) -> None:
    with pytest.raises(PatchError, match=re.escape(fragment)):
        choice_from_environment(environ)


def test_a_misspelt_variable_is_refused() -> None:
    with pytest.raises(PatchError, match="did you mean TORCHTRT_BASE_VERSION"):
        choice_from_environment({"TORCHTRT_BSAE_VERSION": DEFAULT_RELEASE})
