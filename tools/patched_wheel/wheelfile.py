"""The one path that reads, verifies and writes wheels.

:class:`WheelReader` opens a wheel and checks every member against RECORD (sha256 and size)
before anything is read from it; :class:`WheelWriter` writes members in a fixed order and
computes RECORD when it closes. RECORD is never edited as text.

Untouched members are written with their own ``ZipInfo`` (timestamp, mode, compression), with
the ZIP64 extra field dropped so that ``zipfile`` decides afresh. Members the build writes
take their timestamp from ``SOURCE_DATE_EPOCH`` where it is set (not before 1980, the first
time a zip file can hold), otherwise from the member of the base they replace, so the same
base and overlay give the same bytes.
"""

from __future__ import annotations

import base64
import copy
import csv
import hashlib
import io
import os
import struct
import time
import zipfile
import zlib
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from patched_wheel import PatchError

__all__ = [
    "WheelReader",
    "WheelWriter",
    "record_hash",
    "sha256_of_file",
    "zip_date_time",
]

# Signatures of RECORD; they cannot stay valid once RECORD changes, so they are dropped.
RECORD_SIGNATURES = ("RECORD.jws", "RECORD.p7s")

# The earliest time a zip entry can carry: 1980-01-01 00:00:00 UTC.
ZIP_EPOCH_FLOOR = 315532800

# Header id of the ZIP64 extended-information extra field.
ZIP64_EXTRA_ID = 0x0001


def record_hash(data: bytes) -> str:
    """The hash of ``data`` as RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def sha256_of_file(path: Path) -> str:
    """The hex sha256 of a file, as the lock and ``pip hash`` write it."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def zip_date_time(epoch: Optional[str]) -> Optional[Tuple[int, int, int, int, int, int]]:
    """The zip time of ``SOURCE_DATE_EPOCH`` (UTC, floored at 1980), or ``None`` if unset."""
    if epoch is None or epoch == "":
        return None
    try:
        seconds = int(epoch)
    except ValueError:
        raise PatchError(
            f"SOURCE_DATE_EPOCH={epoch!r} is not a whole number of seconds; "
            "set it to an integer such as 315532800, or unset it"
        ) from None
    return time.gmtime(max(seconds, ZIP_EPOCH_FLOOR))[0:6]


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


def _dist_info_dir(names: List[str], filename: str) -> str:
    """The one top-level ``*.dist-info`` directory that holds a RECORD."""
    found = sorted(
        {name.split("/")[0] for name in names if name.count("/") == 1}
        & {name.split("/")[0] for name in names if name.endswith(".dist-info/RECORD")}
    )
    if len(found) != 1:
        raise PatchError(
            f"{filename}: expected one .dist-info directory with a RECORD, found "
            f"{len(found)}; this is not a wheel the build can patch, use an official one"
        )
    return found[0]


