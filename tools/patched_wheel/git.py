"""git, asked about the clone's own objects only.

The build reads its revision from git and ``verify`` rebuilds from a revision's files; both must
see what the clone holds, never what a caller's ``GIT_*`` variables or replace refs point at,
and files as git stores them (:func:`blobs`), never through the clone's filters (``eol``,
``core.autocrlf``, ``export-subst``) that ``git archive`` and a checkout apply.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Dict, Optional

from . import PatchError


class GitUnavailable(PatchError):
    """git cannot be run here at all (not installed, or not on ``PATH``)."""


def git_environment() -> Dict[str, str]:
    """The environment git runs in: none of the caller's ``GIT_*`` variables (``GIT_DIR``,
    ``GIT_OBJECT_DIRECTORY``, ``GIT_CONFIG_*`` ... would point git at other objects or
    settings), replace refs off, no graft file: git answers for the clone's own objects."""
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith("GIT_")}
    environ.update(GIT_NO_REPLACE_OBJECTS="1", GIT_GRAFT_FILE=os.devnull, LC_ALL="C")
    return environ


def git_bytes(repository: Path, *args: str) -> Optional[bytes]:
    """git's output in ``repository`` as its own objects say (see :func:`git_environment`),
    ``None`` on any failure but git refusing the folder, which is a PatchError (callers put
    values from a record after ``--end-of-options``)."""
    command = ["git", "--no-replace-objects", "-C", str(repository), *args]
    try:
        done = subprocess.run(command, capture_output=True, env=git_environment(), timeout=60)
    except OSError as error:
        raise GitUnavailable(
            f"git cannot be run here ({error.strerror or error}), and the releases are read "
            "from this clone's git history; install git or put it on PATH"
        ) from None
    except subprocess.SubprocessError:
        return None
    if b"safe.directory" in done.stderr:
        raise PatchError(
            f"git refuses to read {str(repository)!r}: the folder belongs to another user "
            "(git's safe.directory); run as its owner, or trust it with: git config --global "
            f"--add safe.directory {shlex.quote(str(repository))}"
        )
    return done.stdout if done.returncode == 0 else None


def git_text(repository: Path, *args: str) -> Optional[str]:
    output = git_bytes(repository, *args)
    return None if output is None else output.decode("utf-8", "replace")


def blobs(repository: Path, revision: str, *paths: str) -> Optional[Dict[str, bytes]]:
    """The regular files under ``paths`` at ``revision``, by path, as git stores them (no
    filter, no line-end conversion); ``None`` where git cannot list them."""
    listing = git_bytes(
        repository, "ls-tree", "-r", "-z", "--full-tree", "--end-of-options", revision, "--", *paths
    )
    if listing is None:
        return None
    entries = [row.split(b"\t", 1) for row in listing.split(b"\0") if b"\t" in row]
    files = [
        (meta.split()[2].decode(), path.decode("utf-8", "surrogateescape"))
        for meta, path in entries
        if meta.split()[:2] in ([b"100644", b"blob"], [b"100755", b"blob"])
    ]
    return {path: _blob(repository, object_id) for object_id, path in files}


def _blob(repository: Path, object_id: str) -> bytes:
    data = git_bytes(repository, "cat-file", "blob", object_id)
    if data is None:
        raise PatchError(
            f"git cannot read object {object_id} of {str(repository)!r}; check the clone"
        )
    return data
