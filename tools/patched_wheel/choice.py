"""What the user asks for as the base: from the environment, the command line, or the
installed ``torch_tensorrt``; validated where it enters, named as the user named it.

The environment of ``pip wheel .`` and ``python -m build``:

* ``TORCHTRT_BASE_WHEEL=<path>``: that wheel file, offline; its name fixes release, platform
  and Python;
* otherwise ``TORCHTRT_BASE_VERSION`` (default: the newest supported release, or
  ``installed``), with optional ``TORCHTRT_BASE_PLATFORM`` (e.g. ``manylinux_2_28_aarch64``)
  and ``TORCHTRT_BASE_PYTHON`` (e.g. ``3.12``); unset, they mean the running platform and
  Python;
* ``TORCHTRT_BASE_UNLOCKED=1``: a base the lock of official wheels does not know is built
  (with a warning) instead of refused.

Any other ``TORCHTRT_BASE_*`` variable, or a near miss of these names, is refused with the
name it probably meant: a misspelt variable would otherwise be ignored, and the build would
quietly patch another release than the one asked for.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Callable, Mapping, Optional

from patched_wheel import PatchError
from patched_wheel.installed import INSTALLED, installed_request
from patched_wheel.policy import DEFAULT_RELEASE, canonical_python, canonical_release
from patched_wheel.request import BaseChoice, BaseRequest

__all__ = [
    "BaseChoice",
    "INSTALLED",
    "VARIABLES",
    "canonical_platform",
    "check_variable_names",
    "choice_from_environment",
    "release_or_installed",
    "request_choice",
    "unlocked_from_environment",
]

_REQUEST_VARIABLES = ("TORCHTRT_BASE_VERSION", "TORCHTRT_BASE_PLATFORM", "TORCHTRT_BASE_PYTHON")

# Every variable the build reads.
VARIABLES = ("TORCHTRT_BASE_WHEEL", *_REQUEST_VARIABLES, "TORCHTRT_BASE_UNLOCKED")

# How alike a name must be to one of VARIABLES to count as a misspelling of it (difflib's
# ratio): TORCHTRT_BSAE_VERSION is (0.95), upstream's TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM is not.
_NEAR_MISS = 0.85


def canonical_platform(value: str) -> str:
    """``value`` if it looks like a platform tag (``manylinux_2_28_x86_64``, ``win_amd64``)."""
    if not re.fullmatch(r"[a-z0-9_]+", value):
        raise ValueError(
            f"{value!r} is not a platform tag such as 'manylinux_2_28_x86_64' or 'win_amd64'"
        )
    return value


def release_or_installed(value: str) -> str:
    """A canonical release, or ``installed`` (``Installed``, ``INSTALLED ``: suggested)."""
    if value == INSTALLED:
        return value
    if value.strip().lower() == INSTALLED:
        raise ValueError(f"{value!r} is not a release; write {INSTALLED!r} for the installed one")
    return canonical_release(value)


def _misspelt(name: str) -> bool:
    if name in VARIABLES:
        return False
    near = difflib.get_close_matches(name, VARIABLES, n=1, cutoff=_NEAR_MISS)
    return name.startswith("TORCHTRT_BASE_") or bool(near)


def check_variable_names(environ: Mapping[str, str]) -> None:
    """Refuse a ``TORCHTRT_BASE_*`` variable the build does not read, or a near miss.

    Raises:
        PatchError: Naming the variable and the one it probably meant.
    """
    for name in sorted(filter(_misspelt, environ)):
        near = difflib.get_close_matches(name, VARIABLES, n=1, cutoff=0.0)
        raise PatchError(
            f"{name} is not a variable of the build; did you mean {near[0]}? Rename or unset it"
        )


def _checked(environ: Mapping[str, str], name: str, check: Callable[[str], str]) -> Optional[str]:
    """The variable's value through ``check``, or ``None`` if unset or empty."""
    value = environ.get(name, "")
    if value == "":
        return None
    try:
        return check(value)
    except ValueError as error:
        raise PatchError(f"{name}={error}") from None


def unlocked_from_environment(environ: Mapping[str, str]) -> bool:
    """``TORCHTRT_BASE_UNLOCKED``: ``1`` opts in to bases the lock does not know."""
    check_variable_names(environ)
    value = environ.get("TORCHTRT_BASE_UNLOCKED", "")
    if value not in ("", "0", "1"):
        raise PatchError(f"TORCHTRT_BASE_UNLOCKED={value!r} is not 0 or 1; set 1 to opt in")
    return value == "1"


def _wheel_choice(environ: Mapping[str, str], unlocked: bool) -> BaseChoice:
    others = [name for name in _REQUEST_VARIABLES if environ.get(name)]
    if others:
        raise PatchError(
            f"TORCHTRT_BASE_WHEEL is set together with {', '.join(others)}; the wheel's name "
            "already fixes release, platform and Python, so unset the others"
        )
    path = Path(environ["TORCHTRT_BASE_WHEEL"]).expanduser()
    return BaseChoice(wheel=path, wheel_source="TORCHTRT_BASE_WHEEL", unlocked=unlocked)


def request_choice(
    release: Optional[str],
    platform: Optional[str],
    python: Optional[str],
    unlocked: bool,
    *,
    names: str,
) -> BaseChoice:
    """The choice of a release (or ``installed``) with an optional platform and Python.

    ``names`` says how the user gave them, for the message when ``installed`` is combined
    with a platform or Python.
    """
    if release != INSTALLED:
        request = BaseRequest(release or DEFAULT_RELEASE, platform, python)
        return BaseChoice(request=request, unlocked=unlocked)
    if platform or python:
        raise PatchError(
            f"{names}: 'installed' takes the platform and Python of the installed "
            "torch_tensorrt; leave the platform and Python out"
        )
    return BaseChoice(request=installed_request(unlocked=unlocked), unlocked=unlocked)


def choice_from_environment(environ: Mapping[str, str]) -> BaseChoice:
    """The base the environment asks for (see the module docstring).

    Raises:
        PatchError: For a malformed variable, or variables that contradict each other.
    """
    unlocked = unlocked_from_environment(environ)
    if environ.get("TORCHTRT_BASE_WHEEL"):
        return _wheel_choice(environ, unlocked)
    return request_choice(
        _checked(environ, "TORCHTRT_BASE_VERSION", release_or_installed),
        _checked(environ, "TORCHTRT_BASE_PLATFORM", canonical_platform),
        _checked(environ, "TORCHTRT_BASE_PYTHON", canonical_python),
        unlocked,
        names="TORCHTRT_BASE_VERSION=installed with TORCHTRT_BASE_PLATFORM or _PYTHON",
    )
