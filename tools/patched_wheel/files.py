"""Files the tool writes beside wheels (the simple index, the lock, the docs' tables, cached
bases), never half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically", "write_text_atomically"]


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` through a temporary file in the same folder, then rename it into place.

    A reader (a web host serving the index, a docs build, a concurrent build reading the
    cache) sees the old file or the new one, never a part; a failed write leaves the old file
    and no temporary one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_text_atomically(path: Path, text: str) -> None:
    """:func:`write_atomically` for text, UTF-8 with ``\\n`` line ends on every platform."""
    write_atomically(path, text.encode("utf-8"))
