"""Support and settings (config.py, settings.py): what the build supports, what a user asks."""

from __future__ import annotations

import sys
from typing import Dict

import pytest
from patched_wheel import PatchError
from patched_wheel.config import DEFAULT_RELEASE, FIX_NAMES
from patched_wheel.patch import FIXES
from patched_wheel.settings import canonical_distribution, choice_from_environment

from tests.patched_wheel.helpers import names


def test_the_fix_table_follows_the_order_of_the_fix_names() -> None:
    assert tuple(fix.name for fix in FIXES) == FIX_NAMES


def test_the_distribution_is_chosen_by_its_variable() -> None:
    choice = choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "torch-tensorrt-rtx"})
    assert choice.request.distribution == "torch-tensorrt-rtx"
    assert canonical_distribution("torch_tensorrt_rtx") == "torch-tensorrt-rtx"
    with pytest.raises(PatchError) as refused:
        choice_from_environment({"TORCHTRT_BASE_DISTRIBUTION": "tensorrt-rtx"})
    names(refused.value, "TORCHTRT_BASE_DISTRIBUTION", "'tensorrt-rtx'")


POSIX_ONLY = pytest.mark.skipif(
    sys.platform == "win32", reason="Windows environment names are case-insensitive"
)


@pytest.mark.parametrize(
    "variable",
    [
        pytest.param("TORCHTRT_BASE_RELEASE", id="alias"),
        pytest.param("TORCHTRT_BSAE_VERSION", id="near-miss"),
        pytest.param("torchtrt_base_version", id="lower-case", marks=POSIX_ONLY),
    ],
)
def test_a_variable_the_build_does_not_read_is_refused_with_the_one_it_reads(
    variable: str,
) -> None:
    environ: Dict[str, str] = {variable: DEFAULT_RELEASE}
    with pytest.raises(PatchError) as refused:
        choice_from_environment(environ)
    names(refused.value, variable, "TORCHTRT_BASE_VERSION")
