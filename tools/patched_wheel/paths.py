"""Where the build's files live in the repository: one place, so that no module guesses."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_OVERLAY",
    "DOCS_MATRIX",
    "LOCK_FILE",
    "OVERLAY_PATH",
    "OVERLAY_RELEASES_FILE",
    "README",
    "REPOSITORY",
]

REPOSITORY = Path(__file__).resolve().parents[2]

# The fork's overlay: its functions are spliced into upstream's torch_tensorrt/dynamo/utils.py.
DEFAULT_OVERLAY = REPOSITORY.joinpath(*"py/torch_tensorrt/dynamo/utils.py".split("/"))

# The overlay's path inside the repository, as git names it (history is searched by it).
OVERLAY_PATH = "py/torch_tensorrt/dynamo/utils.py"

# The overlays released so far: number -> sha256 (see patched_wheel.labels).
OVERLAY_RELEASES_FILE = Path(__file__).resolve().with_name("overlay_releases.json")

# Official wheels downloaded once; only ever looked up by their exact official file name.
DEFAULT_CACHE_DIR = REPOSITORY / ".cache" / "base-wheels"

# The sha256 of every official wheel, by file name (see patched_wheel.lock).
LOCK_FILE = Path(__file__).resolve().with_name("official_wheels.lock.json")

# Files the matrix command rewrites with --update-docs.
DOCS_MATRIX = REPOSITORY / "docsrc" / "_data" / "supported_matrix.json"
README = REPOSITORY / "README.md"
