"""Files: read once within a cap, written whole.

Every file the tool reads comes from a user or a download, so it is read through one function
that refuses anything but a regular file and anything larger than its cap; every file it writes
replaces the old one in one rename, so an interrupted command leaves the old file or the new one.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from . import PatchError
from .config import MAX_WHEEL_BYTES, MiB
from .console import signals_unwind


def write_atomically(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write through a temporary file in the folder, then rename: the old file or the new one;
    a folder that cannot take it (a file of that name, a folder at ``path``) is one line."""
    with signals_unwind():
        temporary = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except OSError as error:
            raise PatchError(
                f"cannot write {str(path)!r} ({error.strerror or error}); give an output "
                "folder that is a folder you can write, with no folder in the file's place"
            ) from None
        finally:
            if temporary:
                Path(temporary).unlink(missing_ok=True)


def output_folder(path: Path, option: str = "--out") -> Path:
    """``path`` if it is a folder or absent (made on the first write); one line otherwise."""
    if path.exists() and not path.is_dir():
        raise PatchError(f"{option} {str(path)!r} is a file, not a folder; give a folder")
    return path


def write_text_atomically(path: Path, text: str) -> None:
    """:func:`write_atomically` for text, UTF-8 with ``\\n`` line ends on every platform."""
    write_atomically(path, text.encode("utf-8"))


def as_committed(data: bytes) -> bytes:
    """A text file's bytes with CRLF line ends as LF, as git stores the repository's files: a
    checkout's settings (``core.autocrlf``, ``eol=crlf``) change line ends only, and Python
    compiles either alike, so a file hashes the same whatever a clone's settings wrote."""
    return data.replace(b"\r\n", b"\n")


def read_regular_file(path: Path, cap: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap + 1`` of them; opened without
    blocking (a FIFO would wait for a writer forever) and checked through the descriptor, so a
    FIFO, a device or a symlink to one is an ``OSError``, never a read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags)
    with open(descriptor, "rb") as stream:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise IsADirectoryError(errno.EINVAL, "not a regular file")
        # A buffer of the file's size, not the cap's (read(cap) reserves the whole cap); more
        # only if the file grew since.
        data = stream.read(min(status.st_size, cap) + 1)
        if len(data) > status.st_size:
            data += stream.read(cap - len(data) + 1)
        return data


def read_file(
    path: Path, *, what: str, cap: int = MAX_WHEEL_BYTES, kind: str = "a wheel file"
) -> bytes:
    """:func:`read_regular_file`, refused in one line beyond ``cap`` or where it fails, saying
    what is wrong and to give ``kind`` (what the caller reads: a wheel, or the overlay)."""
    try:
        data = read_regular_file(path, cap)
    except OSError as error:
        raise PatchError(
            f"{what} {str(path)!r} cannot be read ({error.strerror or error}); give the path "
            f"of {kind}"
        ) from None
    if len(data) > cap:
        raise PatchError(
            f"{what} {str(path)!r} is larger than {cap // MiB} MiB; give the path of {kind}"
        )
    return data
