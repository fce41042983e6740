"""Zips crafted byte by byte from a real wheel, for the strict reader's tests.

``zipfile`` cannot write most of what the strict reader must refuse (a local header that
differs from its central entry, bytes between members, a stored member longer than its size),
so the tests take a real wheel apart into :class:`RawMember` records (its compressed bytes
untouched), change the records or the layout, and join them again with :func:`join`.
"""

from __future__ import annotations

import dataclasses
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

LOCAL = struct.Struct("<4s2B4HL2L2H")
CENTRAL = struct.Struct("<4s4B4HL2L5H2L")
END = struct.Struct("<4s4H2LH")


@dataclass
class RawMember:
    """One member as its headers will say it; ``local_*`` fields override the local header."""

    name: bytes
    raw: bytes  # the compressed bytes
    method: int
    crc: int
    size: int
    flags: int = 0
    external_attr: int = 0o644 << 16
    extra: bytes = b""
    version_needed: int = 20
    made_by: int = (3 << 8) | 20
    disk: int = 0
    dos_time: int = 0
    dos_date: int = (40 << 9) | (1 << 5) | 1  # 2020-01-01
    local_name: Optional[bytes] = None
    local_flags: Optional[int] = None
    local_method: Optional[int] = None
    local_crc: Optional[int] = None
    local_sizes: Optional[tuple] = None  # type: ignore[type-arg]
    local_extra: Optional[bytes] = None
    descriptor: bytes = b""  # written after the data

    @property
    def compressed_size(self) -> int:
        return len(self.raw)

    def local_header(self) -> bytes:
        name = self.name if self.local_name is None else self.local_name
        extra = self.extra if self.local_extra is None else self.local_extra
        csize, size = self.local_sizes or (self.compressed_size, self.size)
        return (
            LOCAL.pack(
                b"PK\x03\x04",
                self.version_needed & 0xFF,
                self.version_needed >> 8,
                self.flags if self.local_flags is None else self.local_flags,
                self.method if self.local_method is None else self.local_method,
                self.dos_time,
                self.dos_date,
                self.crc if self.local_crc is None else self.local_crc,
                csize,
                size,
                len(name),
                len(extra),
            )
            + name
            + extra
        )

    def central_entry(self, offset: int) -> bytes:
        return (
            CENTRAL.pack(
                b"PK\x01\x02",
                self.made_by & 0xFF,
                self.made_by >> 8,
                self.version_needed & 0xFF,
                self.version_needed >> 8,
                self.flags,
                self.method,
                self.dos_time,
                self.dos_date,
                self.crc,
                self.compressed_size,
                self.size,
                len(self.name),
                len(self.extra),
                0,
                self.disk,
                0,
                self.external_attr,
                offset,
            )
            + self.name
            + self.extra
        )


def members_of(path: Path) -> List[RawMember]:
    """The members of a real wheel, with their compressed bytes as they are in the file."""
    data = path.read_bytes()
    found = []
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + name_length + extra_length
            raw = data[start : start + info.compress_size]
            local_extra = data[start - extra_length : start]
            year, month, day, hour, minute, second = info.date_time
            found.append(
                RawMember(
                    name=info.filename.encode("utf-8"),
                    raw=raw,
                    method=info.compress_type,
                    crc=info.CRC,
                    size=info.file_size,
                    flags=info.flag_bits & ~0x8,
                    external_attr=info.external_attr,
                    extra=info.extra,
                    local_extra=local_extra,
                    version_needed=info.extract_version,
                    made_by=(info.create_system << 8) | info.create_version,
                    dos_time=(hour << 11) | (minute << 5) | (second // 2),
                    dos_date=((year - 1980) << 9) | (month << 5) | day,
                )
            )
    return found


def stored(name: str, data: bytes, **fields: object) -> RawMember:
    """A stored member of ``data`` named ``name``."""
    member = RawMember(name.encode("utf-8"), data, 0, zlib.crc32(data), len(data))
    return dataclasses.replace(member, **fields)  # type: ignore[arg-type]


def deflated(name: str, data: bytes, **fields: object) -> RawMember:
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    raw = compressor.compress(data) + compressor.flush()
    member = RawMember(name.encode("utf-8"), raw, 8, zlib.crc32(data), len(data))
    return dataclasses.replace(member, **fields)  # type: ignore[arg-type]


def join(
    members: List[RawMember],
    *,
    prefix: bytes = b"",
    between: bytes = b"",
    trailing: bytes = b"",
    comment: bytes = b"",
    count_delta: int = 0,
    offset_delta: int = 0,
    shift_offsets: bool = True,
) -> bytes:
    """The zip of ``members``: ``prefix`` before the first, ``between`` after the last (before
    the central directory), ``trailing`` after the end record; the end record's count and
    central directory offset changed by the deltas. With ``shift_offsets``, the offsets count
    the prefix (a consistent zip that merely starts later); without, they do not (as when a
    zip is appended to other bytes, which ``zipfile`` still reads)."""
    body = bytearray(prefix)
    offsets = []
    for member in members:
        offsets.append(len(body) if shift_offsets else len(body) - len(prefix))
        body += member.local_header() + member.raw + member.descriptor
    body += between
    cd_offset = len(body) if shift_offsets else len(body) - len(prefix)
    central = b"".join(m.central_entry(o) for m, o in zip(members, offsets))
    end = END.pack(
        b"PK\x05\x06",
        0,
        0,
        len(members) + count_delta,
        len(members) + count_delta,
        len(central),
        cd_offset + offset_delta,
        len(comment),
    )
    return bytes(body) + central + end + comment + trailing


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
