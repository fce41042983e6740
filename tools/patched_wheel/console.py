"""Talking to a person: progress and warnings as escaped lines on stderr, a refusal as one
``error: ...`` line, an interruption (Ctrl-C or SIGTERM) as one line that says so.

Apart from the files the tool writes: every command's ending goes through here, whatever it did.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Iterator, Optional

from . import PatchError

logger = logging.getLogger("patched_wheel")


def escaped(text: str) -> str:
    """``text`` with every character a terminal would act on written as a Python escape."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)


class _Formatter(logging.Formatter):
    """Progress as plain lines, warnings as ``warning: ...``; every line escaped."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        return prefix + escaped(super().format(record))


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """The tool's log lines on stderr for one command; a refusal ends as one ``error: ...`` line
    and exit status 1, an interruption (Ctrl-C, or SIGTERM) as one line and 128 + signal."""
    saved = (list(logger.handlers), logger.level, logger.propagate)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(message)s"))
    logger.handlers[:], logger.level, logger.propagate = [handler], logging.INFO, False
    try:
        yield
    except PatchError as error:
        raise SystemExit(f"error: {escaped(str(error))}") from None
    except KeyboardInterrupt as error:  # Ctrl-C, or one that signals_unwind raises
        signum = signal.Signals(int(error.args[0]) if error.args else signal.SIGINT)
        print(f"error: interrupted by {signum.name}; nothing half-written is left", file=sys.stderr)
        raise SystemExit(128 + signum) from None
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def _raise_interrupted(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt(signum)  # unwinds like Ctrl-C: ``finally`` clauses remove temporaries


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt(signal number)`` inside the block."""
    main_thread = threading.current_thread() is threading.main_thread()  # the only one for signals
    signals = (signal.SIGINT, signal.SIGTERM) if main_thread else ()
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
