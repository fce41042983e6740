"""The wheel format: a base read with ``zipfile``, a patched wheel written raw.

A locked base is pinned by its sha256 before it is opened; an unlocked one is first checked as
pypa/installer checks a wheel (:meth:`BaseWheel.validate_record`). New members are *stored*,
every other member's compressed bytes copied from the base, so the patched wheel does not
depend on the machine's zlib (zlib-ng deflates one input to other bytes). zipfile cannot copy
compressed bytes, so :func:`write_zip` writes the records itself: no extra fields, data
descriptors or ZIP64 (4 GiB or more is refused), times and modes from the base.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import lzma
import math
import re
import stat
import struct
import time
import zipfile
import zlib
from email.parser import BytesParser
from email.policy import compat32
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Set, Tuple

from packaging.tags import Tag, parse_tag
from packaging.utils import (
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from . import PatchError, config

DateTime = Tuple[int, int, int, int, int, int]

# RECORD's signatures, which no longer hold once a member changes (dropped, as auditwheel does).
RECORD_SIGNATURES = ("RECORD.jws", "RECORD.p7s")
# The zip time of SOURCE_DATE_EPOCH is floored at 1980, the first time a zip can hold.
ZIP_EPOCH_FLOOR = 315532800
ZIP_EPOCH_CEILING = 4354819199  # the last second of 2107, the last year a zip can hold
# Caps on an unlocked base (the official wheels unpack to 14 MB, ratio 3.4). Benefit: a zip
# bomb is refused from its headers; cost: a larger base needs these raised.
MAX_UNPACKED_BYTES = 2 << 30
MAX_UNPACKED_RATIO = 16


def record_hash(data: bytes) -> str:
    """The hash of ``data`` as RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def source_date_epoch(value: str) -> Optional[str]:
    """``SOURCE_DATE_EPOCH`` as the build takes it: unset or empty is ``None``; otherwise whole
    seconds in decimal digits (leading zeros dropped), within what a zip can date."""
    if not value:
        return None
    if not re.fullmatch(r"[0-9]{1,12}", value) or int(value) > ZIP_EPOCH_CEILING:
        raise PatchError(
            f"SOURCE_DATE_EPOCH={value!r} is not a time a zip file can hold; set it to a whole "
            f"number of seconds in digits, at most {ZIP_EPOCH_CEILING} (2107), or unset it"
        )
    return str(int(value))


def zip_date_time(epoch: Optional[str]) -> Optional[DateTime]:
    """The zip time of ``SOURCE_DATE_EPOCH`` (UTC, floored at 1980), or ``None`` if unset."""
    checked = source_date_epoch(epoch or "")
    if checked is None:
        return None
    when = time.gmtime(max(int(checked), ZIP_EPOCH_FLOOR))
    return (when.tm_year, when.tm_mon, when.tm_mday, when.tm_hour, when.tm_min, when.tm_sec)


class WheelName(NamedTuple):
    """A wheel file name, parsed, with its parts as written (for the new name)."""

    name: NormalizedName
    written_name: str
    written_version: str
    written_tags: str
    build_tag: str = ""

    @property
    def dist_info(self) -> str:
        return f"{self.written_name}-{self.written_version}.dist-info"


def is_wheel_filename(filename: str) -> bool:
    try:
        parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return True


def parse_wheel_name(filename: str) -> WheelName:
    try:
        name = parse_wheel_filename(filename)[0]
    except (InvalidWheelFilename, InvalidVersion) as error:
        raise PatchError(
            f"{filename!r} is not a wheel file name ({error}); pass the wheel as pip "
            "downloaded it, without renaming it"
        ) from None
    parts = filename[: -len(".whl")].split("-")
    build_tag = parts[2] if len(parts) == 6 else ""
    return WheelName(name, parts[0], parts[1], "-".join(parts[-3:]), build_tag)


def parse_headers(data: bytes) -> List[Tuple[str, str]]:
    """The headers of METADATA or WHEEL, in order (``compat32``, as pip reads them)."""
    return [(k, str(v)) for k, v in BytesParser(policy=compat32).parsebytes(data).items()]


