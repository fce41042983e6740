"""The wheel format (wheel.py): names, members, times and RECORD, as the tool reads them."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any, Dict

import pytest
from patched_wheel import PatchError
from patched_wheel.config import TARGET
from patched_wheel.wheel import parse_wheel_name, zip_date_time

from tests.patched_wheel.helpers import (
    Released,
    build,
    judge,
    marked,
    names,
    refusal,
    run_tool,
    verify,
)


def test_a_build_tag_is_refused_by_verify_and_index(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    version, tags = wheel.name.split("-", 2)[1:]
    tagged = wheel.with_name(f"torch_tensorrt-{version}-999-{tags}")
    wheel.rename(tagged)
    status, report = verify(repo, tagged, lock, cache)
    assert status == 1
    names(report.splitlines()[-1], "NOT verified", "'999'")
    done = run_tool(repo, "index", str(tagged.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, tagged.name, "'999'")
    assert not (tagged.parent / "simple").exists()


def test_a_wheel_of_many_tiny_members_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    import tracemalloc

    from patched_wheel.verify import read_provenance

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for number in range(70000):
            archive.writestr(f"{number}", b"")
    data = out.getvalue()
    name = "torch_tensorrt-2.99.0+memfix1.3-cp311-cp311-linux_x86_64.whl"
    tracemalloc.start()
    with pytest.raises(PatchError) as refused:
        read_provenance(data, name)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(data), (peak, len(data))
    names(refused.value, name)


@pytest.mark.parametrize(
    "epoch, expected",
    [
        pytest.param("0", (1980, 1, 1, 0, 0, 0), id="floor"),
        pytest.param("1700000000", (2023, 11, 14, 22, 13, 20), id="2023"),
    ],
)
def test_source_date_epoch_sets_the_new_members_time(epoch: str, expected: tuple) -> None:
    assert zip_date_time(epoch) == expected


def test_a_zip_that_understates_its_members_is_counted_by_its_directory(tmp_path: Path) -> None:
    """The end record's member count is the zip's word about itself: stated as 2 over a
    directory of 70,000 members, the wheel is still refused before zipfile parses it (the
    stated count let 100 MB of directory cost 1.3 GB), by verify's reader and the build's."""
    import struct
    import tracemalloc

    from patched_wheel.verify import read_provenance
    from patched_wheel.wheel import BaseWheel

    # 70,000 central headers of one-byte names (no ZIP64, whose count zipfile would take),
    # the end record stating 2; zipfile lists a directory without reading local headers.
    header = struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 1, *[0] * 6)
    directory = (header + b"x") * 70000
    stated = directory + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 2, 2, len(directory), 0, 0)
    name = "torch_tensorrt-2.99.0+memfix1.3-cp311-cp311-linux_x86_64.whl"
    for read in (
        lambda: read_provenance(stated, name),
        lambda: BaseWheel(stated, name, sha256="0"),
    ):
        tracemalloc.start()
        with pytest.raises(PatchError) as refused:
            read()
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < len(stated) // 4, (peak, len(stated))
        names(refused.value, name, "65534")


def test_a_hostile_tag_line_is_not_expanded(tmp_path: Path) -> None:
    """A WHEEL Tag line of dotted parts expands to the product of their lengths (here a million
    tags from 1.4 KB): an unlocked base with one is refused without expanding it."""
    import tracemalloc

    from patched_wheel.lock import Lock, open_base
    from patched_wheel.settings import BaseChoice

    from tests.patched_wheel.helpers import make_wheel

    parts = "-".join(".".join(f"{kind}{n}" for n in range(100)) for kind in "iap")
    wheel_file = f"Wheel-Version: 1.0\nTag: {parts}\n".encode()
    base = make_wheel(tmp_path, {"torch_tensorrt-2.99.0.dist-info/WHEEL": wheel_file})
    tracemalloc.start()
    with pytest.raises(PatchError) as refused:
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20, peak
    names(refused.value, base.name, "WHEEL's Tag")


def _with_changed_module(data: bytes) -> bytes:
    """``data`` re-zipped with a line added to the target module (so that verify diffs it)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            extra = b"# changed\n" if info.filename == TARGET else b""
            target.writestr(info, source.read(info) + extra, zipfile.ZIP_DEFLATED)
    return out.getvalue()


