"""``verify``: a patched wheel is this repository's when it rebuilds it, byte for byte.

Of the wheel's bytes (read once, within a cap) only the provenance is parsed: capped,
depth-bounded, accepted only as :func:`~.provenance.provenance_bytes` writes it. It must agree with
the wheel's name and the lock and name a release (see :mod:`.releases`); the wheel is then
rebuilt from the official base and that revision's overlay, by this tool where the provenance names
it, else by the revision's own tool from ``git archive`` (only main's first-parent commits run),
and the sha256 of the whole file compared. The report of what differs is one bounded, linear
pass: names escaped and cut, members compared by CRC, size and mode, small texts diffed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from packaging.utils import parse_wheel_filename

from . import PatchError, config, console, files, git, settings
from .fetch import cached_base
from .lock import Lock
from .patch import Origin, patch_wheel
from .provenance import (
    MAX_PROVENANCE_BYTES,
    UNKNOWN,
    Provenance,
    SourceRevision,
    format_provenance,
    parse_provenance,
    provenance_member,
    tool_sha256,
    write_revision_file,
)
from .releases import (
    FETCH_HISTORY,
    label_parts,
    main_history,
    release_commit,
    released_at,
    split_label,
    tool_sha256_at,
)
from .splice import overlay_from_bytes
from .wheel import (
    ZIP_ERRORS,
    BaseWheel,
    directory_problem,
    parse_wheel_name,
    read_member,
)

SHOWN_DIFFERENCES = 20  # lines of differences shown without --full-diff
MAX_DIFFERENCES = 2000  # and with it: a report is bounded whatever the input
MAX_DIFFED_BYTES = 1 << 20  # a text member larger than this is not diffed
_SHOWN_NAME = 200  # characters of a member's name shown


@dataclass
class Verification:
    """What ``verify`` found: the provenance (where one was read), the lines of the report, and
    the verdict, its last line; ``verified`` only for the rebuild's very bytes."""

    filename: str
    sha256: str
    verified: bool = False
    verdict: str = ""
    provenance: Optional[Provenance] = None
    lines: List[str] = field(default_factory=list)
    locked: Optional[bool] = None  # whether the lock of official wheels holds the base

    def report(self, *, full_diff: bool = False) -> str:
        lines = self.lines if full_diff else self.lines[:SHOWN_DIFFERENCES]
        hidden = len(self.lines) - len(lines)
        more = [f"... {hidden} more lines (--full-diff shows them)"] if hidden else []
        head = [
            f"patched wheel:  {console.escaped(self.filename)}",
            f"sha256:         {self.sha256}",
        ]
        if self.provenance:
            head.append(format_provenance(self.provenance, locked=self.locked))
        return "\n".join([*head, *lines, *more, self.verdict])

    def refused(self, why: str) -> Verification:
        self.verdict = f"NOT verified: {console.escaped(why)}; do not install it"
        return self


def _changed_middle(old: bytes, new: bytes) -> List[str]:
    """The lines between the common first and last lines of two texts: a linear diff."""
    a, b = (text.decode("utf-8", "replace").splitlines() for text in (old, new))
    start = len(os.path.commonprefix([a, b]))  # of lists, item by item
    end = len(os.path.commonprefix([a[start:][::-1], b[start:][::-1]]))
    lines = [f"  @@ line {start + 1} @@"]
    for sign, text in (("-", a), ("+", b)):
        changed = text[start : len(text) - end][:50]
        lines += [f"  {sign} {console.escaped(line)[:_SHOWN_NAME]}" for line in changed]
    return lines


