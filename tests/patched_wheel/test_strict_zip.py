"""The strict reading of a zip: every trick on which zip readers differ, crafted byte by byte
from the real 2.14.0 wheel, is refused; what it accepts, ``zipfile`` reads the same way.

Each case below is one class of issue 17's "two readers, two trees": if the strict reader
accepted it, ``zipfile`` (and pip, which uses it) on some Python would install another tree
than the one the build hashed and ``verify`` checked.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from installers import OTHER_PYTHONS, installed_tree, pip_install, uv_install
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.wheelfile import read_wheel, read_zip
from wheel_helpers import TARGET, lock_for
from zip_craft import RawMember, deflated, join, members_of, stored, write

NAME = "torch_tensorrt-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
REFUSED = "; this is not a wheel the build can patch, use the official wheel"
DAMAGED = "; the download may be truncated, delete it and download it again"
NO_END = "not a valid zip file (its last 22 bytes are not a zip end record without comment)"
ROOT = Path(__file__).resolve().parents[2]

Parts = List[RawMember]
WINDOWS_PART = "ends in a dot or space, or names a Windows device, in one of its parts"
NOT_ASCII = (
    "is not ASCII, as every official wheel's names are (file systems normalise other names "
    "differently, and Python versions class their characters differently)"
)


@pytest.fixture(scope="module")
def parts(base_wheels: Dict[str, Path]) -> Parts:
    """The real 2.14.0 wheel taken apart, its compressed bytes untouched."""
    return members_of(base_wheels["2.14.0"])


def at(parts: Parts, name: str) -> int:
    return next(i for i, m in enumerate(parts) if m.name == name.encode())


def changed(member_name: str, **fields: object) -> Callable[[Parts], bytes]:
    """The wheel with the member ``member_name``'s record changed."""

    def craft(parts: Parts) -> bytes:
        index = at(parts, member_name)
        parts[index] = dataclasses.replace(parts[index], **fields)  # type: ignore[arg-type]
        return join(parts)

    return craft


def with_extra(
    field_id: int, payload: bytes, *, local_only: bool = False
) -> Callable[[Parts], bytes]:
    field = struct.pack("<HH", field_id, len(payload)) + payload

    def craft(parts: Parts) -> bytes:
        index = at(parts, TARGET)
        member = parts[index]
        local = (member.local_extra or b"") + field
        central = member.extra if local_only else member.extra + field
        parts[index] = dataclasses.replace(member, extra=central, local_extra=local)
        return join(parts)

    return craft


def unicode_path(name: str) -> bytes:
    """An Info-ZIP Unicode Path field (0x7075) for the target, naming ``name`` instead."""
    return b"\x01" + struct.pack("<L", zlib.crc32(TARGET.encode())) + name.encode()


def plus(*members: RawMember, **layout: object) -> Callable[[Parts], bytes]:
    return lambda parts: join(parts + list(members), **layout)  # type: ignore[arg-type]


def layout(**options: object) -> Callable[[Parts], bytes]:
    return lambda parts: join(parts, **options)  # type: ignore[arg-type]


def other_zip() -> bytes:
    return join([stored("torch_tensorrt/dynamo/utils.py", b"import os\nos.system('x')\n")])


def hidden_local_entry() -> bytes:
    member = deflated(".pth", b"import os\n")
    return member.local_header() + member.raw


def stored_longer(parts: Parts) -> bytes:
    """The target stored with its true bytes then a hostile tail inside its compressed size,
    the CRC forged for the longer file (``unzip`` extracts the tail; ``zipfile`` does not)."""
    index = at(parts, TARGET)
    member = parts[index]
    true = zlib.decompress(member.raw, -15)
    longer = true + b"\nimport os\n"
    parts[index] = dataclasses.replace(
        member, raw=longer, method=0, size=len(true), crc=zlib.crc32(longer)
    )
    return join(parts)


def descriptor_disagreeing(parts: Parts) -> bytes:
    index = at(parts, TARGET)
    member = parts[index]
    descriptor = struct.pack("<4sLLL", b"PK\x07\x08", member.crc ^ 1, len(member.raw), member.size)
    parts[index] = dataclasses.replace(
        member, flags=member.flags | 0x8, local_crc=0, local_sizes=(0, 0), descriptor=descriptor
    )
    return join(parts)


