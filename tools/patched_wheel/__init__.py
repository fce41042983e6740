"""Build patched ``torch_tensorrt`` wheels from the official releases, and verify them.

The build splices the fork's overlay ``py/torch_tensorrt/dynamo/utils.py`` into an official
wheel's (the *base*, pinned by sha256 in the lock) and writes it with a local version label,
every other member's compressed bytes copied; ``verify`` rebuilds a wheel and compares bytes.
Only :mod:`.fetch` and :mod:`.lock` start pip; nothing else uses the network.
"""

from __future__ import annotations

import importlib.util
import os
import sys

if importlib.util.find_spec("packaging") is None:  # the one package the tool needs, checked first
    sys.exit(
        "error: the build needs the 'packaging' package, which this Python lacks (pip wheel "
        "--no-build-isolation builds with the running Python's packages); install it with: "
        f"{os.path.basename(sys.executable)} -m pip install 'packaging>=24'"
    )


class PatchError(Exception):
    """What the tool refuses (a base wheel, an overlay, a setting): the message names the thing and
    says what to do. The only exception it raises on purpose, caught once, exit status 1."""
