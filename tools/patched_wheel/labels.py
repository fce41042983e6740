"""The fork's version label: which overlay a patched wheel carries, in a form pip orders.

A patched wheel's version is its base's plus a PEP 440 local label, ``2.14.0+memfix1.2``.
The number counts the overlays released so far: the registry
(:data:`~patched_wheel.paths.OVERLAY_RELEASES_FILE`, committed beside the lock) maps each
number to the sha256 of the overlay's bytes, so the version changes exactly when the overlay
does, nobody has to remember to bump it, and a newer overlay sorts above an older one (local
segments compare as numbers: ``memfix1.10`` > ``memfix1.9`` > ``memfix1``, the label of the
wheels built before the registry).

An overlay the registry does not know (an edit not yet released) is labelled
``memfix1.<newest>.dev.g<sha256 prefix>``: it names its overlay, sorts after the newest release
and before the next one, and never passes for a release. Releasing it is one command,
``python tools/patched_wheel register-overlay``.

:func:`split_label` is the one way back from a patched version to its base's version, for
every label the fork has used.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Tuple

from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.files import write_text_atomically
from patched_wheel.paths import OVERLAY_RELEASES_FILE
from patched_wheel.policy import LABEL_NAME
from patched_wheel.provenance import is_sha256_hex

__all__ = [
    "LEGACY_LABEL",
    "REGISTER_COMMAND",
    "OverlayReleases",
    "development_label",
    "label_for",
    "label_number",
    "label_sha256_prefix",
    "load_overlay_releases",
    "register_overlay",
    "release_label",
    "split_label",
]

logger = logging.getLogger(__name__)

# The label of every wheel built before overlays were numbered, whatever its overlay.
LEGACY_LABEL = LABEL_NAME

# What a user runs to release the overlay as it is now.
REGISTER_COMMAND = "python tools/patched_wheel register-overlay"

_ABOUT = (
    "The overlays released so far: number -> sha256 of py/torch_tensorrt/dynamo/utils.py. "
    f"A patched wheel's label is {LABEL_NAME}.<number>. Add the current overlay with: "
    f"{REGISTER_COMMAND}"
)

# How many hex digits of the overlay's sha256 a development label carries.
_DEV_DIGITS = 10

_LABEL_TAIL = re.compile(rf"(?:\.([1-9][0-9]*)(?:\.dev\.g([0-9a-f]{{{_DEV_DIGITS}}}))?)?")


@dataclass(frozen=True)
class OverlayReleases:
    """Number -> sha256 of every released overlay."""

    by_number: Mapping[int, str]

    @property
    def newest(self) -> int:
        """The newest number; 1 (the unnumbered ``memfix1`` wheels) when none is registered."""
        return max(self.by_number, default=1)

    def number_of(self, sha256: str) -> Optional[int]:
        """The number of the overlay with this sha256, if it was released."""
        found = [number for number, known in self.by_number.items() if known == sha256]
        return found[0] if found else None


def release_label(number: int) -> str:
    """The label of the released overlay ``number``: ``memfix1.<number>``."""
    return f"{LABEL_NAME}.{number}"


def development_label(releases: OverlayReleases, overlay_sha256: str) -> str:
    """The label of an overlay not released: after the newest release, naming its sha256."""
    return f"{release_label(releases.newest)}.dev.g{overlay_sha256[:_DEV_DIGITS]}"


def label_for(overlay_sha256: str, releases: OverlayReleases) -> str:
    """The label of the overlay with this sha256; a development label, with a warning, for
    one the registry does not know."""
    number = releases.number_of(overlay_sha256)
    if number is not None:
        return release_label(number)
    label = development_label(releases, overlay_sha256)
    logger.warning(
        "the overlay (sha256 %s) is not a released one, so the wheel is labelled +%s, a "
        "development build; to release it, run: %s",
        overlay_sha256,
        label,
        REGISTER_COMMAND,
    )
    return label


def _releases_from(document: object, path: Path) -> OverlayReleases:
    entries = document.get("overlays") if isinstance(document, dict) else None
    if not isinstance(entries, dict):
        raise PatchError(f"{str(path)!r} has no 'overlays' object; restore it from git")
    by_number = {}
    for number, sha256 in entries.items():
        if not (re.fullmatch(r"[1-9][0-9]*", number) and int(number) >= 2):
            raise PatchError(f"{str(path)!r}: {number!r} is not an overlay number (2, 3, ...)")
        if not (isinstance(sha256, str) and is_sha256_hex(sha256)):
            raise PatchError(f"{str(path)!r}: overlay {number} has no hex sha256")
        by_number[int(number)] = sha256
    if len(set(by_number.values())) != len(by_number):
        raise PatchError(f"{str(path)!r} registers one overlay under two numbers; keep the first")
    return OverlayReleases(by_number)


def load_overlay_releases(path: Path = OVERLAY_RELEASES_FILE) -> OverlayReleases:
    """The registry of released overlays.

    Raises:
        PatchError: If the file cannot be read or is not a registry.
    """
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PatchError(f"cannot read the overlay registry {str(path)!r} ({error})") from None
    return _releases_from(document, Path(path))


def register_overlay(overlay_sha256: str, path: Path = OVERLAY_RELEASES_FILE) -> Tuple[int, bool]:
    """Release the overlay with this sha256 under the next number (or say its number).

    Returns:
        Its number, and whether it was registered now (``False``: it was before).
    """
    releases = load_overlay_releases(path)
    known = releases.number_of(overlay_sha256)
    if known is not None:
        return known, False
    number = releases.newest + 1
    overlays = {
        str(n): s for n, s in sorted({**releases.by_number, number: overlay_sha256}.items())
    }
    document = {"about": _ABOUT, "overlays": overlays}
    try:
        write_text_atomically(Path(path), json.dumps(document, indent=2) + "\n")
    except OSError as error:
        raise PatchError(
            f"cannot write the registry {str(path)!r} ({error.strerror or error}); "
            "register from a checkout you can write"
        ) from None
    return number, True


def split_label(version: str) -> Tuple[str, Optional[str]]:
    """(base version, fork label) of a version; the label is ``None`` for a version without.

    ``2.14.0+memfix1.2`` gives ``("2.14.0", "memfix1.2")``, ``2.9.0+cu130.memfix1`` gives
    ``("2.9.0+cu130", "memfix1")`` and ``2.14.0`` gives ``("2.14.0", None)``. Every label the
    fork has written is understood: ``memfix1``, ``memfix1.<N>`` and the development labels.
    """
    try:
        local = Version(version).local
    except InvalidVersion:
        return version, None
    segments = (local or "").split(".")
    if LABEL_NAME not in segments:
        return version, None
    start = len(segments) - 1 - segments[::-1].index(LABEL_NAME)
    label = ".".join(segments[start:])
    if not _LABEL_TAIL.fullmatch(label[len(LABEL_NAME) :]):
        return version, None
    public = version.split("+", 1)[0]
    return public + ("+" + ".".join(segments[:start]) if start else ""), label


def label_number(label: str) -> Optional[int]:
    """The overlay number a label names (``memfix1.2`` -> 2), ``None`` for ``memfix1``."""
    match = (
        _LABEL_TAIL.fullmatch(label[len(LABEL_NAME) :]) if label.startswith(LABEL_NAME) else None
    )
    return int(match.group(1)) if match and match.group(1) else None


def label_sha256_prefix(label: str) -> Optional[str]:
    """The sha256 prefix a development label carries, ``None`` for a release's label."""
    match = (
        _LABEL_TAIL.fullmatch(label[len(LABEL_NAME) :]) if label.startswith(LABEL_NAME) else None
    )
    return match.group(2) if match else None
