"""Build one patched wheel from an official base wheel and the overlay.

:func:`build_patched_wheel` is a straight sequence of steps, each checking what it relies on.
A refused base or overlay raises :class:`~patched_wheel.PatchError` and leaves no wheel behind.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.base import supported_releases_text
from patched_wheel.callsites import check_call_sites
from patched_wheel.lock import check_against_lock
from patched_wheel.overlay import DEFAULT_OVERLAY
from patched_wheel.splice import (
    check_splice,
    parse_overlay,
    splice_functions,
    top_level_definitions,
)
from patched_wheel.wheelfile import (
    RECORD_SIGNATURES,
    WheelReader,
    WheelWriter,
    remove_quietly,
    zip_date_time,
)

__all__ = [
    "DEFAULT_OVERLAY",
    "FIXES",
    "Fix",
    "LOCAL_LABEL",
    "TARGET",
    "build_patched_wheel",
    "patched_version",
    "rewrite_metadata_version",
]

# The module of the base that the overlay is spliced into.
TARGET = "torch_tensorrt/dynamo/utils.py"

# The PEP 440 local label naming the fork's patch set; bump it when the overlay changes.
LOCAL_LABEL = "memfix1"


@dataclass(frozen=True)
class Fix:
    """One fix of the overlay, and the upstream functions through which it takes effect."""

    title: str
    hooks: Tuple[str, ...]


FIXES = (
    Fix("offload without doubling memory", ("deallocate_module",)),
    Fix("host heap trimmed after each engine build", ("release_host_and_device_memory",)),
)


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def patched_version(base_version: str, label: str = LOCAL_LABEL) -> str:
    """The base's version with ``label`` added to its local part (``2.9.0+cu130.memfix1``).

    Raises:
        PatchError: If the result is not a valid PEP 440 version, or the base already
            carries the label.
    """
    try:
        base = Version(base_version)
    except InvalidVersion:
        raise PatchError(f"{base_version!r} is not a PEP 440 version") from None
    if base.local is not None and label in base.local.split("."):
        raise PatchError(
            f"version {base_version!r} already carries the label {label!r}: this wheel is "
            "already patched; build from the official wheel instead"
        )
    new = f"{base_version}.{label}" if base.local is not None else f"{base_version}+{label}"
    try:
        valid = "-" not in label and str(Version(new)) == new
    except InvalidVersion:
        valid = False
    if not valid:
        raise PatchError(
            f"{new!r} is not a canonical PEP 440 version; the local label {label!r} may "
            "hold only lowercase letters, digits and dots"
        )
    return new


def _metadata_headers(metadata: bytes) -> List[Tuple[str, str]]:
    message = BytesParser(policy=compat32).parsebytes(metadata)
    return [(str(key), str(value)) for key, value in message.items()]


def rewrite_metadata_version(metadata: bytes, new_version: str) -> bytes:
    """METADATA with its ``Version:`` header set to ``new_version`` and nothing else changed.

    METADATA is parsed with ``BytesParser(policy=compat32)`` to find the one ``Version``
    header, but the line is replaced in the bytes: a ``BytesGenerator`` round trip would
    re-fold the multi-line ``License`` header of the official wheels. The result is parsed
    again and must differ from the original in the ``Version`` header alone.

    Raises:
        PatchError: If METADATA has no single ``Version:`` header, or the rewrite would
            change anything else.
    """
    headers = _metadata_headers(metadata)
    versions = [value for key, value in headers if key.lower() == "version"]
    if len(versions) != 1:
        raise PatchError(
            f"METADATA has {len(versions)} Version headers, not one; use an official wheel"
        )
    blank_line = re.search(rb"\r?\n\r?\n", metadata)
    header_block = metadata if blank_line is None else metadata[: blank_line.start() + 1]
    value = re.escape(versions[0].encode())
    old_line = re.compile(rb"^Version:[ \t]*" + value + rb"[ \t]*(?=\r?$)", re.M)
    matches = list(old_line.finditer(header_block))
    if len(matches) != 1:
        raise PatchError(
            "METADATA's Version line is not on a line of its own; use an official wheel"
        )
    found = matches[0]
    rewritten = (
        metadata[: found.start()] + f"Version: {new_version}".encode() + metadata[found.end() :]
    )
    expected = [(k, new_version if k.lower() == "version" else v) for k, v in headers]
    if _metadata_headers(rewritten) != expected:
        raise PatchError("rewriting METADATA's Version changed other headers; report this wheel")
    return rewritten


def _wheel_name_parts(filename: str) -> Tuple[str, str]:
    """(distribution name, tags with any build tag) of a wheel file name, as written."""
    parts = filename[: -len(".whl")].split("-")
    return parts[0], "-".join(parts[2:])


def _check_fixes_apply(
    base_functions: Mapping[str, object],
    overlay_functions: Mapping[str, object],
    fixes: Sequence[Fix],
    wheel: str,
) -> None:
    """Every fix the overlay carries must find each upstream function it hooks into."""
    for fix in fixes:
        for hook in fix.hooks:
            if hook in overlay_functions and hook not in base_functions:
                raise PatchError(
                    f"{wheel}: no top-level {hook!r} in {TARGET}, so the fix '{fix.title}' "
                    f"cannot apply (it takes effect through {hook}()); the build makes no "
                    f"wheel with only some of the fixes. Supported base releases are "
                    f"{supported_releases_text()}: choose one with TORCHTRT_BASE_VERSION"
                )


def _package_sources(reader: WheelReader) -> Dict[str, str]:
    """The base package's Python sources, by path in the wheel."""
    sources = {}
    for info in reader.infos:
        if info.filename.endswith(".py") and not info.filename.startswith(reader.dist_info):
            sources[info.filename] = reader.read(info.filename).decode("utf-8")
    return sources