def name_marked_utf8_that_is_not(parts: Parts) -> bytes:
    index = at(parts, "torch_tensorrt/_version.py")
    parts[index] = dataclasses.replace(
        parts[index], name=b"torch_tensorrt/_v\xe9rsion.py", flags=0x800
    )
    return join(parts)


def member(name: str, text: bytes = b"x = 1\n", **fields: object) -> RawMember:
    return deflated(name, text, flags=0x800, **fields)


V = "torch_tensorrt/_version.py"

REFUSED_CASES = [
    pytest.param(
        with_extra(0x7075, unicode_path("torch_tensorrt/evil.py")),
        f"the member {TARGET!r} has the extra field 0x7075, which some readers read as another "
        "name, mode or size",
        id="unicode-path-extra",
    ),
    pytest.param(
        with_extra(0x7075, unicode_path("evil.pth"), local_only=True),
        f"the member {TARGET!r} has the extra field 0x7075, which some readers read as another "
        "name, mode or size",
        id="unicode-path-extra-local-only",
    ),
    pytest.param(
        with_extra(0x6375, b"\x01\x00\x00\x00\x00comment"),
        f"the member {TARGET!r} has the extra field 0x6375, which some readers read as another "
        "name, mode or size",
        id="unicode-comment-extra",
    ),
    pytest.param(
        with_extra(0x000D, b"\x00" * 12 + b"/etc/passwd"),
        f"the member {TARGET!r} has the extra field 0x000d, which some readers read as another "
        "name, mode or size",
        id="pkware-unix-link-extra",
    ),
    pytest.param(
        changed(TARGET, local_name=b"torch_tensorrt/dynamo/utilz.py"),
        f"the member {TARGET!r} has a local header that differs from its entry",
        id="local-name-differs",
    ),
    pytest.param(
        changed(TARGET, local_crc=0),
        f"the member {TARGET!r} has a local header that differs from its entry",
        id="local-crc-differs",
    ),
    pytest.param(
        changed(TARGET, local_sizes=(10, 10)),
        f"the member {TARGET!r} has a local header that differs from its entry",
        id="local-sizes-differ",
    ),
    pytest.param(
        changed(TARGET, local_method=0),
        f"the member {TARGET!r} has a local header that differs from its entry",
        id="local-method-differs",
    ),
    pytest.param(
        changed(TARGET, local_flags=0x8),
        f"the member {TARGET!r} has a local header that differs from its entry",
        id="descriptor-flag-only-local",
    ),
    pytest.param(
        descriptor_disagreeing,
        f"the member {TARGET!r} has a data descriptor that differs",
        id="descriptor-disagrees",
    ),
    pytest.param(
        layout(prefix=other_zip(), shift_offsets=False),
        "its central directory is not where its end record says",
        id="second-zip-before-the-first-member",
    ),
    pytest.param(
        layout(prefix=b"#!/bin/sh\n", shift_offsets=True),
        "the member 'torch_tensorrt/' does not start where the one before it ends (bytes "
        "before, between or hidden among its members)",
        id="bytes-before-with-offsets-shifted",
    ),
    pytest.param(
        layout(between=hidden_local_entry()),
        "bytes lie between its last member and its central directory",
        id="hidden-local-entry",
    ),
    pytest.param(
        lambda parts: changed(TARGET, raw=parts[at(parts, TARGET)].raw + b"evil")(parts),
        f"the member {TARGET!r} does not unpack to its header's size",
        id="bytes-after-the-deflate-stream",
    ),
    pytest.param(
        stored_longer,
        f"the member {TARGET!r} is stored with a compressed size other than its size",
        id="stored-longer-than-its-size",
    ),
    pytest.param(
        changed(TARGET, crc=0, local_crc=0),
        f"the member {TARGET!r} does not match its CRC",
        id="crc-wrong-in-both-headers",
    ),
    pytest.param(
        layout(count_delta=-1),
        "its central directory holds more entries than its end record says",
        id="entry-count-too-small",
    ),
    pytest.param(
        layout(count_delta=1),
        "its central directory holds fewer entries than its end record says",
        id="entry-count-too-large",
    ),
    pytest.param(
        layout(offset_delta=1 << 30),
        "its central directory is not where its end record says",
        id="central-directory-offset-past-the-file",
    ),
    pytest.param(
        name_marked_utf8_that_is_not,
        "a member's name is marked UTF-8 but is not",
        id="name-marked-utf8-that-is-not",
    ),
    pytest.param(
        changed(V, name="torch_tensorrt/_v\xe9rsion.py".encode("cp437"), local_name=None),
        "the member b'torch_tensorrt/_v\\x82rsion.py' is not ASCII and not marked UTF-8",
        id="name-in-cp437",
    ),
    pytest.param(
        plus(member("torch_tensorrt/caf\u00e9.py"), member("torch_tensorrt/cafe\u0301.py")),
        "the member " + ascii("torch_tensorrt/caf\u00e9.py") + " " + NOT_ASCII,
        id="unicode-normalisation-collision",
    ),
    pytest.param(
        plus(member("torch_tensorrt/\U0001fae8.py")),
        "the member " + ascii("torch_tensorrt/\U0001fae8.py") + " " + NOT_ASCII,
        id="character-newer-than-some-pythons",
    ),
    pytest.param(
        plus(member(f"{V}/x.py")),
        f"the member '{V}/x.py' lies under the file '{V}'",
        id="member-under-a-file",
    ),
    pytest.param(
        plus(member("torch_tensorrt/\x1b[2K\rverified.py")),
        "the member 'torch_tensorrt/\\x1b[2K\\rverified.py' holds a control character",
        id="escape-sequence-in-a-name",
    ),
    pytest.param(
        plus(member("torch_tensorrt/\u202eyp.evil")),
        "the member " + ascii("torch_tensorrt/\u202eyp.evil") + " " + NOT_ASCII,
        id="bidi-override-in-a-name",
    ),
    pytest.param(
        plus(member("torch_tensorrt/dynamo/utils.py.")),
        "the member 'torch_tensorrt/dynamo/utils.py.' " + WINDOWS_PART,
        id="trailing-dot-is-utils-on-windows",
    ),
    pytest.param(
        plus(member("torch_tensorrt/dynamo/utils.py ")),
        "the member 'torch_tensorrt/dynamo/utils.py ' " + WINDOWS_PART,
        id="trailing-space-is-utils-on-windows",
    ),
    pytest.param(
        plus(member("torch_tensorrt/dynamo/utils.py:evil")),
        "the member 'torch_tensorrt/dynamo/utils.py:evil' holds a character Windows reads "
        'otherwise (<>:"|?*)',
        id="alternate-data-stream",
    ),
    pytest.param(
        plus(member("torch_tensorrt/nul.py")),
        "the member 'torch_tensorrt/nul.py' " + WINDOWS_PART,
        id="windows-device-name",
    ),
    pytest.param(
        changed(V, version_needed=63),
        f"the member '{V}' needs zip version 63 (system 0), beyond 4.5",
        id="version-needed-63",
    ),
    pytest.param(
        changed(V, disk=1),
        f"the member '{V}' has a comment, or lies on another disk",
        id="disk-number-1",
    ),
    pytest.param(
        changed(V, made_by=(19 << 8) | 20),
        f"the member '{V}' was made by system 19, not MS-DOS or Unix, or has odd attributes",
        id="made-by-another-system",
    ),
    pytest.param(
        changed(V, flags=0x40, local_flags=0x40),
        f"the member '{V}' has the flags 0x0040, beyond UTF-8 name and data descriptor",
        id="strong-encryption-flag",
    ),
    pytest.param(
        plus(stored("torch_tensorrt/folder/", b"data", external_attr=0o40755 << 16)),
        "the member 'torch_tensorrt/folder/' is a folder entry with contents or another file "
        "type",
        id="folder-entry-with-data",
    ),
    pytest.param(
        changed(V, external_attr=0o120777 << 16),
        f"the member '{V}' is not a regular file (mode 120777: a symlink, folder or device)",
        id="symlink-mode-bits",
    ),
]