def header_values(data: bytes, key: str) -> List[str]:
    return [value.strip() for k, value in parse_headers(data) if k.lower() == key.lower()]


# What zipfile raises where a zip or a member cannot be read: damaged, encrypted or lacking
# a decompressor (RuntimeError), a bz2 or lzma stream that is none (OSError, LZMAError).
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    ValueError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    OSError,
    lzma.LZMAError,
    struct.error,
)
_METHODS = {zipfile.ZIP_BZIP2: "bzip2", zipfile.ZIP_LZMA: "lzma"}


def read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of a member of an untrusted zip, decompressed and CRC-checked
    by zipfile. Only a member as a wheel holds it is opened (not encrypted; stored or deflated,
    as every official and patched wheel's members are); any other, or any failure, is one
    PatchError naming the member and what is wrong with it."""
    shown = ascii(info.filename)[:200]
    if info.flag_bits & 0x1:
        raise PatchError(f"its member {shown} is encrypted, which no wheel is")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        method = _METHODS.get(info.compress_type, f"method {info.compress_type}")
        raise PatchError(f"its member {shown} is compressed with {method}, not deflate")
    try:
        with archive.open(info) as stream:
            return stream.read(cap + 1)
    except ZIP_ERRORS as error:
        raise PatchError(
            f"its member {shown} cannot be read ({ascii(str(error))[1:200]})"
        ) from None


MAX_MEMBERS = 0xFFFE  # the most a patched wheel holds (:func:`write_zip`, no ZIP64)


def member_count(data: bytes) -> Optional[int]:
    """The number of members in the zip's central directory, counted by walking it where
    zipfile reads it (the end record's stated size back from the end record), at most
    ``MAX_MEMBERS + 1`` headers: never the count or size the zip states about itself, which
    zipfile does not bound by (a count of 2 over 100 MB of directory cost 1.3 GB to open).
    ``None``: no end record, a ZIP64 one (which :func:`write_zip` never writes), or a directory
    that is not one. zipfile keeps an object of some 500 bytes per member, so an untrusted
    wheel is counted first; the walk costs nothing but the headers it steps over."""
    end = len(data) - 22  # zipfile's two ways to the end record: no comment, else the last one
    if not (end >= 0 and data[end : end + 4] == b"PK\x05\x06" and data[-2:] == b"\0\0"):
        end = data.rfind(b"PK\x05\x06", max(0, len(data) - (1 << 16) - 22))
    if (
        end < 0
        or len(data) < end + 22
        or (end >= 20 and data[end - 20 : end - 16] == b"PK\x06\x07")
    ):
        return None
    size = struct.unpack_from("<L", data, end + 12)[0]
    at, count = end - size, 0
    if at < 0:
        return None
    while at < end and count <= MAX_MEMBERS:
        if data[at : at + 4] != b"PK\x01\x02" or at + 46 > end:
            return None
        name, extra, comment = struct.unpack_from("<3H", data, at + 28)
        at, count = at + 46 + name + extra + comment, count + 1
    return count


def directory_problem(data: bytes) -> Optional[str]:
    """Why zipfile may not be given ``data``: no directory it reads, a ZIP64 one, or more
    members than a patched wheel holds (:func:`member_count`); ``None`` if it may."""
    count = member_count(data)
    if count is None:
        return "it is not a zip file (no central directory where zipfile reads one) or a ZIP64 one"
    if count > MAX_MEMBERS:
        return f"its zip holds more than {MAX_MEMBERS} members"
    return None


def _wheel_file_problems(data: bytes, file_tags: FrozenSet[Tag], build: str) -> List[str]:
    """What a base's WHEEL file says that pip refuses or that contradicts the file name: a
    ``Wheel-Version`` that is not one ``1.x`` (pip refuses another major version; the patched
    wheel would carry it), ``Tag`` lines other than the name's tags, a ``Build`` other than the
    name's build tag. A Tag line is expanded only if it names no more tags than the file name
    does: a compressed set expands to the product of its parts, which a hostile line makes
    astronomic."""
    problems = []
    versions = header_values(data, "Wheel-Version")
    if len(versions) != 1 or not re.fullmatch(r"1(\.[0-9]+)*", versions[0]):
        shown = ", ".join(ascii(v)[:40] for v in versions[:3]) or "none"
        problems.append(
            f"its WHEEL says Wheel-Version {shown}, not one 1.x, the only major version pip "
            "and this tool know"
        )
    tags: Set[Tag] = set()
    for value in header_values(data, "Tag"):
        parts = value.split("-")
        if len(parts) != 3 or math.prod(len(part.split(".")) for part in parts) > len(file_tags):
            tags.add(Tag("?", "?", "?"))  # not a tag, or more tags than the name has
        else:
            tags.update(parse_tag(value))
    if tags != set(file_tags):
        problems.append("WHEEL's Tag lines are not the file name's tags")
    builds = header_values(data, "Build")
    if builds != ([build] if build else []):
        problems.append("WHEEL's Build is not the file name's build tag")
    return problems


class BaseWheel:
    """An official wheel opened from its bytes: its entries, its members' bytes on demand."""

    def __init__(
        self, data: bytes, filename: str, *, local_install: bool = False, sha256: str = ""
    ) -> None:
        """``sha256``: of ``data``, where the caller has pinned it already (hashed once)."""
        self.name = parse_wheel_name(filename)
        self.filename, self.dist_info = filename, self.name.dist_info
        self.local_install = local_install  # made from an install's files, not an official file
        self.data, self.sha256 = data, sha256 or hashlib.sha256(data).hexdigest()
        problem = directory_problem(data)  # before zipfile reads the central directory
        if problem is not None:
            raise self.refused(problem)
        try:
            self.zip = zipfile.ZipFile(io.BytesIO(data))
            self.infos = tuple(self.zip.infolist())
        except ZIP_ERRORS as error:
            raise self.refused(f"it is not a zip file ({error})") from None
        self.by_name = {info.filename: info for info in self.infos}
        wanted = ("METADATA", "WHEEL", "RECORD")
        missing = [f for f in wanted if f"{self.dist_info}/{f}" not in self.by_name]
        if missing or len(self.by_name) != len(self.infos):
            raise self.refused(f"{self.dist_info} lacks {', '.join(missing)} or a name repeats")

    def refused(self, problem: str) -> PatchError:
        return PatchError(
            f"{self.filename}: {problem}; this is not a wheel the build can patch, use the "
            "official wheel"
        )

    def read(self, member: str, cap: int = MAX_UNPACKED_BYTES) -> bytes:
        """The bytes of ``member`` (:func:`read_member`), at most ``cap``."""
        info = self.by_name[member]
        if info.file_size > cap:
            raise self.refused(f"{member} is larger than {cap // config.MiB} MiB")
        try:
            return read_member(self.zip, info, info.file_size)
        except PatchError as error:
            raise self.refused(str(error)) from None

    def record(self) -> Dict[str, Tuple[str, str]]:
        """path -> (hash, size)."""
        record = self.read(f"{self.dist_info}/RECORD", 16 * config.MiB)
        try:
            rows = list(csv.reader(io.StringIO(record.decode())))
        except (UnicodeDecodeError, csv.Error) as error:
            raise self.refused(f"its RECORD cannot be read ({error})") from None
        entries: Dict[str, Tuple[str, str]] = {}
        for row in filter(None, rows):
            if len(row) != 3 or row[0] in entries:
                raise self.refused(f"its RECORD row {ascii(row[:3])} is malformed or repeated")
            entries[row[0]] = (row[1], row[2])
        return entries

    def payload(self, info: zipfile.ZipInfo) -> bytes:
        """The member's compressed bytes, where zipfile reads them (the local header's name and
        extra lengths skipped, the central directory's size taken), as the build copies them;
        refused where the directory puts them elsewhere than in the file (an offset or a size
        the zip states about itself)."""
        at = info.header_offset
        if self.data[at : at + 4] != b"PK\x03\x04" or at + 30 > len(self.data):
            raise self.refused(f"{ascii(info.filename)} has no local header where its entry says")
        name_length, extra_length = struct.unpack_from("<HH", self.data, at + 26)
        start = at + 30 + name_length + extra_length
        if start + info.compress_size > len(self.data):
            raise self.refused(f"{ascii(info.filename)} runs past the end of the file")
        return self.data[start : start + info.compress_size]

    def inflate_exactly(self, info: zipfile.ZipInfo) -> bytes:
        """The member's bytes from its copied compressed bytes, refused unless they are exactly
        its size and CRC with nothing after the stream (zipfile and pip stop at the size and
        never see what follows, which a copy would carry into the patched wheel)."""
        raw = self.payload(info)
        if info.compress_type == zipfile.ZIP_STORED:
            data, whole = raw, True
        else:
            inflater = zlib.decompressobj(-zlib.MAX_WBITS)
            try:
                data = inflater.decompress(raw, info.file_size + 1)
            except zlib.error as error:
                raise self.refused(f"{ascii(info.filename)} cannot be inflated ({error})") from None
            whole = inflater.eof and not inflater.unused_data and not inflater.unconsumed_tail
        if not whole or len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise self.refused(
                f"{ascii(info.filename)}: its compressed bytes are not exactly its size and CRC "
                "(bytes hidden after the stream, or damaged)"
            )
        return data

    def _layout_problems(self) -> List[str]:
        """What installers refuse in the layout: another .dist-info, names equal but for case
        (on Windows and macOS one overwrites the other), a WHEEL file pip refuses or that says
        other than the file name (:func:`_wheel_file_problems`), METADATA's name and version
        other than the file name's."""
        problems, seen = [], {}  # type: List[str], Dict[str, str]
        for info in self.infos:
            top = info.filename.split("/")[0]
            if top.endswith(".dist-info") and top != self.dist_info:
                problems.append(f"a second .dist-info folder {ascii(top)}")
            other = seen.setdefault(info.filename.rstrip("/").casefold(), info.filename)
            if other != info.filename:
                problems.append(f"{ascii(info.filename)} and {ascii(other)} differ only in case")
        _, version, _, file_tags = parse_wheel_filename(self.filename)
        wheel_file = self.read(f"{self.dist_info}/WHEEL", config.MiB)
        problems += _wheel_file_problems(wheel_file, file_tags, self.name.build_tag)
        metadata = self.read(f"{self.dist_info}/METADATA", config.MiB)
        names = [canonicalize_name(n) for n in header_values(metadata, "Name")]
        versions = header_values(metadata, "Version")
        try:
            same = names == [self.name.name] and [Version(v) for v in versions] == [version]
        except InvalidVersion:
            same = False
        if not same:
            problems.append("METADATA's Name or Version is not the file name's")
        return list(dict.fromkeys(problems))

    def validate_record(self) -> None:
        """Check the wheel as pip and installer would before trusting it (for unlocked bases):
        the layout, then every member's name, type, mode, size and sha256 against RECORD and
        its compressed bytes against its size and CRC; all problems at once."""
        total = sum(info.file_size for info in self.infos)
        if total > min(MAX_UNPACKED_BYTES, MAX_UNPACKED_RATIO * len(self.data)):
            raise self.refused(f"its members unpack to {total} bytes: a zip bomb or not a wheel")
        record, problems = self.record(), self._layout_problems()
        skipped = {f"{self.dist_info}/{n}" for n in ("RECORD", *RECORD_SIGNATURES)}
        for info in self.infos:
            name, mode = info.filename, info.external_attr >> 16
            parts = name.rstrip("/").split("/")
            if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
                problems.append(f"{ascii(name)} is not a plain relative path")
            elif stat.S_IFMT(mode) not in (0, stat.S_IFREG, stat.S_IFDIR if info.is_dir() else 0):
                problems.append(f"{ascii(name)} is not a regular file (mode {mode:o})")
            elif mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
                problems.append(f"{ascii(name)} has a setuid, setgid or sticky bit (mode {mode:o})")
            elif info.flag_bits & 0x1 or info.compress_type not in (0, zipfile.ZIP_DEFLATED):
                problems.append(f"{ascii(name)} is encrypted or compressed otherwise than deflate")
            elif not info.is_dir():
                data = self.inflate_exactly(info)
                listed = record.pop(name, None) if name not in skipped else None
                if name not in skipped and listed != (record_hash(data), str(len(data))):
                    problems.append(f"{ascii(name)} differs from RECORD or is not listed there")
        absent = [name for name in record if name not in skipped]  # listed, not in the zip
        problems += [f"RECORD lists {ascii(name)}, which the wheel lacks" for name in absent]
        if problems:
            shown = "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else "")
            raise PatchError(
                f"{self.filename}: {shown}; the wheel was changed or damaged after it was built, "
                "use the official wheel"
            )


class Entry(NamedTuple):
    """One member of the wheel to write; its bytes stored, or as the base compressed them."""

    name: str
    date_time: DateTime
    external_attr: int
    create_system: int
    compress_type: int
    crc: int
    file_size: int
    payload: bytes  # the member's bytes as written: stored data, or the base's deflate stream

    @classmethod
    def stored(
        cls, name: str, data: bytes, template: zipfile.ZipInfo, date_time: Optional[DateTime]
    ) -> "Entry":
        """A member written anew, stored, with the time and mode of the ``template`` entry."""
        return cls(
            name=name,
            date_time=date_time or template.date_time,
            external_attr=template.external_attr,
            create_system=template.create_system,
            compress_type=zipfile.ZIP_STORED,
            crc=zlib.crc32(data),
            file_size=len(data),
            payload=data,
        )

    @classmethod
    def copied(cls, name: str, info: zipfile.ZipInfo, base: BaseWheel) -> "Entry":
        """A member of the base, its compressed bytes copied (:meth:`BaseWheel.payload`)."""
        return cls(
            name=name,
            date_time=info.date_time,
            external_attr=info.external_attr,
            create_system=info.create_system,
            compress_type=info.compress_type,
            crc=info.CRC,
            file_size=info.file_size,
            payload=base.payload(info),
        )


def record_text(rows: Sequence[Tuple[str, str, str]]) -> bytes:
    """RECORD of ``rows`` (path, hash, size), as csv writes it, with ``\\n`` line ends."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode("utf-8")


def write_zip(entries: Sequence[Entry]) -> bytes:
    """The zip file of ``entries`` in their order: byte for byte a function of the entries."""
    if len(entries) >= 0xFFFF:
        raise PatchError("the patched wheel would hold more than 65534 members; report this")
    body: List[bytes] = []  # joined once at the end: each payload is copied once
    central: List[bytes] = []
    offset = 0
    for entry in entries:
        name = entry.name.encode("utf-8")
        if max(entry.file_size, len(entry.payload), offset) >= 0xFFFFFFFF:
            raise PatchError(f"{entry.name}: 4 GiB or more, which this writer does not hold")
        year, month, day, hour, minute, second = entry.date_time
        date = (max(year, 1980) - 1980) << 9 | month << 5 | day
        clock = hour << 11 | minute << 5 | second // 2
        flags = 0 if entry.name.isascii() else 0x800  # UTF-8 names, as zipfile marks them
        sizes = (entry.crc, len(entry.payload), entry.file_size, len(name))
        # Both headers share (version 20, flags, method, time, date, CRC, sizes, name length);
        # the central one then packs (extra, comment, disk, internal attributes) as zeros, the
        # mode and the local header's offset.
        fields = (20, flags, entry.compress_type, clock, date, *sizes)
        body += [struct.pack("<4s5H3L2H", b"PK\x03\x04", *fields, 0), name, entry.payload]
        made_by = entry.create_system << 8 | 20
        rest = (0, 0, 0, 0, entry.external_attr, offset)
        header = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", made_by, *fields, *rest)
        central += [header, name]
        offset += 30 + len(name) + len(entry.payload)
    # The end record: (disk, directory's disk, entries here, entries in all, directory size,
    # directory offset, comment length).
    directory, count = b"".join(central), len(entries)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, len(directory), offset, 0)
    return b"".join(body + [directory, end])
