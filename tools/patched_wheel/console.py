"""How the tool talks to a person: its log lines on stderr, for the CLI and the build backend."""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import Iterator

__all__ = ["configure_logging", "escaped", "logging_configured"]

logger = logging.getLogger("patched_wheel")


class _Formatter(logging.Formatter):
    """Progress as plain lines; warnings and worse with their level, as ``warning: ...``.
    Every line is escaped (:func:`escaped`): names from a wheel or an index reach it."""

    def format(self, record: logging.LogRecord) -> str:
        message = escaped(super().format(record))
        if record.levelno >= logging.WARNING:
            return f"{record.levelname.lower()}: {message}"
        return message


def configure_logging() -> None:
    """The build's log lines on stderr: progress (INFO) and warnings."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(message)s"))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


@contextlib.contextmanager
def logging_configured() -> Iterator[None]:
    """:func:`configure_logging` for one command, then the logger as it was (for callers
    that run the command in their own process, such as tests)."""
    saved = (list(logger.handlers), logger.level, logger.propagate)
    configure_logging()
    try:
        yield
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


def escaped(text: str) -> str:
    """``text`` as a terminal may show it: every character it would act on (escape sequences,
    carriage returns, bidirectional overrides) written as a Python escape instead."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)