@pytest.mark.parametrize(
    "member, how",
    [
        pytest.param("sboms/patched_wheel.cdx.json", dict(encrypted=True), id="record-encrypted"),
        pytest.param("sboms/patched_wheel.cdx.json", dict(method=12), id="record-bz2"),
        pytest.param("sboms/patched_wheel.cdx.json", dict(method=14), id="record-lzma"),
        pytest.param(TARGET, dict(encrypted=True), id="changed-module-encrypted"),
        pytest.param(TARGET, dict(method=12), id="changed-module-bz2"),
    ],
)
def test_a_member_marked_encrypted_or_bz2_is_refused_in_one_line(
    released: Released, member: str, how: Dict[str, Any]
) -> None:
    """A wheel this tool writes holds stored and deflated members only: one marked encrypted,
    bz2 or lzma (its bytes deflated, so zipfile fails on them) is named in one line by
    verify, provenance and index, never a traceback."""
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    dist_info = parse_wheel_name(wheel.name).dist_info
    name = f"{dist_info}/{member}" if member.startswith("sboms") else member
    data = wheel.read_bytes() if name != TARGET else _with_changed_module(wheel.read_bytes())
    wheel.write_bytes(marked(data, name, **how))
    verification = judge(released, wheel.read_bytes(), wheel.name)
    assert not verification.verified
    shown = [line for line in [*verification.lines, verification.verdict] if name in line]
    assert shown and all("\n" not in line for line in shown), verification.report()
    if name != TARGET:
        refusal(run_tool(repo, "provenance", str(wheel)), name)
        index = run_tool(
            repo, "index", str(wheel.parent), "--lock", str(lock), "--cache", str(cache)
        )
        refusal(index, name)


def test_an_unlocked_base_with_an_encrypted_record_is_refused_in_one_line(tmp_path: Path) -> None:
    from patched_wheel.lock import Lock, open_base
    from patched_wheel.settings import BaseChoice

    from tests.patched_wheel.helpers import make_wheel

    base = make_wheel(tmp_path)
    record = "torch_tensorrt-2.99.0.dist-info/RECORD"
    for how in (dict(encrypted=True), dict(method=14)):
        base.write_bytes(marked(make_wheel(tmp_path).read_bytes(), record, **how))
        with pytest.raises(PatchError) as refused:
            open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
        names(refused.value, base.name, record)


@pytest.mark.parametrize("past", [100, -10], ids=["past-the-end", "in-the-end-record"])
def test_a_member_whose_entry_points_outside_the_file_is_refused_in_one_line(
    tmp_path: Path, past: int
) -> None:
    """The central directory's offset of a member's local header is the zip's word about
    itself: pointing past the file, or where no local header is, it is one line, not a
    traceback from the copy of the member's bytes."""
    import struct

    from patched_wheel.lock import Lock, open_base
    from patched_wheel.settings import BaseChoice

    from tests.patched_wheel.helpers import make_wheel

    base = make_wheel(tmp_path)
    data = bytearray(base.read_bytes())
    member = b"torch_tensorrt/bin/torchtrtc"
    entry = data.find(member, data.find(b"PK\x01\x02")) - 46
    assert data[entry : entry + 4] == b"PK\x01\x02"
    struct.pack_into("<L", data, entry + 42, len(data) + past)
    base.write_bytes(bytes(data))
    with pytest.raises(PatchError) as refused:
        open_base(BaseChoice(wheel=base, unlocked=True), lock=Lock({}))
    names(refused.value, base.name, "torchtrtc")
