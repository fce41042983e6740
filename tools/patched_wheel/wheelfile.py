"""The one owner of the wheel format: a wheel read and verified from its bytes, and the writer.

:func:`read_wheel` takes the bytes of a wheel (read once, by the caller, with a size cap) and
checks, in this order and before decompressing anything but RECORD: the file name, the zip's
central directory (member names, file types, compression, encryption, duplicates), the one
``.dist-info`` folder, the sizes in the zip headers against RECORD and against a cap on the
total; then it decompresses each member once, bounded by its header's size, and checks it
against RECORD's sha256. WHEEL and METADATA must agree with the file name. The result,
:class:`Wheel`, holds the verified bytes: the bytes hashed are the bytes copied.

:func:`write_wheel` writes members under a temporary name in the output folder, computes
RECORD, reads the written file back through :func:`read_wheel` and compares every member with
what was meant to be written, and only then renames it into place. SIGINT and SIGTERM during
the write remove the temporary file. Untouched members keep their ``ZipInfo`` (time, mode,
compression) with the ZIP64 extra field dropped, so that ``zipfile`` adds one only where the
new archive needs it. RECORD is never edited as text.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import csv
import hashlib
import io
import logging
import os
import signal
import stat
import struct
import tempfile
import threading
import time
import zipfile
import zlib
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path
from types import FrameType
from typing import Any, Dict, FrozenSet, Iterator, List, Mapping, Optional, Sequence, Tuple

from packaging.tags import Tag, parse_tag
from packaging.utils import (
    BuildTag,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError

__all__ = [
    "MAX_RECORD_BYTES",
    "MAX_UNPACKED_BYTES",
    "MAX_UNPACKED_RATIO",
    "MAX_WHEEL_BYTES",
    "RECORD_SIGNATURES",
    "Wheel",
    "check_sizes",
    "parse_headers",
    "read_wheel",
    "read_wheel_file",
    "record_hash",
    "unpack_member",
    "write_wheel",
    "zip_date_time",
]

logger = logging.getLogger(__name__)

# Limits on what a base may be. The official wheels are 4-5 MB, 14 MB unpacked (ratio 3.4),
# with a RECORD of 40 KB. Benefit: a hostile wheel is refused from its headers, before any
# decompression. Cost: a wheel beyond them cannot be patched (raise them here for one).
MAX_WHEEL_BYTES = 1 << 30
MAX_UNPACKED_BYTES = 2 << 30
MAX_UNPACKED_RATIO = 16
MAX_RECORD_BYTES = 16 << 20

# Signatures of RECORD; they cannot stay valid once RECORD changes, so they are dropped.
RECORD_SIGNATURES = ("RECORD.jws", "RECORD.p7s")

# The earliest time a zip entry can carry: 1980-01-01 00:00:00 UTC.
ZIP_EPOCH_FLOOR = 315532800

# Header id of the ZIP64 extended-information extra field.
ZIP64_EXTRA_ID = 0x0001

# Zip flag bits: bit 0, the member is encrypted; bit 3, its sizes follow its data (a data
# descriptor); bit 11, its name is UTF-8.
_ENCRYPTED = 0x1
_DATA_DESCRIPTOR = 0x8
_UTF8_NAME = 0x800

DateTime = Tuple[int, int, int, int, int, int]


def record_hash(data: bytes) -> str:
    """The hash of ``data`` as RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def zip_date_time(epoch: Optional[str]) -> Optional[DateTime]:
    """The zip time of ``SOURCE_DATE_EPOCH`` (UTC, floored at 1980), or ``None`` if unset."""
    if epoch is None or epoch == "":
        return None
    try:
        seconds = max(int(epoch), ZIP_EPOCH_FLOOR)
        date_time = time.gmtime(seconds)[0:6]
    except (ValueError, OverflowError, OSError):
        raise PatchError(
            f"SOURCE_DATE_EPOCH={epoch!r} is not a time a zip file can hold; set it to a "
            "whole number of seconds between 315532800 (1980) and 4354819199 (2107), or unset it"
        ) from None
    if date_time[0] > 2107:
        raise PatchError(
            f"SOURCE_DATE_EPOCH={epoch!r} is after 2107, the last year a zip file can hold; "
            "set it to an earlier time, or unset it"
        )
    return date_time