DAMAGED_CASES = [
    pytest.param(layout(trailing=b"\0" * 40), id="bytes-after-the-end-record"),
    pytest.param(layout(comment=b"a comment"), id="archive-comment"),
    pytest.param(lambda parts: join(parts)[:-1], id="truncated"),
]


@pytest.mark.parametrize(("craft", "problem"), REFUSED_CASES)
def test_a_zip_that_readers_would_read_differently_is_refused(
    parts: Parts, tmp_path: Path, craft: Callable[[Parts], bytes], problem: str
) -> None:
    base = write(tmp_path / NAME, craft(copy.deepcopy(parts)))
    with pytest.raises(PatchError) as error:
        read_base(base, lock=lock_for(base))
    assert str(error.value) == f"{NAME}: {problem}{REFUSED}"


@pytest.mark.parametrize("craft", DAMAGED_CASES)
def test_bytes_after_the_end_record_are_refused(
    parts: Parts, tmp_path: Path, craft: Callable[[Parts], bytes]
) -> None:
    base = write(tmp_path / NAME, craft(copy.deepcopy(parts)))
    with pytest.raises(PatchError) as error:
        read_base(base, lock=lock_for(base))
    assert str(error.value) == f"{NAME}: {NO_END}{DAMAGED}"


def with_descriptors(parts: Parts) -> bytes:
    """Every file's CRC and sizes in a data descriptor after its data, as a streaming writer
    puts them: a form the format allows, and which the strict reader reads."""
    for index, part in enumerate(parts):
        descriptor = struct.pack("<4sLLL", b"PK\x07\x08", part.crc, len(part.raw), part.size)
        parts[index] = dataclasses.replace(
            part, flags=part.flags | 0x8, local_crc=0, local_sizes=(0, 0), descriptor=descriptor
        )
    return join(parts)


