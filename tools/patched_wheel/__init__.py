"""Build patched ``torch_tensorrt`` wheels from the official releases, and verify them.

The build splices the fork's overlay ``py/torch_tensorrt/dynamo/utils.py`` into an official
wheel's (the *base*, pinned by sha256 in the lock), gives the result a local version label and
writes a new wheel: the members written anew are stored, every other member's compressed bytes
are copied from the base, RECORD is derived. ``verify`` rebuilds a wheel from the base and the
released overlay its provenance record names, and compares the bytes.

Modules, each named for its job: :mod:`.config` (settings, paths, support), :mod:`.lock`,
:mod:`.fetch` (a base into the cache), :mod:`.wheel` (the format), :mod:`.splice`,
:mod:`.patch` (base wheel to patched wheel), :mod:`.releases` (registry, labels, main's
history), :mod:`.provenance` (the SBOM), :mod:`.verify`, :mod:`.index`, :mod:`.matrix`,
:mod:`.backend` (PEP 517), :mod:`.site` and the command line, :mod:`.__main__`. Only
:mod:`.fetch` and :mod:`.lock` start pip (the network); nothing else imports a network module.
"""

from __future__ import annotations

import importlib.util
import os
import sys

if importlib.util.find_spec("packaging") is None:  # the one package the tool needs, checked
    # in the first code that every entry (the CLI, the backend) runs
    sys.exit(
        "error: the build needs the 'packaging' package, which this Python lacks (pip wheel "
        "--no-build-isolation builds with the running Python's packages); install it with: "
        f"{os.path.basename(sys.executable)} -m pip install 'packaging>=24'"
    )

__all__ = ["PatchError"]


class PatchError(Exception):
    """A base wheel, an overlay, a wheel to verify or a setting that the tool refuses; the
    message names the thing and says what to do. The only exception the tool raises on purpose;
    the command line catches it once and exits with status 1."""
