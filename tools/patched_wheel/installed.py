"""The base that matches the user's environment: the installed ``torch_tensorrt``.

``TORCHTRT_BASE_VERSION=installed`` (or ``build --release installed``) asks for the official
wheel of the release, Python and platform of the ``torch_tensorrt`` distribution installed in
the running Python (one installed from a wheel; a patched wheel stands for its base). The
release is the distribution's version; the Python and platform come from the tags in its
installed ``.dist-info/WHEEL`` file, which pip copies from the wheel.
Under ``pip wheel .``, whose isolated build hides the user's packages, the interpreter is
asked again outside that isolation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from typing import Optional, Tuple

from packaging.tags import Tag, parse_tag
from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.labels import split_label
from patched_wheel.policy import UNLOCKED_OPT_IN
from patched_wheel.request import BaseRequest
from patched_wheel.wheelfile import parse_headers

__all__ = ["INSTALLED", "installed_request"]

INSTALLED = "installed"
DISTRIBUTION = "torch_tensorrt"


# Asks the interpreter for the installed distribution's version and WHEEL file.
_QUERY = f"""
import json
from importlib import metadata
found = [
    [d.version, d.read_text("WHEEL")]
    for d in metadata.distributions(name={DISTRIBUTION!r})
    if d.read_text("WHEEL")
]
print(json.dumps(found[0] if found else None))
"""

# Variables by which pip's build isolation hides the user's packages from the build.
_ISOLATION_VARIABLES = ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")


def _outside_build_isolation() -> Optional[Tuple[str, str]]:
    """(version, WHEEL text) as the interpreter sees it without pip's build isolation.

    Under ``pip wheel .`` the build runs in an isolated environment of the same interpreter,
    which hides the packages the user installed; asking the interpreter again, with the
    variables of that isolation removed, finds them.
    """
    environ = {k: v for k, v in os.environ.items() if k not in _ISOLATION_VARIABLES}
    try:
        completed = subprocess.run(
            [sys.executable, "-c", _QUERY],
            env=environ,
            capture_output=True,
            text=True,
            check=True,
        )
        answer = json.loads(completed.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None
    return (str(answer[0]), str(answer[1])) if answer else None


def _installed() -> Tuple[str, str]:
    """(version, WHEEL text) of the installed distribution."""
    for found in metadata.distributions(name=DISTRIBUTION):
        wheel_text = found.read_text("WHEEL")
        if wheel_text:  # installed from a wheel (a build's own .egg-info has none)
            return found.version, wheel_text
    under_pip = any(os.environ.get(name) for name in ("PIP_BUILD_TRACKER", "PIP_REQ_TRACKER"))
    outside = _outside_build_isolation() if under_pip else None
    if outside is None:
        raise PatchError(
            f"'{INSTALLED}' asks for the installed {DISTRIBUTION}, and this Python has none; "
            "install it, or give the release (TORCHTRT_BASE_VERSION or --release)"
        )
    return outside


def _cpython_tag(text: str) -> Tuple[str, str]:
    """(Python ``3.N``, platform) of the first CPython tag in the installed WHEEL file."""
    found = [
        tag
        for key, value in parse_headers(text.encode("utf-8"))
        if key.lower() == "tag"
        for tag in _tags(value)
        if tag.interpreter.startswith("cp3") and tag.interpreter[3:].isdigit()
    ]
    if not found:
        raise PatchError(
            f"the installed {DISTRIBUTION} has no CPython tag in its WHEEL file (not installed "
            "from a wheel?); give the release, platform and Python instead"
        )
    return f"3.{found[0].interpreter[3:]}", found[0].platform


def _tags(value: str) -> Tuple[Tag, ...]:
    try:
        return tuple(sorted(parse_tag(value.strip()), key=str))
    except ValueError:
        return ()


def _release(version: str, unlocked: bool) -> str:
    try:
        parsed: Optional[Version] = Version(version)
    except InvalidVersion:
        parsed = None
    if parsed is None or str(parsed) != version or len(parsed.release) != 3:
        raise PatchError(
            f"the installed {DISTRIBUTION} {version!r} is not a release the build knows; "
            "give the release (TORCHTRT_BASE_VERSION or --release) instead"
        )
    base_version, label = split_label(version)
    if label is not None:
        return base_version  # a patched wheel (any label the fork has used): its base's release
    if parsed.local is not None and not unlocked:
        raise PatchError(
            f"the installed {DISTRIBUTION} {version} is a CUDA-variant release (+{parsed.local}"
            "), which the lock of official wheels does not know: the lock holds PyPI's wheels "
            f"only. To build from it anyway, {UNLOCKED_OPT_IN} with your index in "
            "PIP_INDEX_URL, or set TORCHTRT_BASE_WHEEL to its wheel file"
        )
    return version


def installed_request(*, unlocked: bool = False) -> BaseRequest:
    """The release, platform and Python of the installed ``torch_tensorrt``.

    Raises:
        PatchError: If none is installed, it has no CPython tag, or it is a CUDA-variant
            release and ``unlocked`` is false.
    """
    version, wheel_text = _installed()
    release = _release(version, unlocked)
    python, platform = _cpython_tag(wheel_text)
    return BaseRequest(release, platform, python)
