"""The overlay a patched wheel names, found again in this repository's git history.

A patched wheel's provenance record names the overlay by the sha256 of its bytes and the
revision that built it. :func:`find_overlay` looks for those bytes where they are most likely
to be: the working tree's overlay, the overlay at the recorded revision, then every version of
the overlay's file that any commit of the clone holds (a wheel built from a commit later
rebased, or from a dirty tree whose change was committed after). Git is asked through its
command line; a clone without git or without the revision simply has fewer places to look.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional

from patched_wheel.paths import OVERLAY_PATH
from patched_wheel.provenance import UNKNOWN

__all__ = ["FoundOverlay", "find_overlay"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FoundOverlay:
    """The overlay's bytes, and where they were found (for the user to read)."""

    data: bytes
    where: str


def _git_bytes(repository: Path, *args: str) -> Optional[bytes]:
    try:
        completed = subprocess.run(
            ["git", "-C", str(repository), *args], capture_output=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout


def _commits_touching_overlay(repository: Path) -> List[str]:
    """Every commit of every ref that changed the overlay, newest first."""
    listed = _git_bytes(repository, "rev-list", "--all", "--", OVERLAY_PATH)
    return listed.decode("ascii", "replace").split() if listed else []


def _candidates(repository: Path, revision: str) -> Iterator[FoundOverlay]:
    """The overlay's bytes, place by place, in the order :func:`find_overlay` tries them."""
    working = repository.joinpath(*OVERLAY_PATH.split("/"))
    if working.is_file():
        yield FoundOverlay(working.read_bytes(), f"the working tree's {OVERLAY_PATH}")
    if not (repository / ".git").exists():
        return
    # --end-of-options (git 2.24+): nothing from a record reaches git as an option; an older git
    # refuses the call, and the overlay is then not found there, which the caller says.
    if revision != UNKNOWN:
        at_revision = _git_bytes(
            repository, "show", "--end-of-options", f"{revision}:{OVERLAY_PATH}"
        )
        if at_revision is not None:
            yield FoundOverlay(at_revision, f"{OVERLAY_PATH} at revision {revision}")
    for commit in _commits_touching_overlay(repository):
        data = _git_bytes(repository, "show", "--end-of-options", f"{commit}:{OVERLAY_PATH}")
        if data is not None:
            yield FoundOverlay(data, f"{OVERLAY_PATH} at commit {commit} (from git log)")


def find_overlay(repository: Path, sha256: str, revision: str) -> Optional[FoundOverlay]:
    """The overlay whose bytes have ``sha256``, from ``repository``; ``None`` if none has."""
    for candidate in _candidates(repository, revision):
        if hashlib.sha256(candidate.data).hexdigest() == sha256:
            logger.debug("overlay %s found: %s", sha256, candidate.where)
            return candidate
    return None