def read_wheel_file(path: Path, *, what: str) -> bytes:
    """The bytes of the wheel file at ``path``, read once, refused beyond the size cap.

    ``what`` names where the path came from (``--base-wheel``, ``TORCHTRT_BASE_WHEEL``).
    """
    try:
        with open(path, "rb") as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise IsADirectoryError(21, "not a regular file")
            # Never more than the file's size plus one byte (a file growing meanwhile shows).
            size = status.st_size
            data = b"" if size > MAX_WHEEL_BYTES else stream.read(min(size, MAX_WHEEL_BYTES) + 1)
    except OSError as error:
        raise PatchError(
            f"{what} {str(path)!r} cannot be read ({error.strerror or error}); give the path "
            "of an official torch-tensorrt wheel file"
        ) from None
    if len(data) > MAX_WHEEL_BYTES or status.st_size > MAX_WHEEL_BYTES:
        raise PatchError(
            f"{what} {str(path)!r} is larger than {MAX_WHEEL_BYTES >> 20} MiB, which no "
            "official wheel is; use the official wheel"
        )
    return data


@dataclass(frozen=True)
class WheelName:
    """A wheel file name, parsed, with its parts as written (for the new name)."""

    filename: str
    name: NormalizedName
    version: Version
    build: BuildTag
    tags: FrozenSet[Tag]
    written_name: str
    written_version: str
    written_tags: str


def parse_wheel_name(filename: str) -> WheelName:
    """Parse a wheel file name; refuse one that is not a valid wheel name."""
    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion) as error:
        raise PatchError(
            f"{filename!r} is not a wheel file name ({error}); pass the wheel as pip "
            "downloaded it, without renaming it"
        ) from None
    parts = filename[: -len(".whl")].split("-")
    return WheelName(filename, name, version, build, tags, parts[0], parts[1], "-".join(parts[2:]))


@dataclass(frozen=True)
class Wheel:
    """A wheel whose every member matched its RECORD, with the verified bytes of each.

    ``infos`` are the zip's entries in the zip's order (directories included); ``members``
    maps each file's name to its bytes.
    """

    name: WheelName
    sha256: str
    data: bytes
    dist_info: str
    infos: Tuple[zipfile.ZipInfo, ...]
    members: Mapping[str, bytes]

    @property
    def filename(self) -> str:
        return self.name.filename

    @property
    def version(self) -> Version:
        return self.name.version

    def read(self, member: str) -> bytes:
        """The verified bytes of ``member``."""
        return self.members[member]

    def raw(self, info: zipfile.ZipInfo) -> bytes:
        """The member's compressed bytes in the wheel: the very bytes that were unpacked and
        verified, so that an untouched member is copied without compressing it again."""
        name_length, extra_length = struct.unpack_from("<HH", self.data, info.header_offset + 26)
        start = info.header_offset + 30 + name_length + extra_length
        return self.data[start : start + info.compress_size]


def _refuse(filename: str, problem: str) -> PatchError:
    return PatchError(
        f"{filename}: {problem}; this is not a wheel the build can patch, use " "the official wheel"
    )


def _open_zip(data: bytes, filename: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except UnicodeDecodeError:
        raise _refuse(filename, "a member's name is marked UTF-8 but is not") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, struct.error) as error:
        raise PatchError(
            f"{filename}: not a valid zip file ({error}); the download may be truncated, "
            "delete it and download it again"
        ) from None


