"""What running a benchmark takes: its error type, the overlay, and a case in a process of its own.

:func:`run_in_fresh_process` runs one case in a process of its own, so that no case inherits
another's allocator state; the case hands its figures back with :func:`print_case_result`.
What a result file is, and how it is written, is :mod:`evidence.result`'s; what a process's
memory is, :mod:`evidence.memory`'s.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from types import ModuleType
from typing import Any, Dict, List, Mapping, Optional

from patched_wheel.config import DEFAULT_OVERLAY as OVERLAY

from evidence import REPOSITORY, import_file

OVERLAY_MODULE_NAME = "torchtrt_fork_overlay_utils"

logger = logging.getLogger(__name__)

# The line prefix a case's process prints its figures after (other output may precede it).
CASE_RESULT_PREFIX = "BENCHMARK_CASE_RESULT "


class BenchmarkError(Exception):
    """A benchmark cannot run as asked; the dispatcher prints it as one ``error:`` line and
    exits 1 (the benchmarks' one error type: library code never exits the process)."""


class CaseFailed(BenchmarkError):
    """A case's process exited with an error or printed no result line."""


def load_overlay() -> ModuleType:
    """The overlay, imported once per process from ``py/`` (later calls return the same one).

    Why by file location: ``py/torch_tensorrt`` is a part of a package whose other modules
    need TensorRT; putting ``py`` on ``sys.path`` would make ``import torch_tensorrt`` find
    that part instead of the installed package.
    """
    return import_file(OVERLAY_MODULE_NAME, OVERLAY)


def print_case_result(figures: Mapping[str, Any]) -> None:
    """How a case's process hands its figures to the driver (:func:`run_in_fresh_process`)."""
    print(CASE_RESULT_PREFIX + json.dumps(figures), flush=True)


def run_in_fresh_process(
    command: List[str], env: Optional[Mapping[str, str]] = None, timeout_s: float = 3600.0
) -> Dict[str, Any]:
    """Run one case's ``command`` (Python's arguments: a script, or ``-m`` and a module) in a
    process of its own, from the repository's root.

    Returns the figures it printed with :func:`print_case_result`. Raises :class:`CaseFailed`
    with the end of its error output when it fails.
    """
    done = subprocess.run(
        [sys.executable, *command],
        env=dict(os.environ if env is None else env),
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(CASE_RESULT_PREFIX)]
    if done.returncode != 0 or not lines:
        raise CaseFailed(f"exit {done.returncode}: {done.stderr.strip()[-3000:]}")
    figures: Dict[str, Any] = json.loads(lines[-1][len(CASE_RESULT_PREFIX) :])
    return figures