def _verify_written(path: Path, filename: str, expected: Mapping[str, bytes], version: str) -> None:
    """Re-open the written wheel: RECORD must hold, and the new members must be as built."""
    with WheelReader(path, filename=filename) as written:
        if str(written.version) != version:
            raise PatchError(f"{path.name}: written with version {written.version}, not {version}")
        for name, data in expected.items():
            if written.read(name) != data:
                raise PatchError(f"{path.name}: {name} was not written as built; build again")


def build_patched_wheel(
    base_wheel: Path,
    overlay: Path = DEFAULT_OVERLAY,
    *,
    dest_dir: Path,
    lock: Optional[Mapping[str, str]] = None,
    label: str = LOCAL_LABEL,
    fixes: Sequence[Fix] = FIXES,
    source_date_epoch: Optional[str] = None,
    warn: Callable[[str], None] = _warn,
) -> Path:
    """Write the patched wheel of ``base_wheel`` into ``dest_dir`` and return its path.

    Args:
        base_wheel: An official ``torch_tensorrt`` wheel. It is only read.
        overlay: The overlay module whose functions are spliced into ``TARGET``.
        dest_dir: Folder for the patched wheel (created if missing).
        lock: File name -> sha256 of official wheels; ``None`` skips the check.
        label: The local version label added to the base's version.
        fixes: The fixes whose upstream functions the base must have.
        source_date_epoch: Time for the members written anew; ``None`` reads
            ``SOURCE_DATE_EPOCH``, and without it they keep the replaced member's time.
        warn: Receives warnings (an unlocked base).

    Raises:
        PatchError: For any base, overlay or setting the build refuses; no wheel is written.
    """
    base_wheel = Path(base_wheel)
    if source_date_epoch is None:
        source_date_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    written_time = zip_date_time(source_date_epoch)

    # 1. The base must be the official file where the lock knows it.
    if not base_wheel.is_file():
        raise PatchError(f"{str(base_wheel)!r} is not a file; give the path of a wheel")
    if lock is not None:
        warning = check_against_lock(base_wheel, lock)
        if warning is not None:
            warn(warning)

    with WheelReader(base_wheel) as reader:
        # 2. Names: the patched version, its .dist-info directory and its file name.
        wheel = base_wheel.name
        dist_name, tag_part = _wheel_name_parts(wheel)
        version = patched_version(str(reader.version), label)
        dist_info = f"{dist_name}-{version}.dist-info"
        patched_wheel = Path(dest_dir) / f"{dist_name}-{version}-{tag_part}.whl"
        if reader.dist_info != f"{dist_name}-{reader.version}.dist-info":
            raise PatchError(f"{wheel}: its .dist-info is {reader.dist_info!r}, not named after it")

        # 3. The fixes must find the upstream functions they hook into.
        if TARGET not in {info.filename for info in reader.infos}:
            raise PatchError(
                f"{wheel}: has no {TARGET}; this is not a torch_tensorrt wheel the overlay "
                f"fits. Supported base releases are {supported_releases_text()}"
            )
        base_source = reader.read(TARGET).decode("utf-8")
        overlay_source = Path(overlay).read_text(encoding="utf-8")
        overlay_functions = {f.name: f for f in parse_overlay(overlay_source).functions}
        base_definitions = top_level_definitions(ast.parse(base_source))
        _check_fixes_apply(base_definitions, overlay_functions, fixes, wheel)

        # 4. Every call of a replaced function in the package must fit the overlay.
        replaced = {n: f for n, f in overlay_functions.items() if n in base_definitions}
        check_call_sites(_package_sources(reader), replaced, wheel=wheel)

        # 5. Splice, then check that the result compiles and holds the overlay's functions.
        spliced = splice_functions(base_source, overlay_source)
        check_splice(spliced, overlay_source, filename=f"{wheel}:{TARGET}")

        # 6. METADATA: only the Version header changes.
        old_metadata = f"{reader.dist_info}/METADATA"
        metadata = rewrite_metadata_version(reader.read(old_metadata), version)

        # 7. Write every member under a temporary name: untouched ones as they were.
        new_members = {TARGET: spliced.encode("utf-8"), f"{dist_info}/METADATA": metadata}
        dest_dir = Path(dest_dir)
        dest_dir.mkdir(parents=True, exist_ok=True)
        descriptor, temporary_name = tempfile.mkstemp(
            dir=dest_dir, prefix=f".{patched_wheel.name}.", suffix=".tmp"
        )
        os.close(descriptor)
        temporary = Path(temporary_name)
        try:
            writer = WheelWriter(temporary, dist_info)
            signatures = {f"{reader.dist_info}/{name}" for name in RECORD_SIGNATURES}
            for info, data in reader.files():
                if info.filename in signatures:
                    continue
                name = info.filename
                if name.startswith(reader.dist_info + "/"):
                    name = dist_info + name[len(reader.dist_info) :]
                if name in new_members or name == f"{dist_info}/RECORD":
                    data = new_members.get(name, b"")
                    if written_time is not None:
                        info = _with_time(info, written_time)
                writer.add(info, data, name=name)
            writer.close()

            # 8. Re-open and verify the result, then move it into place.
            _verify_written(temporary, patched_wheel.name, new_members, version)
            os.chmod(temporary, 0o644)
            os.replace(temporary, patched_wheel)
        finally:
            remove_quietly(temporary)
    return patched_wheel


def _with_time(
    info: zipfile.ZipInfo, date_time: Tuple[int, int, int, int, int, int]
) -> zipfile.ZipInfo:
    """A copy of ``info`` with another time (for the members the build writes)."""
    new = copy.copy(info)
    new.date_time = date_time
    return new