def _name_problem(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a member's name is refused, or ``None``."""
    name = info.filename
    path = name[:-1] if name.endswith("/") else name
    if "\\" in name or "\x00" in name:
        return "holds a backslash or a NUL"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "is an absolute path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "has an empty, '.' or '..' part"
    if not info.flag_bits & _UTF8_NAME and not name.isascii():
        return "is not ASCII and not marked UTF-8"
    return None


def _entry_problem(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a member is refused (its name, type, mode, compression), or ``None``."""
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    name_problem = _name_problem(info)
    if name_problem is not None:
        return name_problem
    if info.is_dir():
        if kind not in (0, stat.S_IFDIR) or info.file_size != 0:
            return "is a folder entry with contents or another file type"
    elif kind not in (0, stat.S_IFREG):
        return f"is not a regular file (mode {mode:o}: a symlink, folder or device)"
    if mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        return f"has the setuid, setgid or sticky bit (mode {mode:o})"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return f"uses compression method {info.compress_type}, not stored or deflated"
    if info.flag_bits & _ENCRYPTED:
        return "is encrypted"
    return None


def _check_entries(infos: Sequence[zipfile.ZipInfo], filename: str) -> None:
    """Every entry's name and type, and no two names alike (also by case)."""
    seen: Dict[str, str] = {}
    for info in infos:
        problem = _entry_problem(info)
        if problem is not None:
            raise _refuse(filename, f"the member {info.filename!r} {problem}")
        key = info.filename.rstrip("/").casefold()
        if key in seen:
            raise _refuse(
                filename, f"the members {seen[key]!r} and {info.filename!r} have the same name"
            )
        seen[key] = info.filename


def _dist_info(infos: Sequence[zipfile.ZipInfo], name: WheelName) -> str:
    """The one ``.dist-info`` folder, named after the file, holding METADATA, WHEEL, RECORD."""
    tops = {i.filename.split("/")[0] for i in infos if "/" in i.filename}
    found = sorted(top for top in tops if top.endswith(".dist-info"))
    expected = f"{name.written_name}-{name.written_version}.dist-info"
    if found != [expected]:
        raise _refuse(
            name.filename, f"its .dist-info folders are {found}, not the one {expected!r}"
        )
    present = {i.filename for i in infos}
    missing = [f for f in ("METADATA", "WHEEL", "RECORD") if f"{expected}/{f}" not in present]
    if missing:
        raise _refuse(name.filename, f"{expected} lacks {', '.join(missing)}")
    return expected


def check_sizes(infos: Sequence[zipfile.ZipInfo], wheel_size: int, filename: str) -> None:
    """The zip headers' total unpacked size against the caps, before decompressing."""
    total = sum(info.file_size for info in infos)
    cap = min(MAX_UNPACKED_BYTES, MAX_UNPACKED_RATIO * wheel_size)
    if total > cap:
        raise _refuse(
            filename,
            f"its members unpack to {total} bytes, more than {cap} ({MAX_UNPACKED_RATIO} "
            f"times the wheel, at most {MAX_UNPACKED_BYTES >> 20} MiB): a zip bomb or not an "
            "official wheel",
        )


def unpack_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, filename: str) -> bytes:
    """A member's bytes, never more than its header's size."""
    try:
        with archive.open(info) as stream:
            data = stream.read(info.file_size + 1)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError) as error:
        raise PatchError(
            f"{filename}: cannot unpack {info.filename} ({error}); the file is damaged, "
            "delete it and download it again"
        ) from None
    if len(data) != info.file_size:
        raise _refuse(filename, f"{info.filename} does not unpack to its header's size")
    return data


def _parse_record(data: bytes, filename: str) -> Dict[str, Tuple[str, str]]:
    """RECORD's rows: path -> (hash, size)."""
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as error:
        raise _refuse(filename, f"its RECORD cannot be read ({error})") from None
    entries: Dict[str, Tuple[str, str]] = {}
    for row in rows:
        if not row:
            continue
        if len(row) != 3 or row[0] in entries:
            raise _refuse(filename, f"its RECORD row {row[:3]!r} is malformed or repeated")
        entries[row[0]] = (row[1], row[2])
    return entries


def _record_problems(
    files: Sequence[zipfile.ZipInfo], record: Mapping[str, Tuple[str, str]], skipped: FrozenSet[str]
) -> List[str]:
    """Every disagreement between the zip headers and RECORD, found before decompressing."""
    problems = []
    for info in files:
        if info.filename in skipped:
            continue
        if info.filename not in record:
            problems.append(f"{info.filename} is not listed in RECORD")
            continue
        hash_field, size_field = record[info.filename]
        if not hash_field.startswith("sha256="):
            problems.append(f"RECORD gives {info.filename} no sha256 hash")
        elif size_field != str(info.file_size):
            problems.append(f"{info.filename}'s size differs from RECORD's")
    present = {info.filename for info in files}
    problems += [f"RECORD lists {n}, which the wheel lacks" for n in sorted(set(record) - present)]
    return problems


def _raise_problems(filename: str, problems: Sequence[str]) -> None:
    if problems:
        listed = "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else "")
        raise PatchError(
            f"{filename}: {listed}; the wheel was changed or damaged after it was built, "
            "use the official wheel"
        )


def _read_members(
    archive: zipfile.ZipFile, infos: Sequence[zipfile.ZipInfo], dist_info: str, filename: str
) -> Dict[str, bytes]:
    """Every file's bytes, checked against RECORD: sizes from headers first, then hashes."""
    record_name = f"{dist_info}/RECORD"
    files = [info for info in infos if not info.is_dir()]
    record_info = next(info for info in files if info.filename == record_name)
    if record_info.file_size > MAX_RECORD_BYTES:
        raise _refuse(filename, f"its RECORD is larger than {MAX_RECORD_BYTES >> 20} MiB")
    record = _parse_record(unpack_member(archive, record_info, filename), filename)
    skipped = frozenset({record_name} | {f"{dist_info}/{s}" for s in RECORD_SIGNATURES})
    _raise_problems(filename, _record_problems(files, record, skipped))
    members: Dict[str, bytes] = {}
    problems = []
    for info in files:
        data = unpack_member(archive, info, filename)
        if info.filename not in skipped and record_hash(data) != record[info.filename][0]:
            problems.append(f"{info.filename} does not match its RECORD hash")
        members[info.filename] = data
    _raise_problems(filename, problems)
    return members