class WheelReader:
    """An open wheel whose members all match its RECORD.

    ``filename`` is the wheel's name where ``path`` is a temporary one.

    Opening checks that the file is a complete zip, that every file in it is listed in RECORD
    with its sha256 and size, and that every entry of RECORD is in it.

    Raises:
        PatchError: For a truncated or invalid zip, a bad file name, or any mismatch with
            RECORD.
    """

    def __init__(self, path: Path, *, filename: Optional[str] = None) -> None:
        self.path = Path(path)
        self.filename = filename or self.path.name
        try:
            self.name, self.version, _, self.tags = parse_wheel_filename(self.filename)
        except InvalidWheelFilename as error:
            raise PatchError(
                f"{self.filename!r} is not a wheel file name ({error}); "
                "pass the wheel as pip downloaded it, without renaming it"
            ) from None
        try:
            self._zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise PatchError(
                f"{self.filename}: not a valid zip file ({error}); the download may be "
                "truncated, delete it and download it again"
            ) from None
        self._verified: Dict[str, bytes] = {}
        try:
            self.infos = self._zip.infolist()
            self.dist_info = _dist_info_dir([info.filename for info in self.infos], self.filename)
            self._verify_record()
        except BaseException:
            self._zip.close()
            raise

    def __enter__(self) -> "WheelReader":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._verified.clear()

    @property
    def record_name(self) -> str:
        return f"{self.dist_info}/RECORD"

    def read(self, name: str) -> bytes:
        """The bytes of member ``name`` (already checked against RECORD)."""
        if name in self._verified:
            return self._verified[name]
        try:
            return self._zip.read(name)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as error:
            raise PatchError(
                f"{self.filename}: cannot read {name} ({error}); the file is damaged, "
                "delete it and download it again"
            ) from None

    def files(self) -> Iterator[Tuple[zipfile.ZipInfo, bytes]]:
        """Every member with its bytes, directories (empty) included, in the zip's order."""
        for info in self.infos:
            yield info, b"" if info.is_dir() else self.read(info.filename)

    def _parse_record(self) -> Dict[str, Tuple[str, str]]:
        text = self.read(self.record_name).decode("utf-8")
        entries: Dict[str, Tuple[str, str]] = {}
        for row in csv.reader(io.StringIO(text)):
            if not row:
                continue
            if len(row) != 3:
                raise PatchError(
                    f"{self.filename}: RECORD row {row!r} does not have 3 fields; "
                    "the wheel is damaged, download it again"
                )
            entries[row[0]] = (row[1], row[2])
        return entries

    def _verify_record(self) -> None:
        record = self._parse_record()
        skipped = {self.record_name} | {f"{self.dist_info}/{s}" for s in RECORD_SIGNATURES}
        members = [info for info in self.infos if not info.is_dir()]
        for info in members:
            if info.filename in skipped:
                continue
            if info.filename not in record:
                raise PatchError(
                    f"{self.filename}: {info.filename} is not listed in RECORD; the wheel was "
                    "changed after it was built, use the official wheel"
                )
            self._verify_member(info, *record[info.filename])
        missing = sorted(set(record) - {info.filename for info in members} - skipped)
        if missing:
            raise PatchError(
                f"{self.filename}: RECORD lists {missing[0]}, which the wheel lacks; the wheel "
                "is incomplete, download it again"
            )

    def _verify_member(self, info: zipfile.ZipInfo, hash_field: str, size_field: str) -> None:
        algorithm, _, _ = hash_field.partition("=")
        if algorithm != "sha256":
            raise PatchError(
                f"{self.filename}: RECORD gives {info.filename} a {algorithm or 'missing'!r} "
                "hash, not sha256; use the official wheel"
            )
        data = self.read(info.filename)
        if record_hash(data) != hash_field or size_field != str(len(data)):
            raise PatchError(
                f"{self.filename}: {info.filename} does not match its RECORD hash or size; the "
                "file was edited or damaged after the wheel was built, use the official wheel"
            )
        self._verified[info.filename] = data


class WheelWriter:
    """Writes a wheel's members sorted, its ``.dist-info`` last, and RECORD on close.

    Args:
        path: The zip to create.
        dist_info: The name of the new wheel's ``.dist-info`` directory.
    """

    def __init__(self, path: Path, dist_info: str) -> None:
        self.path = Path(path)
        self.dist_info = dist_info
        self._members: Dict[str, Tuple[zipfile.ZipInfo, bytes]] = {}

    def add(self, info: zipfile.ZipInfo, data: bytes, *, name: Optional[str] = None) -> None:
        """Add a member with a copy of ``info`` (renamed to ``name``) and the given bytes."""
        new_info = copy.copy(info)
        new_info.filename = name if name is not None else info.filename
        new_info.extra = _strip_zip64_extra(info.extra)
        self._members[new_info.filename] = (new_info, data)

    def _order(self, name: str) -> Tuple[int, str]:
        if name == f"{self.dist_info}/RECORD":
            return (2, name)
        return (1 if name.startswith(f"{self.dist_info}/") else 0, name)

    def close(self) -> None:
        """Write every member and a RECORD computed from them."""
        record_name = f"{self.dist_info}/RECORD"
        if record_name not in self._members:
            record_info = zipfile.ZipInfo(record_name, date_time=(1980, 1, 1, 0, 0, 0))
            record_info.external_attr = 0o100644 << 16
            record_info.compress_type = zipfile.ZIP_DEFLATED
            self._members[record_name] = (record_info, b"")
        names = sorted(self._members, key=self._order)
        rows = [
            [name, record_hash(data), str(len(data))]
            for name in names
            for info, data in [self._members[name]]
            if not info.is_dir() and name != record_name
        ]
        rows.append([record_name, "", ""])
        record = io.StringIO()
        csv.writer(record, lineterminator="\n").writerows(rows)
        record_info = self._members[record_name][0]
        self._members[record_name] = (record_info, record.getvalue().encode("utf-8"))
        with zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in names:
                info, data = self._members[name]
                archive.writestr(info, data)


def remove_quietly(path: Path) -> None:
    """Remove ``path`` if it exists (a half-written output)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
