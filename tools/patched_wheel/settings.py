"""What the user asks for: the checks of a release, platform, Python and distribution, given as
an option or a variable, and the base wheel they choose.

The CLI's options and the environment of ``pip wheel .`` are checked by the same functions, so a
value refused in one is refused in the other with the same words. The environment:
``TORCHTRT_BASE_WHEEL`` (a wheel file), else ``TORCHTRT_BASE_VERSION`` (a release or
``installed``), ``_PLATFORM``, ``_PYTHON`` and ``_DISTRIBUTION``; ``TORCHTRT_BASE_UNLOCKED=1``
builds a base the lock does not know. Any other ``TORCHTRT_BASE_*`` (in any case, on POSIX) or a
near miss is refused with the name it probably meant: a misspelt variable would quietly patch
another release.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from packaging import tags
from packaging.version import InvalidVersion, Version

from . import PatchError
from .config import DEFAULT_RELEASE, DISTRIBUTIONS, INSTALLED, PROJECT, supported_releases_text

InvalidValue = argparse.ArgumentTypeError  # a check's refusal, which argparse prints as it is


def canonical_release(value: str) -> str:
    """``value`` if it is a canonical release such as ``2.14.0`` (or ``2.9.0+cu128``)."""
    version = Version("0")  # not a version: refused below, as one not of three numbers
    with contextlib.suppress(InvalidVersion):
        version = Version(value.strip())
    plain = not (version.epoch or version.pre or version.post or version.dev)
    if plain and len(version.release) == 3:
        if str(version) == value:
            return value
        raise InvalidValue(f"{value!r} is not a canonical release; write {str(version)!r}")
    raise InvalidValue(
        f"{value!r} is not a release such as {DEFAULT_RELEASE!r}; supported base releases "
        f"are {supported_releases_text()}"
    )


def release_or_installed(value: str) -> str:
    """A canonical release, or ``installed`` (``Installed``, ``INSTALLED ``: suggested)."""
    if value == INSTALLED:
        return value
    if value.strip().lower() == INSTALLED:
        raise InvalidValue(f"{value!r} is not a release; write {INSTALLED!r} for the installed one")
    return canonical_release(value)


def canonical_python(value: str) -> str:
    """``value`` if it is a Python version written ``3.N``."""
    if not re.fullmatch(r"3\.(0|[1-9][0-9]?)", value):
        raise InvalidValue(f"{value!r} is not a Python version such as '3.12'; give major.minor")
    return value


def canonical_platform(value: str) -> str:
    """``value`` if it looks like a platform tag (``manylinux_2_28_x86_64``, ``win_amd64``)."""
    if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)*", value):
        raise InvalidValue(
            f"{value!r} is not a platform tag such as 'manylinux_2_28_x86_64' or 'win_amd64'"
        )
    return value


def canonical_distribution(value: str) -> str:
    """The distribution ``value`` names (``torch_tensorrt_rtx`` is ``torch-tensorrt-rtx``)."""
    name = re.sub(r"[-_.]+", "-", value.strip()).lower()
    if name not in DISTRIBUTIONS:
        raise InvalidValue(f"{value!r} is not one of the distributions {', '.join(DISTRIBUTIONS)}")
    return name


@dataclass(frozen=True)
class BaseRequest:
    """An official wheel to fetch: a release, a platform and Python (``None``: running)."""

    release: str
    platform: Optional[str] = None
    python: Optional[str] = None
    distribution: str = PROJECT

    def describe(self) -> str:
        python = f"Python {self.python}" if self.python else "this Python"
        platform = self.platform or "this platform"
        return f"{self.distribution}=={self.release} for {python} on {platform}"

    def acceptable_tags(self) -> FrozenSet[tags.Tag]:
        """The tags a wheel may carry to serve this request (older manylinux included)."""
        version = sys.version_info[:2] if self.python is None else python_key(self.python)
        return frozenset(tags.cpython_tags(version, platforms=platforms_serving(self.platform)))


@dataclass(frozen=True)
class BaseChoice:
    """A wheel file (``wheel``, named in messages by ``wheel_source``), or a release to fetch."""

    request: BaseRequest = field(default_factory=lambda: BaseRequest(DEFAULT_RELEASE))
    wheel: Optional[Path] = None
    wheel_source: str = "--base-wheel"
    unlocked: bool = False


def platforms_serving(platform: Optional[str]) -> List[str]:
    """Platform tags a wheel may carry to serve ``platform`` (``None``: the running one)."""
    if platform is None:
        return list(tags.platform_tags())
    parts = platform.split("_")
    if platform.startswith("manylinux_") and len(parts) >= 4 and parts[2].isdigit():
        major, minor, arch = parts[1], int(parts[2]), "_".join(parts[3:])
        return [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    return [platform]


def python_key(python: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))


# Variable -> check; TORCHTRT_BASE_WHEEL and TORCHTRT_BASE_UNLOCKED are read apart.
REQUEST_VARIABLES: Mapping[str, Callable[[str], str]] = {
    "TORCHTRT_BASE_VERSION": release_or_installed,
    "TORCHTRT_BASE_PLATFORM": canonical_platform,
    "TORCHTRT_BASE_PYTHON": canonical_python,
    "TORCHTRT_BASE_DISTRIBUTION": canonical_distribution,
}
VARIABLES = ("TORCHTRT_BASE_WHEEL", *REQUEST_VARIABLES, "TORCHTRT_BASE_UNLOCKED")
# Names a user may guess from the CLI's options, and the variable each means.
ALIASES = {"TORCHTRT_BASE_RELEASE": "TORCHTRT_BASE_VERSION (the CLI's --release)"}


def unlocked_from_environment(environ: Mapping[str, str]) -> bool:
    """``TORCHTRT_BASE_UNLOCKED=1``; a misspelt ``TORCHTRT_BASE_*`` variable is refused here."""
    for name in sorted(environ):
        upper = name if os.name == "nt" else name.upper()  # Windows: names are case-insensitive
        near = difflib.get_close_matches(upper, VARIABLES, n=1, cutoff=0.85)
        if name not in VARIABLES and (upper.startswith("TORCHTRT_BASE_") or near):
            near = near or difflib.get_close_matches(upper, VARIABLES, n=1, cutoff=0.0)
            guess = ALIASES.get(upper, near[0])
            unread = "is not read: environment variables are case-sensitive"
            why = unread if upper != name else "is not a variable of the build"
            raise PatchError(f"{name} {why}; did you mean {guess}? Rename or unset it")
    value = environ.get("TORCHTRT_BASE_UNLOCKED", "")
    if value not in ("", "0", "1"):
        raise PatchError(f"TORCHTRT_BASE_UNLOCKED={value!r} is not 0 or 1; set 1 to opt in")
    return value == "1"


def choice_from_environment(
    environ: Mapping[str, str], given: Sequence[Optional[str]] = (), *, unlocked: bool = False
) -> BaseChoice:
    """The base that ``build``'s options ask for (``given``: release or ``installed``, platform,
    Python, distribution), else the environment (see the module docstring); or a refusal."""
    names = "--release installed with --platform or --python"
    if not any(given):
        unlocked = unlocked_from_environment(environ) or unlocked
        values: Dict[str, Optional[str]] = {}
        for name, check in REQUEST_VARIABLES.items():
            try:
                values[name] = check(environ[name]) if environ.get(name) else None
            except InvalidValue as error:
                raise PatchError(f"{name}={error}") from None
        if environ.get("TORCHTRT_BASE_WHEEL"):
            others = [name for name, value in values.items() if value]
            if others:
                raise PatchError(
                    f"TORCHTRT_BASE_WHEEL is set together with {', '.join(others)}; the wheel's "
                    "name already fixes release, platform and Python, so unset the others"
                )
            path = Path(environ["TORCHTRT_BASE_WHEEL"]).expanduser()
            return BaseChoice(wheel=path, wheel_source="TORCHTRT_BASE_WHEEL", unlocked=unlocked)
        given = list(values.values())
        names = "TORCHTRT_BASE_VERSION=installed with TORCHTRT_BASE_PLATFORM or _PYTHON"
    release, platform, python, distribution = given
    if release == INSTALLED and (platform or python):
        raise PatchError(
            f"{names}: 'installed' takes the platform and Python of the installed "
            "torch_tensorrt; leave the platform and Python out"
        )
    request = BaseRequest(release or DEFAULT_RELEASE, platform, python, distribution or PROJECT)
    return BaseChoice(request=request, unlocked=unlocked)
