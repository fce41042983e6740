"""git, asked about the clone's own objects only.

The build reads its revision from git and ``verify`` rebuilds from a revision's files; both must
see what the clone holds, never what a caller's ``GIT_*`` variables or replace refs point at.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Dict, Optional

from . import PatchError


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
    except (OSError, subprocess.SubprocessError):
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
