"""A proposed addition to the overlay ``py/torch_tensorrt/dynamo/utils.py`` (issue 40, item 6),
kept apart because the lead owns the overlay today: move :func:`memory_fixes` there (with the
``importlib.metadata`` and ``json`` imports) and delete this file.

On the GPU machine, without this repository, one command then says which of the fork's fixes
the installed wheel carries and how each ``TORCHTRT_*`` setting the fork reads is in effect::

    python -c "from torch_tensorrt.dynamo.utils import memory_fixes; print(memory_fixes())"

Until then the docs give a standard-library command that reads the same provenance record
(the install page, "Check what is installed"), which shows the fixes and the variables set, but
not their effect: the defaults live in the overlay, and this function reads them from there.
The names it uses (``MALLOC_TRIM_ENV_VAR``, ``PINNED_BOUNCE_ENV_VAR``,
``KEEP_SERIALIZED_ENGINE_ENV_VAR``, ``_env_flag_enabled``, ``_glibc_malloc_trim``) are the
overlay's own; the stand-ins below make this file import on its own for review.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
from typing import Callable, Dict, List, Optional

# -- stand-ins for the overlay's own names (drop these when moving the function) -------------
MALLOC_TRIM_ENV_VAR = "TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM"
PINNED_BOUNCE_ENV_VAR = "TORCHTRT_OFFLOAD_PINNED_BOUNCE"
KEEP_SERIALIZED_ENGINE_ENV_VAR = "TORCHTRT_KEEP_SERIALIZED_ENGINE"


def _env_flag_enabled(name: str) -> bool:
    return os.environ.get(name, "1").strip().lower() not in ("0", "false", "no", "off")


def _glibc_malloc_trim() -> Optional[Callable[[int], int]]:
    return None


# -- the proposed function --------------------------------------------------------------------


def memory_fixes() -> str:
    """Which of the fork's fixes this installed ``torch_tensorrt`` carries, and how each
    ``TORCHTRT_*`` setting the fork reads is in effect, as lines a person reads.

    Why here: ``pip show`` gives the label, not which fixes the build spliced into this
    release (2.12 and later have no engine-bytes fix, 2.8 and 2.9 no trim), nor whether the
    environment turned one off. The fixes come from the wheel's provenance record
    (``<dist-info>/sboms/patched_wheel.cdx.json``), the settings from the same code that
    reads them during a compile, so the answer cannot drift from what a compile does.
    """
    names = importlib.metadata.packages_distributions().get("torch_tensorrt", [])
    lines: List[str] = []
    properties: Dict[str, str] = {}
    for name in names:
        distribution = importlib.metadata.distribution(name)
        record = [f for f in distribution.files or () if f.name == "patched_wheel.cdx.json"]
        lines.append(f"{distribution.metadata['Name']} {distribution.version}")
        if record:
            component = json.loads(record[0].read_text(encoding="utf-8"))["metadata"]["component"]
            properties = {p["name"].split(":", 1)[1]: p["value"] for p in component["properties"]}
    fixes = properties.get("fixes", "").replace(",", ", ")
    lines.append(f"fixes: {fixes or 'none recorded (not a patched wheel?)'}")
    trim = _env_flag_enabled(MALLOC_TRIM_ENV_VAR)
    found = "" if _glibc_malloc_trim() is not None else " (but glibc's malloc_trim is absent here)"
    keep = os.environ.get(KEEP_SERIALIZED_ENGINE_ENV_VAR, "0").strip() == "1"
    settings = [
        (MALLOC_TRIM_ENV_VAR, f"host heap trimmed after each engine build: {trim}{found}"),
        (
            PINNED_BOUNCE_ENV_VAR,
            f"offload's pinned fast path: {_env_flag_enabled(PINNED_BOUNCE_ENV_VAR)}",
        ),
        (KEEP_SERIALIZED_ENGINE_ENV_VAR, f"serialized engine kept beside the live one: {keep}"),
    ]
    for variable, effect in settings:
        value = os.environ.get(variable)
        lines.append(f"{variable}={value if value is not None else '(unset)'}: {effect}")
    others = sorted(k for k in os.environ if k.startswith("TORCHTRT_") and k not in dict(settings))
    lines += [f"{name}={os.environ[name]}: not read by the fork" for name in others]
    return "\n".join(lines)