@pytest.mark.parametrize(
    "craft", [pytest.param(join, id="as-joined"), pytest.param(with_descriptors, id="descriptors")]
)
def test_the_forms_the_format_allows_are_read_as_zipfile_reads_them(
    parts: Parts, base_wheels: Dict[str, Path], craft: Callable[[Parts], bytes]
) -> None:
    data = craft(copy.deepcopy(parts))
    wheel = read_wheel(data, NAME)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert {n: archive.read(n) for n in archive.namelist() if not n.endswith("/")} == dict(
            wheel.members
        )
    assert dict(wheel.members) == dict(read_wheel(base_wheels["2.14.0"].read_bytes(), NAME).members)


# --- The same verdict on every Python -------------------------------------------------------------


_VERDICTS = """
import json, sys
from pathlib import Path
from patched_wheel import PatchError
from patched_wheel.wheelfile import read_zip
verdicts = {}
for path in sorted(Path(sys.argv[1]).iterdir()):
    try:
        archive = read_zip(path.read_bytes(), path.name)
        verdicts[path.name] = [[m.info.filename, archive.unpack(m).hex()] for m in archive.members]
    except PatchError as error:
        verdicts[path.name] = str(error)
print(json.dumps(verdicts))
"""


def verdicts_on(python: str, folder: Path) -> Dict[str, object]:
    import packaging

    path = os.pathsep.join([str(ROOT / "tools"), str(Path(packaging.__file__).parents[1])])
    result = subprocess.run(
        [
            python,
            "-I",
            "-c",
            f"import sys; sys.path[:0] = {path.split(os.pathsep)!r}\n" + _VERDICTS,
            str(folder),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(not OTHER_PYTHONS, reason="no other Python interpreter on this machine")
def test_the_verdict_is_the_same_on_every_python(parts: Parts, tmp_path: Path) -> None:
    """Every case above, read by the strict reader on each Python at hand: the same verdict,
    word for word (the reader parses the bytes itself instead of asking ``zipfile``)."""
    cases = [case.values[0] for case in REFUSED_CASES + DAMAGED_CASES] + [join, with_descriptors]
    for number, craft in enumerate(cases):
        write(tmp_path / "cases" / f"{number:02d}.whl", craft(copy.deepcopy(parts)))
    here = verdicts_on(sys.executable, tmp_path / "cases")
    assert sum(isinstance(v, list) for v in here.values()) == 2
    for python in OTHER_PYTHONS:
        assert verdicts_on(str(python), tmp_path / "cases") == here, python


# --- Whatever the strict reader accepts, zipfile reads the same way ------------------------------


@pytest.fixture(scope="module")
def small_parts(parts: Parts) -> Parts:
    """The real wheel cut to its .dist-info and a few sources (mutations hit headers more)."""
    kept = ("torch_tensorrt/", "torch_tensorrt/_version.py", TARGET, "torch_tensorrt/__init__.py")
    return [p for p in parts if p.name.decode() in kept or b".dist-info/" in p.name]


byte_edits = st.lists(
    st.tuples(st.sampled_from(["flip", "insert", "delete"]), st.integers(0), st.integers(1, 255)),
    min_size=1,
    max_size=4,
)
layouts = st.fixed_dictionaries(
    {
        "prefix": st.sampled_from([b"", b"PK\x03\x04", b"x" * 30]),
        "between": st.sampled_from([b"", b"\0", b"PK\x01\x02"]),
        "trailing": st.sampled_from([b"", b"\0"]),
        "comment": st.sampled_from([b"", b"c"]),
        "count_delta": st.integers(-1, 1),
        "offset_delta": st.sampled_from([0, -1, 1, 30]),
        "shift_offsets": st.booleans(),
    }
)


field_edits = st.lists(
    st.tuples(
        st.integers(0),
        st.one_of(
            st.tuples(st.just("name"), st.text(min_size=1, max_size=30)),
            st.tuples(st.just("flags"), st.sampled_from([0, 0x2, 0x4, 0x800, 0x806, 0x8, 0x1])),
            st.tuples(st.just("external_attr"), st.integers(0, 0xFFFFFFFF)),
            st.tuples(st.just("dos_time"), st.integers(0, 0xFFFF)),
            st.tuples(st.just("made_by"), st.integers(0, 0xFFFF)),
            st.tuples(st.just("version_needed"), st.sampled_from([10, 20, 45, 46, 63, 0x30A])),
            st.tuples(
                st.just("extra"),
                st.builds(
                    lambda i, b: struct.pack("<HH", i, len(b)) + b,
                    st.sampled_from([0x5455, 0x7875, 0x000A, 0x0001, 0x7075]),
                    st.binary(max_size=12),
                ),
            ),
        ),
    ),
    max_size=3,
)


def edited_fields(parts: Parts, edits: List[tuple]) -> Parts:  # type: ignore[type-arg]
    """``parts`` with some headers' fields changed, in both headers alike."""
    for index, (field, value) in edits:
        index %= len(parts)
        if field == "name":
            value = value.encode("utf-8", "surrogatepass")
            parts[index] = dataclasses.replace(parts[index], name=value, local_name=None)
        elif field == "extra":
            parts[index] = dataclasses.replace(parts[index], extra=value, local_extra=value)
        else:
            parts[index] = dataclasses.replace(parts[index], **{field: value})
    return parts


def edited_bytes(data: bytes, edits: List[tuple]) -> bytes:  # type: ignore[type-arg]
    buffer = bytearray(data)
    for kind, position, value in edits:
        position %= len(buffer) + 1
        if kind == "flip" and position < len(buffer):
            buffer[position] ^= value
        elif kind == "insert":
            buffer[position:position] = bytes([value])
        elif position < len(buffer):
            del buffer[position]
    return bytes(buffer)


def zipfile_reading(data: bytes) -> Dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {info.filename: archive.read(info) for info in archive.infolist()}


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    options=st.one_of(st.just({}), st.just({}), layouts),
    fields=field_edits,
    edits=st.one_of(st.just([]), st.just([]), byte_edits),
)
def test_whatever_the_strict_reader_accepts_zipfile_reads_alike(
    small_parts: Parts,
    options: Dict[str, object],
    fields: List[tuple],  # type: ignore[type-arg]
    edits: List[tuple],  # type: ignore[type-arg]
) -> None:
    """Random layouts, header fields and bytes from the real wheel: whenever the strict
    reader accepts, ``zipfile`` on this Python reads the same names and the same bytes."""
    parts = edited_fields(copy.deepcopy(small_parts), fields)
    data = edited_bytes(join(parts, **options), edits)  # type: ignore[arg-type]
    try:
        archive = read_zip(data, NAME)
        ours = {m.info.filename: archive.unpack(m) for m in archive.members}
    except PatchError:
        event("refused")
        return
    event("accepted")
    assert zipfile_reading(data) == ours


# --- Stricter than uv, and what pip and uv install is what was read ------------------------------


def files_outside_dist_info(members: Dict[str, bytes]) -> Dict[str, bytes]:
    return {n: d for n, d in members.items() if ".dist-info/" not in n}


ALL_CASES = [pytest.param(case.values[0], id=case.id) for case in REFUSED_CASES + DAMAGED_CASES] + [
    pytest.param(join, id="as-joined"),
    pytest.param(with_descriptors, id="descriptors"),
]


@pytest.mark.parametrize("craft", ALL_CASES)
def test_every_zip_uv_refuses_is_refused_and_what_both_accept_installs_as_read(
    parts: Parts, tmp_path: Path, craft: Callable[[Parts], bytes]
) -> None:
    """uv's reader is the strictest installer's: whatever it refuses, ours refuses; whatever
    ours accepts, uv installs file for file as ours read it. (Ours refuses more: see the
    report of issue 17.)"""
    wheel = write(tmp_path / "wheel" / NAME, craft(copy.deepcopy(parts)))
    try:
        ours = files_outside_dist_info(dict(read_wheel(wheel.read_bytes(), NAME).members))
    except PatchError:
        ours = None
    by_uv = uv_install(wheel, tmp_path / "uv")
    if by_uv.returncode != 0:
        assert ours is None, by_uv.stderr
    if ours is not None:
        assert by_uv.returncode == 0, by_uv.stderr
        assert installed_tree(tmp_path / "uv") == ours


PIP_PYTHONS = [sys.executable] + [str(p) for p in OTHER_PYTHONS]


@pytest.mark.parametrize("python", PIP_PYTHONS)
@pytest.mark.parametrize(
    "craft", [pytest.param(join, id="as-joined"), pytest.param(with_descriptors, id="descriptors")]
)
def test_pip_on_every_python_installs_what_the_strict_reader_read(
    parts: Parts, tmp_path: Path, craft: Callable[[Parts], bytes], python: str
) -> None:
    wheel = write(tmp_path / "wheel" / NAME, craft(copy.deepcopy(parts)))
    ours = files_outside_dist_info(dict(read_wheel(wheel.read_bytes(), NAME).members))
    result = pip_install(python, wheel, tmp_path / "pip")
    assert result.returncode == 0, result.stderr
    assert installed_tree(tmp_path / "pip") == ours


@pytest.mark.parametrize(
    "python", [str(p) for p in OTHER_PYTHONS if "3.1" in p.name and p.name >= "python3.12"]
)
def test_the_unicode_path_field_does_move_a_member_on_newer_pythons(
    parts: Parts, tmp_path: Path, python: str
) -> None:
    """The defect the strict reader guards against is real: pip on Python 3.12 and later
    installs the target under the name of the 0x7075 field, where 3.11 keeps its own."""
    craft = with_extra(0x7075, unicode_path("torch_tensorrt/dynamo/moved.py"))
    wheel = write(tmp_path / "wheel" / NAME, craft(copy.deepcopy(parts)))
    result = pip_install(python, wheel, tmp_path / "pip")
    assert result.returncode == 0, result.stderr
    tree = installed_tree(tmp_path / "pip")
    assert "torch_tensorrt/dynamo/moved.py" in tree and TARGET not in tree


def test_a_zip64_end_record_is_read_and_checked(
    base_wheels: Dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel written with ZIP64 end records (``zipfile`` does past 65,535 members) reads as
    the plain one; a ZIP64 end record whose count disagrees is refused."""
    from wheel_helpers import read_entries, write_entries

    entries = read_entries(base_wheels["2.14.0"])
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)
    wide = write_entries(tmp_path / NAME, entries)
    monkeypatch.undo()
    data = wide.read_bytes()
    assert data[-22 - 20 : -22 - 16] == b"PK\x06\x07"
    wheel = read_wheel(data, NAME)
    assert dict(wheel.members) == dict(read_wheel(base_wheels["2.14.0"].read_bytes(), NAME).members)
    record_at = len(data) - 22 - 20 - 56
    forged = bytearray(data)
    struct.pack_into("<Q", forged, record_at + 24, len(entries) + 1)  # entries on this disk
    struct.pack_into("<Q", forged, record_at + 32, len(entries) + 1)  # entries in all
    with pytest.raises(PatchError) as error:
        read_zip(bytes(forged), NAME)
    assert str(error.value) == (
        f"{NAME}: its ZIP64 end record and its end record disagree{REFUSED}"
    )
