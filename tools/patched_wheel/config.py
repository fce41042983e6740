"""Places and support: where files live and what the build supports.

Every statement of support (help, docs, errors) derives from the constants here; what a user asks
for is checked in :mod:`.settings`.
"""

from __future__ import annotations

from pathlib import Path

# --- Places -----------------------------------------------------------------------------------
REPOSITORY = Path(__file__).resolve().parents[2]
OVERLAY_PATH = "py/torch_tensorrt/dynamo/utils.py"  # as git names it
DEFAULT_OVERLAY = REPOSITORY.joinpath(*OVERLAY_PATH.split("/"))
OVERLAY_KIND = f"an overlay, a Python file such as {OVERLAY_PATH}"  # what a refusal asks for
TOOL_PATH = "tools/patched_wheel"
OVERLAY_RELEASES_FILE = Path(__file__).resolve().with_name("overlay_releases.json")
LOCK_FILE = Path(__file__).resolve().with_name("official_wheels.lock.json")
# Official wheels downloaded once; only ever looked up by their exact official file name.
DEFAULT_CACHE_DIR = REPOSITORY / ".cache" / "base-wheels"
DOCS_MATRIX = REPOSITORY / "docsrc" / "_data" / "supported_matrix.json"
README = REPOSITORY / "README.md"

# --- What the build supports ------------------------------------------------------------------
# The distributions whose wheels install torch_tensorrt/; the first is the default.
DISTRIBUTIONS = ("torch-tensorrt", "torch-tensorrt-rtx")
PROJECT = DISTRIBUTIONS[0]
# Releases the lock holds wheels of and where at least one fix applies, per distribution
# (2.8 and 2.9: no host-trim hook there; their prepare_inputs is 2.10's, which copies).
SUPPORTED_RELEASES = ("2.8.0", "2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
RTX_RELEASES = ("2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
RELEASES = {PROJECT: SUPPORTED_RELEASES, DISTRIBUTIONS[1]: RTX_RELEASES}
DEFAULT_RELEASE = SUPPORTED_RELEASES[-1]
# The fixes the overlay may carry, by name, in the order every list of them follows; the one
# place the names are written (patch.FIXES takes them, and says what each is and where it applies).
FIX_NAMES = ("offload", "host-trim", "input-copy", "engine-bytes")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# The module of the base that the overlay is spliced into, and the other module a fix reaches.
TARGET = "torch_tensorrt/dynamo/utils.py"
CONVERSION_TARGET = "torch_tensorrt/dynamo/conversion/_conversion.py"
# The first segment of every patched wheel's local label (see releases.py for the rest).
LABEL_NAME = "memfix1"
UNLOCKED_OPT_IN = "set TORCHTRT_BASE_UNLOCKED=1 (or pass build --unlocked)"
INSTALLED = "installed"
# The largest wheel the tool reads (the official ones are 4-5 MB): what a hostile file costs.
MiB = 1 << 20
MAX_WHEEL_BYTES = 1 << 30


def supported_releases_text(distribution: str = PROJECT) -> str:
    return ", ".join(RELEASES.get(distribution, SUPPORTED_RELEASES))
