"""The one owner of the wheel format: a wheel read and verified from its bytes, and the writer.

:func:`read_wheel` takes the bytes of a wheel (read once, by the caller, with a size cap) and
checks, in this order and before decompressing anything but RECORD: the file name, the zip
itself (:func:`read_zip`: every byte of the file accounted for, each local header agreeing
with its central entry, member names, file types, compression, encryption, duplicates), the one
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
import errno
import hashlib
import io
import logging
import os
import stat
import struct
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import compat32
from pathlib import Path
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

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
from patched_wheel.files import signals_unwind

__all__ = [
    "MAX_RECORD_BYTES",
    "MAX_UNPACKED_BYTES",
    "MAX_UNPACKED_RATIO",
    "MAX_WHEEL_BYTES",
    "RECORD_SIGNATURES",
    "DateTime",
    "Entry",
    "Wheel",
    "WheelName",
    "ZipArchive",
    "ZipMember",
    "check_sizes",
    "is_wheel_filename",
    "new_entry",
    "parse_headers",
    "parse_wheel_name",
    "read_wheel",
    "read_wheel_file",
    "read_zip",
    "record_hash",
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
    return _record_digest(hashlib.sha256(data))


def _record_digest(hasher: Any) -> str:
    digest = hasher.digest()
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


def _open_regular_file(path: Path) -> int:
    """A descriptor of the regular file ``path``; anything else is refused before a read.

    The file is checked before it is opened, and opened without blocking (a FIFO would wait
    for a writer forever) and checked again through the descriptor, so that a file swapped
    in between is caught too.
    """
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise IsADirectoryError(errno.EISDIR, "not a regular file")
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    descriptor = os.open(path, flags | getattr(os, "O_BINARY", 0))
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise IsADirectoryError(errno.EISDIR, "not a regular file")
    return descriptor


def read_wheel_file(path: Path, *, what: str) -> bytes:
    """The bytes of the wheel file at ``path``, read once, refused beyond the size cap.

    ``what`` names where the path came from (``--base-wheel``, ``TORCHTRT_BASE_WHEEL``). A
    folder, FIFO, device or socket is refused without waiting on it.
    """
    try:
        with open(_open_regular_file(path), "rb") as stream:
            size = os.fstat(stream.fileno()).st_size
            # Never more than the file's size plus one byte (a file growing meanwhile shows).
            data = b"" if size > MAX_WHEEL_BYTES else stream.read(size + 1)
    except OSError as error:
        raise PatchError(
            f"{what} {str(path)!r} cannot be read ({error.strerror or error}); give the path "
            "of an official torch-tensorrt wheel file"
        ) from None
    if len(data) > MAX_WHEEL_BYTES or size > MAX_WHEEL_BYTES:
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


def is_wheel_filename(filename: str) -> bool:
    """Whether ``filename`` is a valid wheel file name (``packaging``'s rules)."""
    try:
        parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return True


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


def _name_problem(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a member's name is refused, or ``None``: anything that installers on some system
    would put elsewhere, or that a terminal would not show as it is."""
    name = info.filename
    path = name[:-1] if name.endswith("/") else name
    if "\\" in name or "\x00" in name:
        return "holds a backslash or a NUL"
    if not name.isascii():
        return (
            "is not ASCII, as every official wheel's names are (file systems normalise other "
            "names differently, and Python versions class their characters differently)"
        )
    if not name.isprintable():
        return "holds a control character"
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        return "is an absolute path"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "has an empty, '.' or '..' part"
    return _windows_name_problem(path)


# Windows' device names, which name no file in any folder (``nul.py`` is the device NUL).
_WINDOWS_DEVICES = frozenset(
    ["CON", "PRN", "AUX", "NUL"] + [f"{kind}{n}" for kind in ("COM", "LPT") for n in range(10)]
)


def _windows_name_problem(path: str) -> Optional[str]:
    """Why Windows would write the member elsewhere than its name says: ``utils.py.`` and
    ``utils.py `` are ``utils.py`` there, ``utils.py:x`` is a stream of ``utils.py``, and a
    device name is no file at all."""
    if any(c in path for c in '<>:"|?*'):
        return 'holds a character Windows reads otherwise (<>:"|?*)'
    for part in path.split("/"):
        if part.endswith((".", " ")) or part.split(".")[0].upper() in _WINDOWS_DEVICES:
            return "ends in a dot or space, or names a Windows device, in one of its parts"
    return None


def _header_problem(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a member's headers are refused (flags, versions, sizes), or ``None``."""
    if info.flag_bits & _ENCRYPTED:
        return "is encrypted"
    if info.flag_bits & ~_ALLOWED_FLAGS:
        return f"has the flags 0x{info.flag_bits:04x}, beyond UTF-8 name and data descriptor"
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        return f"uses compression method {info.compress_type}, not stored or deflated"
    if info.extract_version > _MAX_VERSION_NEEDED or info.reserved != 0:
        return f"needs zip version {info.extract_version} (system {info.reserved}), beyond 4.5"
    if info.create_system not in _CREATING_SYSTEMS or info.internal_attr not in (0, 1):
        return f"was made by system {info.create_system}, not MS-DOS or Unix, or has odd attributes"
    if info.compress_type == zipfile.ZIP_STORED and info.compress_size != info.file_size:
        return "is stored with a compressed size other than its size"
    return None


def _entry_problem(info: zipfile.ZipInfo) -> Optional[str]:
    """Why a member is refused (its name, headers, type, mode), or ``None``."""
    mode = info.external_attr >> 16
    kind = stat.S_IFMT(mode)
    problem = _name_problem(info) or _header_problem(info)
    if problem is not None:
        return problem
    if info.is_dir():
        if kind not in (0, stat.S_IFDIR) or info.file_size != 0:
            return "is a folder entry with contents or another file type"
    elif kind not in (0, stat.S_IFREG):
        return f"is not a regular file (mode {mode:o}: a symlink, folder or device)"
    if mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
        return f"has the setuid, setgid or sticky bit (mode {mode:o})"
    return None


def _name_key(name: str) -> str:
    """What a member's name is to a case-insensitive file system (macOS, Windows); names are
    ASCII (:func:`_name_problem`), so no normalisation is left to differ."""
    return name.rstrip("/").casefold()


def _check_entries(infos: Sequence[zipfile.ZipInfo], filename: str) -> None:
    """No two names alike (also by case and Unicode normalisation), and no file that another
    member takes for a folder."""
    seen: Dict[str, str] = {}
    for info in infos:
        key = _name_key(info.filename)
        if key in seen:
            raise _refuse(
                filename, f"the members {seen[key]!r} and {info.filename!r} have the same name"
            )
        seen[key] = info.filename
    files = {_name_key(i.filename): i.filename for i in infos if not i.is_dir()}
    for info in infos:
        parts = _name_key(info.filename).split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in files:
                raise _refuse(
                    filename, f"the member {info.filename!r} lies under the file {files[folder]!r}"
                )


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
    missing = sorted(set(record) - present)
    problems += [f"RECORD lists {_shown(n)}, which the wheel lacks" for n in missing]
    return problems


def _shown(name: str) -> str:
    """A name from RECORD as a message may show it: as it is when it is printable ASCII,
    else escaped (a RECORD row can hold terminal escape sequences)."""
    return name if name.isascii() and name.isprintable() else ascii(name)


def _raise_problems(filename: str, problems: Sequence[str]) -> None:
    if problems:
        listed = "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else "")
        raise PatchError(
            f"{filename}: {listed}; the wheel was changed or damaged after it was built, "
            "use the official wheel"
        )


def _read_members(
    archive: ZipArchive, dist_info: str, keep: Callable[[str], bool]
) -> Dict[str, bytes]:
    """The bytes of every file ``keep`` names, every file checked against RECORD: sizes from
    headers first, then hashes, one member in memory at a time besides those kept."""
    filename = archive.filename
    record_name = f"{dist_info}/RECORD"
    files = [member for member in archive.members if not member.info.is_dir()]
    record_member = next(member for member in files if member.info.filename == record_name)
    if record_member.info.file_size > MAX_RECORD_BYTES:
        raise _refuse(filename, f"its RECORD is larger than {MAX_RECORD_BYTES >> 20} MiB")
    record = _parse_record(archive.unpack(record_member), filename)
    skipped = frozenset({record_name} | {f"{dist_info}/{s}" for s in RECORD_SIGNATURES})
    _raise_problems(filename, _record_problems([m.info for m in files], record, skipped))
    members: Dict[str, bytes] = {}
    problems = []
    for member in files:
        name = member.info.filename
        limit = member.info.file_size if keep(name) else None
        hasher, kept = archive.digest(member, keep_up_to=limit)
        if name not in skipped and _record_digest(hasher) != record[name][0]:
            problems.append(f"{name} does not match its RECORD hash")
        if kept is not None:
            members[name] = kept
    _raise_problems(filename, problems)
    return members


# --- The strict reading of a zip ---------------------------------------------------------------
#
# Installers read zips differently: ``zipfile`` finds members through the central directory and
# ignores the local headers' names and sizes, and tolerates bytes before, between and after the
# members; Python 3.12 renames a member by its Unicode Path extra field where 3.11 does not;
# ``unzip`` trusts a stored member's compressed size. A wheel that reads one way to the tool and
# another way to pip is refused here, so that every reader that accepts it reads the same tree.
# The checks are made on the bytes with ``struct``, never through ``zipfile``, so the verdict is
# the same on every Python.

_END = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
_LOCAL = struct.Struct("<4s2B4HL2L2H")
_END_SIGNATURE = b"PK\x05\x06"
_ZIP64_LOCATOR_SIGNATURE = b"PK\x06\x07"
_ZIP64_END_SIGNATURE = b"PK\x06\x06"
_CENTRAL_SIGNATURE = b"PK\x01\x02"
_LOCAL_SIGNATURE = b"PK\x03\x04"
_DESCRIPTOR_SIGNATURE = b"PK\x07\x08"
_ZIP64_MARK = 0xFFFFFFFF
_NO_END_RECORD = "its last 22 bytes are not a zip end record without comment"

# Flag bits a wheel's member may carry: bits 1-2 (deflate's speed hint, no meaning to a
# reader), the data descriptor and the UTF-8 name. Every other bit (encryption, patched data,
# masked headers) is refused.
_ALLOWED_FLAGS = 0x2 | 0x4 | _DATA_DESCRIPTOR | _UTF8_NAME

# Extra fields whose meaning no reader changes the member by: ZIP64 sizes (checked), the
# extended timestamp, Info-ZIP's Unix UID/GID and NTFS times. Any other (0x7075 Unicode Path,
# 0x6375 Unicode Comment, 0x000d PKWARE Unix with a link target, ...) is refused.
_ALLOWED_EXTRAS = frozenset({ZIP64_EXTRA_ID, 0x5455, 0x7875, 0x000A})

# The newest "version needed to extract" a member may ask for: 4.5, ZIP64.
_MAX_VERSION_NEEDED = 45

# Made by MS-DOS (0) or Unix (3): the systems whose external attributes installers read.
_CREATING_SYSTEMS = (0, 3)


@dataclass(frozen=True)
class ZipMember:
    """One member as the strict reader found it: its ``ZipInfo`` and where its data lies."""

    info: zipfile.ZipInfo
    data_start: int


@dataclass(frozen=True)
class ZipArchive:
    """A zip every byte of which was accounted for by :func:`read_zip`."""

    filename: str
    data: bytes
    members: Tuple[ZipMember, ...]

    @property
    def infos(self) -> Tuple[zipfile.ZipInfo, ...]:
        return tuple(member.info for member in self.members)

    def unpack(self, member: ZipMember) -> bytes:
        """The member's bytes, checked as :meth:`pieces` checks them."""
        return b"".join(self.pieces(member))

    def digest(
        self, member: ZipMember, *, keep_up_to: Optional[int] = None
    ) -> Tuple["hashlib._Hash", Optional[bytes]]:
        """The member's sha256 and, where ``keep_up_to`` is given, its bytes if they are no
        more than that many (else ``None``): read once, one piece in memory at a time beside
        what is kept."""
        hasher = hashlib.sha256()
        kept: Optional[List[bytes]] = None if keep_up_to is None else []
        size = 0
        for piece in self.pieces(member):
            hasher.update(piece)
            size += len(piece)
            if kept is not None and keep_up_to is not None and size > keep_up_to:
                kept = None
            if kept is not None:
                kept.append(piece)
        return hasher, None if kept is None else b"".join(kept)

    def pieces(self, member: ZipMember) -> Iterator[bytes]:
        """The member's bytes in pieces of at most 1 MiB (a caller that hashes them holds one
        piece at a time): its data exactly its compressed size, inflating to exactly its file
        size with no byte left after the deflate stream, and its CRC matching. The checks end
        the iteration: a caller must read every piece before it trusts any."""
        info = member.info
        raw = memoryview(self.data)[member.data_start : member.data_start + info.compress_size]
        stored = info.compress_type == zipfile.ZIP_STORED
        source = _sliced(raw) if stored else _inflated(raw, info.file_size)
        crc, produced = 0, 0
        try:
            for piece in source:
                crc, produced = zlib.crc32(piece, crc), produced + len(piece)
                yield piece
        except _ZipRefusal:
            produced = -1
        if produced != info.file_size:
            raise _refuse(
                self.filename,
                f"the member {ascii(info.filename)} does not unpack to its header's size",
            )
        if crc != info.CRC:
            raise _refuse(
                self.filename, f"the member {ascii(info.filename)} does not match its CRC"
            )


# The largest piece of a member held at once while it is hashed or inflated.
_PIECE_BYTES = 1 << 20


def _sliced(raw: memoryview) -> Iterator[bytes]:
    for offset in range(0, len(raw), _PIECE_BYTES):
        yield raw[offset : offset + _PIECE_BYTES].tobytes()


def _inflated(raw: memoryview, size: int) -> Iterator[bytes]:
    """``raw`` inflated piece by piece, never past ``size + 1`` bytes; the deflate stream must
    end exactly at the end of ``raw`` (nothing after it, nothing left unread)."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    produced = 0
    try:
        for offset in range(0, len(raw), _PIECE_BYTES):
            pending: Any = raw[offset : offset + _PIECE_BYTES]
            while not inflater.eof:
                piece = inflater.decompress(pending, _PIECE_BYTES)
                pending = inflater.unconsumed_tail
                produced += len(piece)
                if produced > size:
                    raise _ZipRefusal("inflates past its size")
                yield piece
                if not pending and len(piece) < _PIECE_BYTES:
                    break
            if inflater.eof and (pending or offset + _PIECE_BYTES < len(raw)):
                raise _ZipRefusal("has bytes after its deflate stream")
    except zlib.error:
        raise _ZipRefusal("is not a valid deflate stream") from None
    if not inflater.eof or inflater.unused_data:
        raise _ZipRefusal("has a deflate stream that does not end where its data ends")


class _ZipRefusal(Exception):
    """A rule of the strict reading broken; :func:`read_zip` turns it into a PatchError."""


class _ZipDamaged(_ZipRefusal):
    """No zip end record where it must be: a truncated download, most likely."""


def _end_record(data: bytes) -> Tuple[int, int, int]:
    """Entry count, central directory's offset and its end, from the end record(s).

    The end record must be the file's last 22 bytes (no archive comment, nothing after it);
    with ZIP64, its locator and record lie right before it, and agree with it.
    """
    if len(data) < _END.size:
        raise _ZipDamaged(_NO_END_RECORD)
    fields = _END.unpack_from(data, len(data) - _END.size)
    signature, disk, cd_disk, disk_entries, entries, cd_size, cd_offset, comment = fields
    if signature != _END_SIGNATURE or comment != 0:
        raise _ZipDamaged(_NO_END_RECORD)
    if disk != 0 or cd_disk != 0 or disk_entries != entries:
        raise _ZipRefusal("its end record names other disks (a split archive)")
    cd_end = len(data) - _END.size
    locator_at = cd_end - _ZIP64_LOCATOR.size
    if locator_at >= 0 and data[locator_at : locator_at + 4] == _ZIP64_LOCATOR_SIGNATURE:
        return _zip64_end_record(data, locator_at, (entries, cd_size, cd_offset))
    if cd_offset + cd_size != cd_end:
        raise _ZipRefusal("its central directory is not where its end record says")
    return entries, cd_offset, cd_end


def _zip64_end_record(
    data: bytes, locator_at: int, plain: Tuple[int, int, int]
) -> Tuple[int, int, int]:
    """The ZIP64 end record, right before its locator, agreeing with the plain end record."""
    _, disk, record_at, disks = _ZIP64_LOCATOR.unpack_from(data, locator_at)
    if disk != 0 or disks != 1 or record_at + _ZIP64_END.size != locator_at:
        raise _ZipRefusal("its ZIP64 locator does not point right before itself")
    fields = _ZIP64_END.unpack_from(data, record_at)
    signature, size, _, _, disk, cd_disk, disk_entries, entries, cd_size, cd_offset = fields
    if signature != _ZIP64_END_SIGNATURE or size != _ZIP64_END.size - 12:
        raise _ZipRefusal("its ZIP64 end record is malformed or has extensible data")
    if disk != 0 or cd_disk != 0 or disk_entries != entries:
        raise _ZipRefusal("its ZIP64 end record names other disks (a split archive)")
    for wide, narrow, mark in zip(
        (entries, cd_size, cd_offset), plain, (0xFFFF, _ZIP64_MARK, _ZIP64_MARK)
    ):
        if narrow not in (wide, mark):
            raise _ZipRefusal("its ZIP64 end record and its end record disagree")
    if cd_offset + cd_size != record_at:
        raise _ZipRefusal("its central directory is not where its end record says")
    return entries, cd_offset, record_at


def _extra_fields(extra: bytes) -> List[Tuple[int, bytes]]:
    """The (id, data) fields of an extra block that they tile exactly; unknown ids refused."""
    fields = []
    offset = 0
    while offset < len(extra):
        if offset + 4 > len(extra):
            raise _ZipRefusal("has a malformed extra field")
        header_id, size = struct.unpack_from("<HH", extra, offset)
        if offset + 4 + size > len(extra):
            raise _ZipRefusal("has a malformed extra field")
        if header_id not in _ALLOWED_EXTRAS:
            raise _ZipRefusal(
                f"has the extra field 0x{header_id:04x}, which some readers read as another "
                "name, mode or size"
            )
        fields.append((header_id, extra[offset + 4 : offset + 4 + size]))
        offset += 4 + size
    if len({header_id for header_id, _ in fields}) != len(fields):
        raise _ZipRefusal("repeats an extra field")
    return fields


def _widened(values: Sequence[int], extra: bytes) -> List[int]:
    """``values`` with each one marked 0xFFFFFFFF read from the ZIP64 extra field, which must
    hold exactly those, in order."""
    zip64 = [data for header_id, data in _extra_fields(extra) if header_id == ZIP64_EXTRA_ID]
    marked = [i for i, value in enumerate(values) if value == _ZIP64_MARK]
    if not zip64 and not marked:
        return list(values)
    if len(zip64) != 1 or len(zip64[0]) != 8 * len(marked):
        raise _ZipRefusal("has a ZIP64 extra field that does not match its header")
    wide = list(struct.unpack(f"<{len(marked)}Q", zip64[0]))
    return [wide.pop(0) if value == _ZIP64_MARK else value for value in values]


def _member_widened(name: str, values: Sequence[int], extra: bytes) -> List[int]:
    """:func:`_widened` for the member ``name``, named in the refusal."""
    try:
        return _widened(values, extra)
    except _ZipRefusal as refusal:
        raise _ZipRefusal(f"the member {ascii(name)} {refusal}") from None


def _decode_name(raw: bytes, flags: int) -> str:
    """A member's name: UTF-8 where flagged, else ASCII (readers differ on any other code)."""
    try:
        return raw.decode("utf-8" if flags & _UTF8_NAME else "ascii")
    except UnicodeDecodeError:
        if flags & _UTF8_NAME:
            raise _ZipRefusal("a member's name is marked UTF-8 but is not") from None
        raise _ZipRefusal(f"the member {raw!r} is not ASCII and not marked UTF-8") from None


def _central_entry(data: bytes, position: int) -> Tuple[zipfile.ZipInfo, bytes, int]:
    """The central directory entry at ``position``: its ``ZipInfo``, raw name, and its end."""
    if data[position : position + 4] != _CENTRAL_SIGNATURE or position + _CENTRAL.size > len(data):
        raise _ZipRefusal("its central directory holds fewer entries than its end record says")
    fields = _CENTRAL.unpack_from(data, position)
    _, made_version, made_system, needed, needed_system, flags, method, time_, date = fields[:9]
    crc, csize, usize, name_length, extra_length, comment_length = fields[9:15]
    disk, internal, external, offset = fields[15:]
    start = position + _CENTRAL.size
    raw_name = data[start : start + name_length]
    extra = data[start + name_length : start + name_length + extra_length]
    end = start + name_length + extra_length + comment_length
    name = _decode_name(raw_name, flags)
    if comment_length or disk != 0 or end > len(data):
        raise _ZipRefusal(f"the member {ascii(name)} has a comment, or lies on another disk")
    sizes = _member_widened(name, (usize, csize, offset), extra)
    info = zipfile.ZipInfo(name, _dos_date_time(date, time_))
    info.create_version, info.create_system = made_version, made_system
    info.extract_version, info.reserved = needed, needed_system
    info.flag_bits, info.compress_type, info.CRC = flags, method, crc
    info.internal_attr, info.external_attr, info.extra = internal, external, extra
    info.volume, info.comment = 0, b""
    info.file_size, info.compress_size, info.header_offset = sizes
    return info, raw_name, end


def _dos_date_time(date: int, time_: int) -> DateTime:
    return (
        (date >> 9) + 1980,
        (date >> 5) & 0xF,
        date & 0x1F,
        time_ >> 11,
        (time_ >> 5) & 0x3F,
        (time_ & 0x1F) * 2,
    )


def _local_member(
    data: bytes, info: zipfile.ZipInfo, raw_name: bytes, position: int
) -> Tuple[ZipMember, int]:
    """The member whose local header must start at ``position`` (where the previous member
    ended) and agree with its central entry ``info``; and where the member ends."""
    name = info.filename
    if info.header_offset != position:
        raise _ZipRefusal(
            f"the member {ascii(name)} does not start where the one before it ends (bytes before, "
            "between or hidden among its members)"
        )
    if data[position : position + 4] != _LOCAL_SIGNATURE or position + _LOCAL.size > len(data):
        raise _ZipRefusal(f"the member {ascii(name)} has no local header where its entry says")
    fields = _LOCAL.unpack_from(data, position)
    _, needed, needed_system, flags, method, time_, date, crc, csize, usize = fields[:10]
    name_length, extra_length = fields[10:]
    start = position + _LOCAL.size
    data_start = start + name_length + extra_length
    headers_agree = (
        data[start : start + name_length] == raw_name
        and (needed, needed_system, flags, method) == _header_fields(info)
        and _dos_date_time(date, time_) == info.date_time
    )
    local_extra = data[start + name_length : data_start]
    sizes = [crc] + _member_widened(name, (usize, csize), local_extra)
    described = flags & _DATA_DESCRIPTOR and sizes == [0, 0, 0]
    if not headers_agree or not (described or sizes == _sizes(info)):
        raise _ZipRefusal(
            f"the member {ascii(name)} has a local header that differs from its entry"
        )
    end = data_start + info.compress_size
    if flags & _DATA_DESCRIPTOR:
        end = _descriptor_end(data, info, end)
    if end > len(data):
        raise _ZipRefusal(f"the member {ascii(name)} runs past the end of the file")
    return ZipMember(info, data_start), end


def _header_fields(info: zipfile.ZipInfo) -> Tuple[int, int, int, int]:
    return (info.extract_version, info.reserved, info.flag_bits, info.compress_type)


def _sizes(info: zipfile.ZipInfo) -> List[int]:
    return [info.CRC, info.file_size, info.compress_size]


def _descriptor_end(data: bytes, info: zipfile.ZipInfo, position: int) -> int:
    """Where the data descriptor at ``position`` ends; it must carry its signature and the
    entry's CRC and sizes (8-byte sizes where the entry uses ZIP64)."""
    wide = any(header_id == ZIP64_EXTRA_ID for header_id, _ in _extra_fields(info.extra)) or (
        info.file_size >= _ZIP64_MARK or info.compress_size >= _ZIP64_MARK
    )
    layout = struct.Struct("<4sLQQ" if wide else "<4sLLL")
    if position + layout.size > len(data):
        raise _ZipRefusal(f"the member {ascii(info.filename)} runs past the end of the file")
    signature, crc, csize, usize = layout.unpack_from(data, position)
    if signature != _DESCRIPTOR_SIGNATURE or [crc, usize, csize] != _sizes(info):
        raise _ZipRefusal(f"the member {ascii(info.filename)} has a data descriptor that differs")
    return position + layout.size


def _strict_members(data: bytes) -> Tuple[ZipMember, ...]:
    """Every member, each central entry matched by its local header, the members back to back
    from the file's first byte to the central directory, which ends at the end record."""
    count, cd_offset, cd_end = _end_record(data)
    members: List[ZipMember] = []
    position, member_end = cd_offset, 0
    for _ in range(count):
        info, raw_name, position = _central_entry(data, position)
        problem = _entry_problem(info)
        if problem is not None:
            raise _ZipRefusal(f"the member {ascii(info.filename)} {problem}")
        member, member_end = _local_member(data, info, raw_name, member_end)
        members.append(member)
    if position != cd_end:
        raise _ZipRefusal("its central directory holds more entries than its end record says")
    if member_end != cd_offset:
        raise _ZipRefusal("bytes lie between its last member and its central directory")
    return tuple(members)


def read_zip(data: bytes, filename: str) -> ZipArchive:
    """The zip in ``data``, read strictly: see the comment above; the members' names checked.

    Raises:
        PatchError: For any byte not accounted for, any header that disagrees with another,
            and any name, type or encoding that some reader would take another way.
    """
    try:
        members = _strict_members(data)
    except _ZipDamaged as damage:
        raise PatchError(
            f"{filename}: not a valid zip file ({damage}); the download may be truncated, "
            "delete it and download it again"
        ) from None
    except _ZipRefusal as refusal:
        raise _refuse(filename, str(refusal)) from None
    _check_entries([member.info for member in members], filename)
    archive = ZipArchive(filename, data, members)
    for member in members:
        if member.info.is_dir():
            archive.unpack(member)  # a folder entry's data must inflate to nothing
    return archive


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


def _every_member(name: str) -> bool:
    return True


def read_wheel(data: bytes, filename: str, *, keep: Callable[[str], bool] = _every_member) -> Wheel:
    """Verify a wheel's bytes and return it; see the module docstring for the checks.

    ``keep`` names the members whose bytes the result holds (all by default): a caller that
    only needs the verdict keeps few, and its memory stays that of one member. METADATA and
    WHEEL are always kept.

    Raises:
        PatchError: For any check that fails, naming the member and what to do.
    """
    name = parse_wheel_name(filename)
    archive = read_zip(data, filename)
    infos = archive.infos
    dist_info = _dist_info(infos, name)
    check_sizes(infos, len(data), filename)
    always = (f"{dist_info}/WHEEL", f"{dist_info}/METADATA")
    members = _read_members(archive, dist_info, lambda n: n in always or keep(n))
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
    with signals_unwind():
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
