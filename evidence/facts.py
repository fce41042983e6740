"""The facts about the build that the docs, the README and the tests show, from the build tool.

The newest supported release and the supported releases are the tool's constants
(``patched_wheel.config``); the label is that of the newest overlay in the tool's registry of
released overlays (``overlay_releases.json``), which is what an index of patched wheels offers,
whatever this checkout's overlay is. The docs take them as substitutions (``docsrc/conf.py``:
``|default_release|`` and the others, in prose and in ``substitution-code-block``), the README
through cog, the tests by importing this module: nobody types them.
"""

from __future__ import annotations

from typing import Dict

from patched_wheel import config
from patched_wheel.releases import load_overlay_releases, release_label

SUPPORTED_RELEASES = config.SUPPORTED_RELEASES
NEWEST_RELEASE = config.DEFAULT_RELEASE


def label() -> str:
    """The local label of the newest released overlay, ``memfix1.4``."""
    return release_label(max(load_overlay_releases().values()))


def released_overlay_sha256() -> str:
    """The sha256 of the newest released overlay: the fork whose figures the docs give."""
    releases = load_overlay_releases()
    return max(releases, key=releases.__getitem__)


def patched_version() -> str:
    """The newest release's patched version, ``2.14.0+memfix1.4``."""
    return f"{NEWEST_RELEASE}+{label()}"


def substitutions() -> Dict[str, str]:
    """``|name|`` -> its text, as every page of the docs has them."""
    return {
        "default_release": NEWEST_RELEASE,
        "oldest_release": SUPPORTED_RELEASES[0],
        "local_label": label(),
        "patched_version": patched_version(),
    }
