"""The README's generated blocks are what their code makes from the data today.

The command is the one the build tool advises (``matrix.README_COMMAND``) and the README shows,
with ``--check``: cog compares each block with its code's output and writes nothing.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from patched_wheel import matrix

from evidence import REPOSITORY

WORDS = shlex.split(matrix.README_COMMAND)  # python3 -m cogapp -r OPTIONS README.md


def test_the_committed_readme_passes_the_check() -> None:
    assert WORDS[:4] == ["python3", "-m", "cogapp", "-r"] and WORDS[-1] == "README.md"
    command = [sys.executable, "-m", "cogapp", "--check", "--diff", *WORDS[4:]]
    checked = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