def parse_headers(data: bytes) -> List[Tuple[str, str]]:
    """The headers of an RFC 822 file (METADATA, WHEEL) as (key, value) pairs."""
    message = BytesParser(policy=compat32).parsebytes(data)
    return [(str(key), str(value)) for key, value in message.items()]


def _values(headers: Sequence[Tuple[str, str]], key: str) -> List[str]:
    return [value.strip() for name, value in headers if name.lower() == key.lower()]


def _check_wheel_file(data: bytes, name: WheelName) -> None:
    """WHEEL: version 1.x, its tags and build tag those of the file name."""
    headers = parse_headers(data)
    versions = _values(headers, "Wheel-Version")
    if len(versions) != 1 or not versions[0].startswith("1."):
        raise _refuse(name.filename, f"its WHEEL has Wheel-Version {versions}, not one 1.x")
    try:
        tags = frozenset(tag for value in _values(headers, "Tag") for tag in parse_tag(value))
    except ValueError:
        raise _refuse(name.filename, "its WHEEL has a malformed Tag") from None
    if tags != name.tags:
        raise _refuse(name.filename, "the tags in its WHEEL differ from its file name's")
    build = _values(headers, "Build")
    if build != ([name.written_tags.split("-")[0]] if name.build else []):
        raise _refuse(name.filename, "the build tag in its WHEEL differs from its file name's")


def _check_metadata(data: bytes, name: WheelName) -> None:
    """METADATA: one Name and one Version, those of the file name."""
    headers = parse_headers(data)
    names, versions = _values(headers, "Name"), _values(headers, "Version")
    if [canonicalize_name(n) for n in names] != [name.name]:
        raise _refuse(name.filename, f"its METADATA names {names}, not {name.name!r}")
    try:
        agrees = [Version(v) for v in versions] == [name.version]
    except InvalidVersion:
        agrees = False
    if not agrees:
        raise _refuse(name.filename, f"its METADATA has Version {versions}, not {name.version}")


def read_wheel(data: bytes, filename: str) -> Wheel:
    """Verify a wheel's bytes and return it; see the module docstring for the checks.

    Raises:
        PatchError: For any check that fails, naming the member and what to do.
    """
    name = parse_wheel_name(filename)
    with _open_zip(data, filename) as archive:
        infos = tuple(archive.infolist())
        _check_entries(infos, filename)
        dist_info = _dist_info(infos, name)
        check_sizes(infos, len(data), filename)
        members = _read_members(archive, infos, dist_info, filename)
    _check_wheel_file(members[f"{dist_info}/WHEEL"], name)
    _check_metadata(members[f"{dist_info}/METADATA"], name)
    sha256 = hashlib.sha256(data).hexdigest()
    return Wheel(name, sha256, data, dist_info, infos, members)


def _strip_zip64_extra(extra: bytes) -> bytes:
    """``extra`` without its ZIP64 field: ``zipfile`` adds one again where sizes need it."""
    kept = b""
    offset = 0
    while offset + 4 <= len(extra):
        header_id, size = struct.unpack("<HH", extra[offset : offset + 4])
        if header_id != ZIP64_EXTRA_ID:
            kept += extra[offset : offset + 4 + size]
        offset += 4 + size
    return kept


@dataclass(frozen=True)
class Entry:
    """One member to write: its ``ZipInfo`` (name, time, mode, compression) and bytes.

    ``raw`` holds the member's compressed bytes when they are known (an untouched member of
    the base, whose ``ZipInfo`` carries the matching CRC and sizes): they are copied as they
    are instead of being compressed again, which is most of a build's time otherwise.
    """

    info: zipfile.ZipInfo
    data: bytes
    raw: Optional[bytes] = None


def new_entry(
    info: zipfile.ZipInfo,
    data: bytes,
    *,
    name: str,
    date_time: Optional[DateTime] = None,
    raw: Optional[bytes] = None,
) -> Entry:
    """A member made from ``info`` under ``name``, its ZIP64 extra dropped, time optional."""
    new_info = copy.copy(info)
    new_info.filename = name
    new_info.extra = _strip_zip64_extra(info.extra)
    new_info.flag_bits &= ~_DATA_DESCRIPTOR  # sizes go into the local header
    if date_time is not None:
        new_info.date_time = date_time
    return Entry(new_info, data, raw)


