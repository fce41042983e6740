"""The provenance record inside every patched wheel: which base, which overlay, which code.

The record is a CycloneDX 1.6 SBOM in JSON at ``<dist-info>/sboms/patched_wheel.cdx.json``, the
folder PEP 770 reserves for SBOMs in a wheel, so that it is listed in RECORD like any member and
that SBOM tools read it without knowing this fork. CycloneDX's *pedigree* says what it is made
for: the official wheel is the ``ancestor`` (its file name in the purl's ``file_name``
qualifier, its sha256 in ``hashes``), the repository's revision is a ``commit``, and the change
is a ``backport`` patch. What CycloneDX has no field for (the overlay's sha256, the label, the
dirty flag, the revision when unknown) is in ``properties`` under the ``patched_wheel:``
namespace. The build tool is ``metadata.tools``, its version the sha256 of its own sources
(the tool has no release number; its sources are what ran).

No timestamp and no host name: the record is made only from :class:`ProvenanceRecord`, so an
unchanged overlay, base and revision build the same bytes, and :func:`record_bytes` of
:func:`parse_record` gives back the very bytes a genuine wheel holds.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import parse_qs, quote

from patched_wheel import PatchError
from patched_wheel.paths import OVERLAY_PATH
from patched_wheel.policy import PROJECT
from patched_wheel.provenance import UNKNOWN, is_sha256_hex
from patched_wheel.wheelfile import is_wheel_filename, parse_wheel_name

__all__ = [
    "RECORD_MEMBER",
    "TOOL_NAME",
    "ProvenanceRecord",
    "format_record",
    "parse_record",
    "record_bytes",
    "record_member",
    "tool_sha256",
]

# Where the record lies, relative to the patched wheel's .dist-info folder (PEP 770).
RECORD_MEMBER = "sboms/patched_wheel.cdx.json"

TOOL_NAME = "patched_wheel"

_NAMESPACE = "patched_wheel:"
_TOOL_SOURCES = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ProvenanceRecord:
    """What a patched wheel says of where it came from (see the module docstring)."""

    version: str
    label: str
    base_wheel: str
    base_sha256: str
    overlay_sha256: str
    revision: str
    dirty: Optional[bool]
    tool_sha256: str


def record_member(dist_info: str) -> str:
    """The record's name in the patched wheel whose .dist-info folder is ``dist_info``."""
    return f"{dist_info}/{RECORD_MEMBER}"