def differences(candidate: bytes, rebuilt: bytes) -> List[str]:
    """What differs between a wheel and its rebuild, at most :data:`MAX_DIFFERENCES` lines:
    members missing or added, contents (CRC and size), modes, or else the zip around them."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(candidate))
        theirs = {i.filename: i for i in archive.infolist()}
    except ZIP_ERRORS:
        return ["  it is not a zip file that zipfile reads"]
    rebuilt_zip = zipfile.ZipFile(io.BytesIO(rebuilt))
    ours = {i.filename: i for i in rebuilt_zip.infolist()}
    lines: List[str] = []
    for name in sorted(set(theirs) | set(ours)):
        if len(lines) >= MAX_DIFFERENCES:
            break
        mine, other, escaped = ours.get(name), theirs.get(name), ascii(name)[1:-1]
        shown = escaped if len(escaped) <= _SHOWN_NAME else escaped[:_SHOWN_NAME] + "..."
        if mine is None or other is None:
            lines.append(f"  {shown}: {'not in the rebuild' if mine is None else 'missing'}")
        elif (mine.CRC, mine.file_size) != (other.CRC, other.file_size):
            sizes = f"{other.file_size} bytes, the rebuild's {mine.file_size}"
            lines.append(f"  {shown}: contents differ ({sizes})")
            if name.endswith(("METADATA", ".py", "RECORD")) and other.file_size <= MAX_DIFFED_BYTES:
                try:
                    theirs_data = read_member(archive, other, MAX_DIFFED_BYTES)
                    lines += _changed_middle(theirs_data, rebuilt_zip.read(name))
                except PatchError as error:
                    lines.append(f"  ({error})")
        elif mine.external_attr != other.external_attr:
            modes = f"{other.external_attr >> 16:o}, the rebuild's {mine.external_attr >> 16:o}"
            lines.append(f"  {shown}: mode {modes}")
    return lines or [
        "  same files, different bytes: every member's contents and mode are the rebuild's,"
        " the zip around them is not (re-zipped, or its headers, times or order changed)"
    ]


def _rebuild_from_history(repository: Path, provenance: Provenance, base: Path) -> bytes:
    """The wheel as the own tool of ``provenance.revision`` (a main branch commit) builds it from
    ``git archive``, with a lock of the one base and the recorded settings."""
    revision = provenance.revision
    with tempfile.TemporaryDirectory(prefix="patched-wheel-verify-") as folder:
        tree, out, lock = Path(folder) / "tree", Path(folder) / "out", Path(folder) / "lock.json"
        # The revision's tool and overlay as git stores them: no filter, no line-end conversion
        committed = git.blobs(repository, revision, f"{config.TOOL_PATH}/", config.OVERLAY_PATH)
        if not committed:
            raise PatchError(f"git cannot list revision {revision}'s files; check the clone")
        for path, body in committed.items():
            files.write_atomically(tree.joinpath(*path.split("/")), body)
        source = SourceRevision(revision, False, provenance.source_date_epoch)
        write_revision_file(tree, tree, source)
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TORCHTRT_BASE_")}
        environ.pop("SOURCE_DATE_EPOCH", None)
        if provenance.source_date_epoch is not None:
            environ["SOURCE_DATE_EPOCH"] = provenance.source_date_epoch
        lock.write_text(json.dumps({"wheels": {provenance.base_wheel: provenance.base_sha256}}))
        # Isolated (-I): the revision's own files and the installed libraries, nothing else
        command = [sys.executable, "-I", "-B", str(tree / config.TOOL_PATH), "build"]
        command += ["--base-wheel", str(base)]
        command += ["--out", str(out), "--lock", str(lock)]
        completed = subprocess.run(command, env=environ, capture_output=True, text=True)
        wheels = sorted(out.glob("*.whl")) if completed.returncode == 0 else []
        if len(wheels) != 1:
            last = (completed.stderr.strip().splitlines() or ["no output"])[-1]
            raise PatchError(f"revision {revision}'s own build failed ({console.escaped(last)})")
        return wheels[0].read_bytes()


def base_request(official: str) -> settings.BaseRequest:
    """The request pip fetches the official wheel ``official`` by: its release, distribution,
    and its own Python and platform (not this interpreter's, which would get another file)."""
    name, version, _, tags = parse_wheel_filename(official)
    tag = min(tags, key=str)
    python = f"3.{tag.interpreter[3:]}" if re.fullmatch(r"cp3[0-9]+", tag.interpreter) else None
    return settings.BaseRequest(str(version), tag.platform, python, str(name))


def read_provenance(data: bytes, filename: str) -> Provenance:
    """The provenance of the wheel whose bytes are ``data``, and nothing else of it; a
    PatchError of one line for a wheel without a provenance or with one this tool never writes."""
    member = provenance_member(parse_wheel_name(filename).dist_info)
    problem = directory_problem(data)  # before zipfile reads the central directory
    if problem is not None:
        raise PatchError(f"{filename}: {problem}, so this is not a wheel this tool writes")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            recorded = read_member(archive, archive.getinfo(member), MAX_PROVENANCE_BYTES)
    except KeyError:
        raise PatchError(
            f"{filename}: has no provenance record ({member}), so nothing says which base and "
            "overlay made it; a wheel built before records (label +memfix1) or whose record "
            "was removed cannot be verified: build it again from the official wheel"
        ) from None
    except ZIP_ERRORS as error:
        raise PatchError(
            f"{filename}: it is not a zip file that zipfile reads "
            f"({console.escaped(str(error))[:200]})"
        ) from None
    except PatchError as error:
        raise PatchError(f"{filename}: its provenance record cannot be read: {error}") from None
    return parse_provenance(recorded, f"{filename}:{member}")


def verify_bytes(
    data: bytes,
    filename: str,
    *,
    lock: Lock,
    cache_dir: Path = config.DEFAULT_CACHE_DIR,
    base_wheel: Optional[Path] = None,
    base_wheel_source: str = "--base-wheel",
    unlocked: bool = False,
    overlay: Optional[Path] = None,
    repository: Path = config.REPOSITORY,
) -> Verification:
    """Judge the wheel whose bytes are ``data`` (see the module docstring); a PatchError only
    for what stops the judgement itself (no base to be had, git failing). ``base_wheel``, the
    official file if given, came from ``base_wheel_source`` (an option or a variable), which
    the report and every refusal name."""
    verification = Verification(filename, hashlib.sha256(data).hexdigest())
    refuse = verification.refused  # every NOT verified verdict
    # 1. The provenance, the only thing read from the wheel: capped, bounded, checked.
    name = parse_wheel_name(filename)
    if name.build_tag:
        return refuse(
            f"its file name carries the build tag {name.build_tag!r}, which no build "
            "of this fork writes (a renamed copy, which pip would prefer)"
        )
    base_version, label = split_label(name.written_version)
    if label is None:
        return refuse(f"its version {name.written_version!r} carries no label of this fork")
    try:
        provenance = verification.provenance = read_provenance(data, filename)
    except PatchError as error:
        return refuse(str(error))
    if provenance.local_install:
        return refuse(
            f"made from a local install of {name.name} {base_version}, not from an official "
            "file, so no official file can rebuild it; its record says what it carries"
        )
    official = f"{name.written_name}-{base_version}-{name.written_tags}.whl"
    pairs = [
        ("version", provenance.version, name.written_version),
        ("label", provenance.label, label),
        ("base wheel", provenance.base_wheel, official),
    ]
    for what, recorded, actual in pairs:
        if recorded != actual:
            return refuse(f"its record names the {what} {recorded!r}, its name {actual!r}: altered")
    if lock.wheels.get(official, provenance.base_sha256) != provenance.base_sha256:
        return refuse(f"its record names a base {official} that is not the lock's official file")
    verification.locked = official in lock.wheels
    if official not in lock.wheels and not unlocked:
        why = f"its base {official} is not in the lock; --unlocked compares against it anyway"
        return refuse(why)

    # 2. A release: a clean build of a main branch revision, under that revision's number.
    number, development = label_parts(provenance.label)
    revision, overlay_id = provenance.revision, provenance.overlay_sha256[:12]
    if development is not None:
        return refuse(f"a development build of overlay {overlay_id}, not a release of this fork")
    if number is None or revision == UNKNOWN or provenance.dirty is not False:
        why = "a build that names no clean revision (its record), not a release of this fork"
        return refuse(why)
    history = main_history(repository)
    consulted = ", ".join(history) or "neither main nor origin/main (the clone has no such ref)"
    if not history:
        return refuse(f"{repository} has no main branch to tell releases by: {consulted}")
    on = [ref for ref, commits in history.items() if revision in commits]
    if not on:
        commit = f"{revision}^{{commit}}"
        known = git.git_text(repository, "cat-file", "-e", "--end-of-options", commit)
        if known is None:
            raise PatchError(
                f"revision {revision} is not in this clone (consulted: {consulted}); "
                f"{FETCH_HISTORY}"
            )
        return refuse(
            f"revision {revision} is not on the main branch (consulted: {consulted}): an "
            "overlay this repository never released"
        )
    verification.lines.append(f"released on:    {' and '.join(on)} (the history consulted)")
    overlay_data, releases = released_at(repository, revision)
    if hashlib.sha256(overlay_data).hexdigest() != provenance.overlay_sha256:
        why = f"its overlay is not revision {revision}'s, though its record says so: altered"
        return refuse(why)
    if releases.get(provenance.overlay_sha256) != number:
        return refuse(f"an overlay this repository never released as +{provenance.label}")
    if tool_sha256_at(repository, revision) != provenance.tool_sha256:
        return refuse(f"its record names a build tool that is not revision {revision}'s own")
    released, date = release_commit(repository, revision, provenance.overlay_sha256, number)
    if released != revision:
        return refuse(
            f"built at revision {revision}, not at {released}, the commit that released "
            f"+{provenance.label} with this tool: not the release's one file; build it again"
        )
    if provenance.source_date_epoch not in (None, date):  # None: a tool that records no time
        return refuse(f"its SOURCE_DATE_EPOCH is not {date}, the time of the release's commit")
    given = None
    if overlay is not None:
        given = files.read_file(overlay, what="--overlay", kind=config.OVERLAY_KIND)
        given = files.as_committed(given)
    if given is not None and hashlib.sha256(given).hexdigest() != provenance.overlay_sha256:
        raise PatchError(
            f"--overlay is not the overlay the wheel's record names ({provenance.overlay_sha256}); "
            "leave it out"
        )

    # 3. The base, by the recorded name and sha256: the wheel's own Python and platform.
    lines, short = verification.lines, revision[:12]
    if base_wheel is None:
        base_wheel = cached_base(
            base_request(official), official, provenance.base_sha256, cache_dir
        )
        what = "the cached base wheel"
        fix = "it is damaged or was replaced: delete it, and verify again to fetch it"
    else:
        what = f"the base wheel given by {base_wheel_source}"
        option = base_wheel_source.startswith("-")
        fix = (
            f"give that one with {base_wheel_source}, or leave it out to fetch it"
            if option
            else f"set {base_wheel_source} to that one, or unset it to fetch it"
        )
        lines.append(
            f"base wheel read from {base_wheel_source}: {console.escaped(str(base_wheel))}"
        )
    base_data = files.read_file(base_wheel, what=what)
    if hashlib.sha256(base_data).hexdigest() != provenance.base_sha256:
        raise PatchError(
            f"{what} {str(base_wheel)!r} is not the one the record names (sha256 "
            f"{provenance.base_sha256}); {fix}"
        )

    # 4. The rebuild, and the bytes compared.
    if provenance.tool_sha256 == tool_sha256():
        lines.append(f"rebuilt here, by this tool (the one revision {short} built with)")
        source = SourceRevision(revision, False, date)
        origin = Origin(provenance.label, source, provenance.tool_sha256, date)
        overlay_parts = overlay_from_bytes(overlay_data, config.OVERLAY_PATH)
        base = BaseWheel(base_data, official, sha256=provenance.base_sha256)  # checked above
        rebuilt = patch_wheel(base, overlay_parts, origin=origin).data
    else:
        lines.append(f"rebuilt by revision {short}'s own tool, from git history")
        rebuilt = _rebuild_from_history(
            repository, provenance._replace(source_date_epoch=date), base_wheel
        )
    if hashlib.sha256(rebuilt).hexdigest() == verification.sha256:
        verification.verified = True
        base_text = (
            f"the official {name.name} wheel"
            if verification.locked
            else f"{official} (a base the lock of official wheels does not know, as --unlocked "
            "allowed)"
        )
        verification.verdict = (
            f"verified: {base_text} plus this repository's released overlay "
            f"+{provenance.label} (fixes: {', '.join(provenance.fixes)}), nothing else "
            "(rebuilt byte for byte)"
        )
        return verification
    lines += differences(data, rebuilt)
    return refuse("it is not the rebuild's bytes (above)")


def verify_file(path: Path, **options: object) -> Verification:
    """:func:`verify_bytes` of the file at ``path``, read once within the cap."""
    data = files.read_file(path, what="the patched wheel", cap=config.MAX_WHEEL_BYTES)
    return verify_bytes(data, path.name, **options)  # type: ignore[arg-type]
