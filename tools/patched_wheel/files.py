"""Files the tool writes beside wheels (the simple index, the lock, the docs' tables, cached
bases), never half-written."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType
from typing import Iterator, Optional

__all__ = ["Interrupted", "signals_unwind", "write_atomically", "write_text_atomically"]


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM while a file was being written: unwinds like Ctrl-C, so that the
    ``finally`` clauses remove the temporary file, and is never taken for a refusal (it is not
    a :class:`~patched_wheel.PatchError`, which a caller may collect and go on)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        return 128 + self.signum

    def describe(self) -> str:
        return f"interrupted by {signal.Signals(self.signum).name}; nothing half-written is left"


def _raise_interrupted(signum: int, frame: Optional[FrameType]) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` inside the block (in the main thread;
    elsewhere signals cannot be handled), so that its ``finally`` clauses run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def write_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` through a temporary file in the same folder, then rename it into place.

    A reader (a web host serving the index, a docs build, a concurrent build reading the
    cache) sees the old file or the new one, never a part; a failed write leaves the old file
    and no temporary one.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with signals_unwind():
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