def tool_sha256() -> str:
    """The sha256 of the build tool's Python sources (name and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(_TOOL_SOURCES.glob("*.py")):
        data = path.read_bytes()
        digest.update(f"{path.name}\0{len(data)}\0".encode("utf-8") + data)
    return digest.hexdigest()


def _purl(version: str, filename: Optional[str] = None) -> str:
    purl = f"pkg:pypi/{PROJECT}@{quote(version, safe='')}"
    return purl + (f"?file_name={quote(filename, safe='')}" if filename else "")


def _sha256_hash(content: str) -> List[Dict[str, str]]:
    return [{"alg": "SHA-256", "content": content}]


def _properties(record: ProvenanceRecord) -> List[Dict[str, str]]:
    dirty = "unknown" if record.dirty is None else str(record.dirty).lower()
    values = {
        "overlay": OVERLAY_PATH,
        "overlay_sha256": record.overlay_sha256,
        "label": record.label,
        "revision": record.revision,
        "dirty": dirty,
    }
    return [{"name": _NAMESPACE + key, "value": value} for key, value in values.items()]


def _document(record: ProvenanceRecord) -> Dict[str, Any]:
    ancestor = {
        "type": "library",
        "name": PROJECT,
        "version": parse_wheel_name(record.base_wheel).written_version,
        "purl": _purl(parse_wheel_name(record.base_wheel).written_version, record.base_wheel),
        "hashes": _sha256_hash(record.base_sha256),
    }
    pedigree: Dict[str, Any] = {"ancestors": [ancestor], "patches": [{"type": "backport"}]}
    if record.revision != UNKNOWN:
        pedigree["commits"] = [{"uid": record.revision}]
    component = {
        "type": "library",
        "bom-ref": _purl(record.version),
        "name": PROJECT,
        "version": record.version,
        "purl": _purl(record.version),
        "pedigree": pedigree,
        "properties": _properties(record),
    }
    tool = {"type": "application", "name": TOOL_NAME, "version": record.tool_sha256[:12]}
    tool["hashes"] = _sha256_hash(record.tool_sha256)  # type: ignore[assignment]
    metadata = {"component": component, "tools": {"components": [tool]}}
    return {"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1, "metadata": metadata}


def record_bytes(record: ProvenanceRecord) -> bytes:
    """The record as the patched wheel holds it: sorted keys, two-space indent, UTF-8."""
    return (json.dumps(_document(record), indent=2, sort_keys=True) + "\n").encode("utf-8")


def _get(document: Any, *path: Any) -> Any:
    for key in path:
        document = document[key]
    return document


def _from_document(document: Any) -> ProvenanceRecord:
    component = _get(document, "metadata", "component")
    ancestor = _get(component, "pedigree", "ancestors", 0)
    properties = {p["name"][len(_NAMESPACE) :]: p["value"] for p in component["properties"]}
    base_wheel = parse_qs(ancestor["purl"].partition("?")[2])["file_name"][0]
    dirty = {"true": True, "false": False, "unknown": None}[properties["dirty"]]
    return ProvenanceRecord(
        version=component["version"],
        label=properties["label"],
        base_wheel=base_wheel,
        base_sha256=_get(ancestor, "hashes", 0, "content"),
        overlay_sha256=properties["overlay_sha256"],
        revision=properties["revision"],
        dirty=dirty,
        tool_sha256=_get(document, "metadata", "tools", "components", 0, "hashes", 0, "content"),
    )


# What the record's fields may hold: a revision is a git commit id (SHA-1 or SHA-256) or
# "unknown", every digest a sha256, every other field printable ASCII, the base a wheel's
# name. Checked before any field reaches a message, a terminal or git's command line, where a
# value such as "--output=FILE" would be read as an option.
_REVISION = re.compile(rf"[0-9a-f]{{40}}|[0-9a-f]{{64}}|{UNKNOWN}")


def _field_problem(record: ProvenanceRecord) -> Optional[str]:
    """Which field holds what a record of this tool never does, or ``None``."""
    texts = ("version", "label", "base_wheel", "base_sha256", "overlay_sha256", "revision")
    for name in texts + ("tool_sha256",):
        if not isinstance(getattr(record, name), str):
            return f"its {name} is not text"
    if not _REVISION.fullmatch(record.revision):
        return f"its revision is neither a git commit id nor {UNKNOWN!r}"
    for name in ("base_sha256", "overlay_sha256", "tool_sha256"):
        if not is_sha256_hex(getattr(record, name)):
            return f"its {name} is not a sha256 in hex"
    for name in ("version", "label", "base_wheel"):
        value = getattr(record, name)
        if not (value.isascii() and value.isprintable()):
            return f"its {name} holds characters no build writes"
    if not is_wheel_filename(record.base_wheel):
        return "its base wheel is not a wheel's file name"
    return None


def parse_record(data: bytes, what: str) -> ProvenanceRecord:
    """The record in ``data`` (``what`` names where it came from).

    Raises:
        PatchError: If it is not a record this tool writes; a record that parses but was
            written otherwise is refused too (its bytes must be what :func:`record_bytes` makes
            of it), so that no field can hide beside the ones read.
    """
    try:
        record = _from_document(json.loads(data.decode("utf-8")))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise PatchError(
            f"{what}: not a provenance record this tool writes ({type(error).__name__}: "
            f"{error}); the wheel's record was altered or made by something else"
        ) from None
    problem = _field_problem(record)
    if problem is not None:
        raise PatchError(
            f"{what}: not a provenance record this tool writes ({problem}); the wheel's "
            "record was altered or made by something else"
        )
    if record_bytes(record) != data:
        raise PatchError(
            f"{what}: the provenance record is not as the build writes it (fields added, "
            "changed or reformatted); the wheel's record was altered"
        )
    return record


def format_record(record: ProvenanceRecord) -> str:
    """The record as lines a person reads (the ``provenance`` command prints them)."""
    dirty = {True: "yes", False: "no", None: "unknown"}[record.dirty]
    return "\n".join(
        [
            f"version:         {record.version}",
            f"label:           {record.label}",
            f"base wheel:      {record.base_wheel}",
            f"base sha256:     {record.base_sha256}",
            f"overlay sha256:  {record.overlay_sha256} ({OVERLAY_PATH})",
            f"revision:        {record.revision} (uncommitted changes: {dirty})",
            f"build tool:      {TOOL_NAME}, sources sha256 {record.tool_sha256}",
        ]
    )
