"""The writer: what it writes is read back and verified, and stale ZIP64 fields are dropped.

Both tests fail if the step they test is turned into a no-op: a writer that corrupts a member
(standing in for a failing disk or a bug in the write) must not leave a wheel behind, and a
base whose members carry ZIP64 extra fields must give a patched wheel without them.
"""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from wheel_helpers import LABEL, TARGET, Member, craft, lock_for

ZIP64 = 0x0001


def extra_fields(extra: bytes) -> Iterator[Tuple[int, bytes]]:
    offset = 0
    while offset + 4 <= len(extra):
        header_id, size = struct.unpack_from("<HH", extra, offset)
        yield header_id, extra[offset + 4 : offset + 4 + size]
        offset += 4 + size


def local_extras(path: Path) -> Dict[str, bytes]:
    """Member name -> the extra field of its local header, read from the raw bytes."""
    data = path.read_bytes()
    found = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            name_length, extra_length = struct.unpack_from("<HH", data, info.header_offset + 26)
            start = info.header_offset + 30 + name_length
            found[info.filename] = data[start : start + extra_length]
    return found


@pytest.fixture
def official(base_wheels: Dict[str, Path]) -> Path:
    return base_wheels["2.14.0"]


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param("flip", id="member-written-wrong"),
        pytest.param("skip", id="member-not-written"),
    ],
)
def test_a_wheel_written_wrong_is_refused_and_removed(
    official: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    victim = TARGET  # written anew (untouched members are copied compressed, not written)
    write = zipfile.ZipFile.writestr

    def faulty(self: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes, *a: object) -> None:
        if isinstance(info, zipfile.ZipInfo) and info.filename == victim:
            if fault == "skip":
                return
            data = data[:-1] + bytes([data[-1] ^ 1])
        write(self, info, data, *a)  # type: ignore[arg-type]

    base = read_base(official, lock=lock_for(official))  # read before the fault goes in
    monkeypatch.setattr(zipfile.ZipFile, "writestr", faulty)
    out_dir = tmp_path / "out"
    with pytest.raises(PatchError) as error:
        build_patched_wheel(base, out_dir=out_dir)
    problem = "does not match its RECORD hash" if fault == "flip" else "which the wheel lacks"
    name = re.escape(f"torch_tensorrt-2.14.0+{LABEL}-")
    assert re.match(rf"^{name}.*\.whl: .*" + problem, str(error.value))
    assert list(out_dir.iterdir()) == []


def test_stale_zip64_extra_fields_are_refused(official: Path, tmp_path: Path) -> None:
    """A ZIP64 field whose sizes the header does not mark as wide: readers differ on it."""
    stale = struct.pack("<HHQQ", ZIP64, 16, 1 << 40, 1 << 40)  # sizes no member has

    def with_zip64(entries: List[Member]) -> List[Member]:
        for info, _ in entries:
            info.extra = stale + info.extra
            info.compress_type = zipfile.ZIP_STORED  # only to keep the test fast
        return entries

    base = craft(official, tmp_path / "base", with_zip64)
    with pytest.raises(PatchError, match="has a ZIP64 extra field that does not match its header"):
        read_base(base, lock=lock_for(base))


def test_zip64_extra_fields_of_the_base_are_not_copied(official: Path, tmp_path: Path) -> None:
    """Members written with ZIP64 local headers (as ``force_zip64`` does) are read, and the
    patched wheel carries no ZIP64 field: the writer adds one only where sizes need it."""
    base = tmp_path / "base" / official.name
    base.parent.mkdir()
    with zipfile.ZipFile(official) as source, zipfile.ZipFile(base, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            info.compress_type = zipfile.ZIP_STORED  # only to keep the test fast
            with target.open(info, "w", force_zip64=not info.is_dir()) as stream:
                stream.write(data)
    assert any(ZIP64 in dict(extra_fields(e)) for e in local_extras(base).values())
    patched = build_patched_wheel(read_base(base, lock=lock_for(base)), out_dir=tmp_path / "out")
    with zipfile.ZipFile(patched) as archive:
        central = {info.filename: info.extra for info in archive.infolist()}
    for extras in (central, local_extras(patched)):
        for name, extra in extras.items():
            assert ZIP64 not in [header_id for header_id, _ in extra_fields(extra)], name
    with zipfile.ZipFile(official) as archive:
        kept = {info.filename: info.extra for info in archive.infolist()}
    assert central["torch_tensorrt/_version.py"] == kept["torch_tensorrt/_version.py"] != b""