def _record(entries: Sequence[Entry], record_name: str) -> bytes:
    rows = [
        [e.info.filename, record_hash(e.data), str(len(e.data))]
        for e in entries
        if not e.info.is_dir() and e.info.filename != record_name
    ]
    rows.append([record_name, "", ""])
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(rows)
    return text.getvalue().encode("utf-8")


def _ordered(entries: Sequence[Entry], dist_info: str) -> List[Entry]:
    """Sorted by name, the .dist-info last and its RECORD, computed here, at the very end."""
    record_name = f"{dist_info}/RECORD"

    def key(entry: Entry) -> Tuple[int, str]:
        name = entry.info.filename
        return (2 if name == record_name else int(name.startswith(f"{dist_info}/")), name)

    ordered = sorted(entries, key=key)
    if not ordered or ordered[-1].info.filename != record_name:
        raise PatchError(f"the wheel to write has no {record_name}; report this")
    ordered[-1] = Entry(ordered[-1].info, _record(ordered, record_name), None)
    return ordered


class _Interrupted(SystemExit):
    """SIGTERM during a write: unwinds like an exit, so the temporary file is removed."""


def _raise_on_signal(signum: int, frame: Optional[FrameType]) -> None:
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise _Interrupted(128 + signum)


@contextlib.contextmanager
def _signals_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM raise inside the block, so that its ``finally`` clauses run."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise_on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _temporary_in(out_dir: Path, final_name: str) -> Path:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        descriptor, name = tempfile.mkstemp(dir=out_dir, prefix=".patched-", suffix=".whl.tmp")
    except OSError as error:
        raise PatchError(
            f"cannot write {final_name} into {str(out_dir)!r} ({error.strerror or error}); "
            "choose an output folder you can write to"
        ) from None
    os.close(descriptor)
    return Path(name)


def _write_raw(archive: zipfile.ZipFile, info: zipfile.ZipInfo, raw: bytes) -> None:
    """Append a member whose compressed bytes and CRC are known, as ``writestr`` would.

    ``zipfile`` has no public call for this; what is written is read back and verified
    member by member before the wheel is kept, so a change in ``zipfile`` cannot slip by.
    """
    stream: Any = archive.fp
    info.header_offset = stream.tell()
    zip64 = info.file_size > zipfile.ZIP64_LIMIT or info.compress_size > zipfile.ZIP64_LIMIT
    stream.write(info.FileHeader(zip64))
    stream.write(raw)
    archive.filelist.append(info)
    archive.NameToInfo[info.filename] = info
    setattr(archive, "start_dir", stream.tell())
    setattr(archive, "_didModify", True)


def _write_zip(path: Path, entries: Sequence[Entry]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for entry in entries:
            if entry.raw is not None:
                _write_raw(archive, entry.info, entry.raw)
            else:
                archive.writestr(entry.info, entry.data)


def _verify_written(path: Path, final_name: str, entries: Sequence[Entry]) -> None:
    """Read the written file back: it must be a valid wheel holding exactly ``entries``."""
    written = read_wheel(path.read_bytes(), final_name)
    expected = {e.info.filename: e.data for e in entries if not e.info.is_dir()}
    if dict(written.members) != expected or len(written.infos) != len(entries):
        raise PatchError(
            f"{final_name}: the written file does not read back as built; nothing was kept, "
            "check the output folder's disk and build again"
        )


def write_wheel(out_dir: Path, filename: str, entries: Sequence[Entry], *, dist_info: str) -> Path:
    """Write ``entries`` as the wheel ``out_dir/filename``, with RECORD computed; see above.

    Raises:
        PatchError: If the folder cannot be written or the result does not verify; nothing
            is left in ``out_dir`` then, nor after SIGINT or SIGTERM.
    """
    ordered = _ordered(entries, dist_info)
    final = Path(out_dir) / filename
    with _signals_unwind():
        temporary = _temporary_in(Path(out_dir), filename)
        try:  # a signal from here on unwinds through the finally clause below
            _write_zip(temporary, ordered)
            _verify_written(temporary, filename, ordered)
            os.chmod(temporary, 0o644)
            os.replace(temporary, final)
        except OSError as error:
            raise PatchError(
                f"cannot write {filename} into {str(out_dir)!r} ({error.strerror or error}); "
                "check the free space and the folder's permissions"
            ) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    logger.debug("wrote %s", final)
    return final
