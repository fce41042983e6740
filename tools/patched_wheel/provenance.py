"""Which code made a thing, and its provenance (a CycloneDX SBOM) in every patched wheel.

:func:`source_revision` names the commit a tree came from and whether the overlay and the tool
on disk are that commit's, by bytes (hashed as git hashes a blob), so an edit hidden from ``git
status`` (``--skip-worktree``) or another ``--overlay`` is *dirty* all the same. A tree without
``.git`` (an sdist) carries :data:`REVISION_FILE`: the full commit id and the sha256 of every
file it vouches for, checked again at build time; a short id or a tag is refused.

The provenance, at ``<dist-info>/sboms/patched_wheel.cdx.json`` (PEP 770), holds the official wheel
as the pedigree's ``ancestor``, the revision as a ``commit``, the rest as ``patched_wheel:``
properties; no timestamp, no host. Its bytes are a function of :class:`Provenance`, and
:func:`parse_provenance` accepts only those bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple
from urllib.parse import parse_qs, quote

from . import PatchError, config, files, git, loaded_sources, shadows
from .releases import is_sha256_hex, load_overlay_releases, release_commit, tool_digest
from .wheel import is_wheel_filename, parse_wheel_name

logger = logging.getLogger(__name__)

REVISION_FILE = ".source-revision.json"
UNKNOWN = "unknown"
TOOL_NAME = "patched_wheel"
# The provenance's word for a base made from an installed distribution's files (no official file).
LOCAL_INSTALL = "local-install"
# The cap on an untrusted provenance (a genuine one is 2 KB). Benefit: a crafted one costs at
# most this to refuse; cost: none for any provenance the build writes.
MAX_PROVENANCE_BYTES = 64 << 10
RELEASES_NAME = config.OVERLAY_RELEASES_FILE.name
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_NAMESPACE = "patched_wheel:"
_TOOL_SOURCES = Path(__file__).resolve().parent


class SourceRevision(NamedTuple):
    """A commit, whether the overlay and tool differed from it (``None``: unknown), and for
    a release, the committer time of the commit that released it (see :func:`release_revision`)."""

    revision: str
    dirty: Optional[bool]
    date: Optional[str] = None


def tool_sha256() -> str:
    """The sha256 of the build tool's Python sources (name and bytes, in name order); refused
    unless every module of the tool that ran, ran from those very bytes, and nothing stands in
    for an installed module (see the package's docstring): what runs is what is hashed."""
    sources = {path.name: path.read_bytes() for path in _TOOL_SOURCES.glob("*.py")}
    changed = sorted(name for name, data in loaded_sources().items() if sources.get(name) != data)
    if changed:
        raise PatchError(
            f"{changed[0]} of the build tool ran from other bytes than its file holds now (a "
            ".pyc, or the file changed while the tool ran); run the tool again"
        )
    found = shadows()
    if found:
        raise PatchError(
            f"{found[0]!r} stands in for an installed module, so the build tool is not only "
            "its own files: remove it, or move it out of that folder"
        )
    return tool_digest((name, files.as_committed(data)) for name, data in sources.items())


def _tree_files(repository: Path, overlay: Optional[bytes]) -> Dict[str, bytes]:
    """The files a revision vouches for, as this tree has them: the tool and the overlay, with
    line ends as git stores them (:func:`~.files.as_committed`)."""
    tool = repository / config.TOOL_PATH
    tree = {
        path.relative_to(repository).as_posix(): files.as_committed(path.read_bytes())
        for path in sorted(tool.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }
    overlay_file = repository.joinpath(*config.OVERLAY_PATH.split("/"))
    tree[config.OVERLAY_PATH] = files.as_committed(
        overlay if overlay is not None else overlay_file.read_bytes()
    )
    return tree


def _tree_digests(repository: Path, overlay: Optional[bytes]) -> Dict[str, str]:
    """The sha256 of each of :func:`_tree_files`, as the revision file records them."""
    tree = _tree_files(repository, overlay)
    return {path: hashlib.sha256(data).hexdigest() for path, data in tree.items()}


def source_revision(
    repository: Path = config.REPOSITORY, overlay: Optional[bytes] = None
) -> SourceRevision:
    """The revision of ``repository`` and whether ``overlay`` (default: the tree's) and the
    tool are that revision's: from git, else from the revision file, else unknown."""
    if (repository / ".git").exists():  # a checkout's root (else git answers for an enclosing one)
        try:
            head = (git.git_text(repository, "rev-parse", "--verify", "HEAD") or "").strip()
        except git.GitUnavailable as error:
            logger.warning("no revision is known: %s", error)
            return SourceRevision(UNKNOWN, None)
        paths = (config.TOOL_PATH, config.OVERLAY_PATH)
        listing = git.git_text(repository, "ls-tree", "-r", "--full-tree", "HEAD", "--", *paths)
        if is_commit(head) and listing is not None:
            rows = (line.split("\t", 1) for line in listing.splitlines() if "\t" in line)
            committed = {path: meta.split()[2] for meta, path in rows}  # "<mode> blob <id>\t<path>"
            blob = hashlib.sha1 if len(head) == 40 else hashlib.sha256  # as git names a blob
            tree = _tree_files(repository, overlay).items()
            on_disk = {path: blob(b"blob %d\0" % len(d) + d).hexdigest() for path, d in tree}
            return SourceRevision(head, on_disk != committed)
    path = repository / REVISION_FILE
    if not path.exists():
        return SourceRevision(UNKNOWN, None)
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
        revision, dirty, files = recorded["revision"], recorded["dirty"], recorded.get("files")
        date = recorded.get("date")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        revision, dirty, files, date = None, None, None, None
    if (
        not is_commit(revision)
        or dirty not in (None, True, False)
        or not (date is None or is_epoch(date))
    ):
        raise PatchError(
            f"{path}: not a revision file this tool writes (it takes a full 40-hex commit id "
            "and a dirty flag, not a short id or a tag); write it with "
            "patched_wheel.provenance.write_revision_file, or delete it"
        )
    if not isinstance(files, dict):
        return SourceRevision(revision, True if dirty else None)  # nothing to check it by
    changed = _tree_digests(repository, overlay) != files
    return SourceRevision(revision, bool(dirty) or changed, date)


def is_commit(text: object) -> bool:
    """Whether ``text`` is a full git commit id (SHA-1, or SHA-256 in a SHA-256 repository)."""
    return isinstance(text, str) and _COMMIT.fullmatch(text) is not None


def is_epoch(text: object) -> bool:
    """Whether ``text`` is a ``SOURCE_DATE_EPOCH`` as a provenance holds one: a whole number of
    seconds, non-negative, in decimal digits with no sign, space or leading zero."""
    return isinstance(text, str) and re.fullmatch(r"0|[1-9][0-9]{0,11}", text) is not None


def release_revision(
    repository: Path, revision: SourceRevision, overlay_sha256: str, number: int
) -> SourceRevision:
    """For a clean build of the overlay released as ``number``: the commit that released it
    with this tool, and that commit's time (a tree without ``.git`` says them in its revision
    file); any later commit that leaves the tool and the overlay alone builds the same bytes."""
    if revision.date is not None or not (repository / ".git").exists():
        return revision
    commit, date = release_commit(repository, revision.revision, overlay_sha256, number)
    return SourceRevision(commit, False, date)


def write_revision_file(
    destination: Path,
    repository: Path = config.REPOSITORY,
    revision: Optional[SourceRevision] = None,
) -> SourceRevision:
    """Write ``revision`` (default: ``repository``'s, from git) and the sha256 of the files
    it vouches for into ``destination``'s revision file, for a tree without ``.git``."""
    if revision is None:
        revision = source_revision(repository)
        overlay = repository.joinpath(*config.OVERLAY_PATH.split("/")).read_bytes()
        sha256 = hashlib.sha256(overlay).hexdigest()
        releases = load_overlay_releases(repository / config.TOOL_PATH / RELEASES_NAME)
        number = releases.get(sha256)
        if number is not None and revision.dirty is False:
            revision = release_revision(repository, revision, sha256, number)
    digests = _tree_digests(repository, None)
    document = json.dumps({**revision._asdict(), "files": digests}, indent=1) + "\n"
    files.write_text_atomically(Path(destination) / REVISION_FILE, document)
    return revision


class Provenance(NamedTuple):
    """What a patched wheel says of where it came from (see the module docstring)."""

    version: str
    label: str
    base_wheel: str
    base_sha256: str
    overlay_sha256: str
    revision: str
    dirty: Optional[bool]
    tool_sha256: str
    fixes: Tuple[str, ...] = ()
    source_date_epoch: Optional[str] = None
    local_install: bool = False  # the base was made from an install's files, not official


def provenance_member(dist_info: str) -> str:
    return f"{dist_info}/sboms/patched_wheel.cdx.json"


def provenance_bytes(provenance: Provenance) -> bytes:
    """The provenance as the patched wheel holds it: sorted keys, two-space indent, UTF-8."""
    base = parse_wheel_name(provenance.base_wheel)
    values = {
        "overlay": config.OVERLAY_PATH,
        "overlay_sha256": provenance.overlay_sha256,
        "label": provenance.label,
        "revision": provenance.revision,
        "dirty": UNKNOWN if provenance.dirty is None else str(provenance.dirty).lower(),
        "fixes": ",".join(provenance.fixes) or None,
        "source_date_epoch": provenance.source_date_epoch,
        "base": LOCAL_INSTALL if provenance.local_install else None,
    }
    properties = [{"name": _NAMESPACE + k, "value": v} for k, v in values.items() if v is not None]
    purl = f"pkg:pypi/{base.name}@{quote(provenance.version, safe='')}"
    base_purl = f"pkg:pypi/{base.name}@{quote(base.written_version, safe='')}"
    ancestor = {
        "type": "library",
        "name": base.name,
        "version": base.written_version,
        "purl": f"{base_purl}?file_name={quote(provenance.base_wheel, safe='')}",
        "hashes": [{"alg": "SHA-256", "content": provenance.base_sha256}],
    }
    pedigree: Dict[str, Any] = {"ancestors": [ancestor], "patches": [{"type": "backport"}]}
    if provenance.revision != UNKNOWN:
        pedigree["commits"] = [{"uid": provenance.revision}]
    component = {
        "type": "library",
        "bom-ref": purl,
        "name": base.name,
        "version": provenance.version,
        "purl": purl,
        "pedigree": pedigree,
        "properties": properties,
    }
    tool = {
        "type": "application",
        "name": TOOL_NAME,
        "version": provenance.tool_sha256[:12],
        "hashes": [{"alg": "SHA-256", "content": provenance.tool_sha256}],
    }
    metadata = {"component": component, "tools": {"components": [tool]}}
    document = {"bomFormat": "CycloneDX", "specVersion": "1.6", "version": 1, "metadata": metadata}
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8")


def parse_provenance(data: bytes, what: str) -> Provenance:
    """The provenance in ``data`` (``what`` names where it came from); a PatchError of one line for
    anything :func:`provenance_bytes` would not write, the fields checked before any reaches a
    message, a terminal or git's command line, and the bytes last."""
    try:  # within the cap, json's own depth limit ends a deep nesting in RecursionError
        if len(data) > MAX_PROVENANCE_BYTES:
            raise PatchError(f"larger than {MAX_PROVENANCE_BYTES >> 10} KiB")
        document = json.loads(data.decode("utf-8"))
        component = document["metadata"]["component"]
        ancestor = component["pedigree"]["ancestors"][0]
        properties = {p["name"][len(_NAMESPACE) :]: p["value"] for p in component["properties"]}
        fixes = properties.get("fixes")
        provenance = Provenance(
            version=component["version"],
            label=properties["label"],
            base_wheel=parse_qs(ancestor["purl"].partition("?")[2])["file_name"][0],
            base_sha256=ancestor["hashes"][0]["content"],
            overlay_sha256=properties["overlay_sha256"],
            revision=properties["revision"],
            dirty={"true": True, "false": False, UNKNOWN: None}[properties["dirty"]],
            tool_sha256=document["metadata"]["tools"]["components"][0]["hashes"][0]["content"],
            fixes=tuple(fixes.split(",")) if isinstance(fixes, str) else (),
            source_date_epoch=properties.get("source_date_epoch"),
            local_install=properties.get("base") == LOCAL_INSTALL,
        )
        texts: List[Any] = [
            provenance.version,
            provenance.label,
            provenance.base_wheel,
            *provenance.fixes,
        ]
        digests = (provenance.base_sha256, provenance.overlay_sha256, provenance.tool_sha256)
        revision = provenance.revision
        if not all(isinstance(t, str) and t.isascii() and t.isprintable() for t in texts):
            raise PatchError("a text field holds what no build writes")
        if not (is_commit(revision) or revision == UNKNOWN):
            raise PatchError(f"its revision is neither a full git commit id nor {UNKNOWN!r}")
        epoch = provenance.source_date_epoch
        if not (epoch is None or is_epoch(epoch)):
            raise PatchError("its SOURCE_DATE_EPOCH is not a whole number of seconds in digits")
        if not all(map(is_sha256_hex, digests)):
            raise PatchError("a digest is not a sha256 in hex")
        if not is_wheel_filename(provenance.base_wheel):
            raise PatchError("its base wheel is not a wheel's file name")
        if provenance_bytes(provenance) != data:
            raise PatchError("fields added, changed or reformatted")
        return provenance
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, RecursionError) as error:
        problem = f"{type(error).__name__}: {str(error)[:200]}"
    except PatchError as error:
        problem = str(error)
    raise PatchError(
        f"{what}: not a provenance record this tool writes ({problem}); the wheel's record "
        "was altered or made by something else"
    )


def format_provenance(provenance: Provenance, *, locked: Optional[bool] = None) -> str:
    """The provenance as lines a person reads (``provenance`` and ``verify`` print them);
    ``locked`` says whether the lock of official wheels holds the base (``None``: not asked)."""
    committed = {
        False: "the overlay and the tool as committed there",
        True: "the overlay or the tool changed from it: a dirty build",
        None: "not known whether the overlay and the tool were as committed there",
    }[provenance.dirty]
    base = parse_wheel_name(provenance.base_wheel)
    sources = {True: "official: in the lock", False: "not in the lock of official wheels"}
    source = "official, as the record says" if locked is None else sources[locked]
    if provenance.local_install:
        source = "a local install's files, not an official file"
    left_out = [fix for fix in config.FIX_NAMES if fix not in provenance.fixes]
    fixes = ", ".join(provenance.fixes) or "not recorded"
    if provenance.fixes and left_out:
        fixes += f" (not {', '.join(left_out)})"
    lines = [
        f"version:         {provenance.version}",
        f"distribution:    {base.name}",
        f"label:           {provenance.label}",
        f"base wheel:      {provenance.base_wheel} ({source})",
        f"base sha256:     {provenance.base_sha256}",
        f"overlay sha256:  {provenance.overlay_sha256} ({config.OVERLAY_PATH})",
        f"fixes:           {fixes}",
        f"revision:        {provenance.revision} ({committed})",
        f"build tool:      {TOOL_NAME}, sources sha256 {provenance.tool_sha256}",
    ]
    if provenance.source_date_epoch is not None:
        lines.append(f"SOURCE_DATE_EPOCH: {provenance.source_date_epoch}")
    return "\n".join(lines)
