"""The wheel reader and writer, and refusals of a damaged base, on small wheels."""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Callable, Optional

import pytest
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.overlay import read_overlay
from patched_wheel.plan import patched_version, rewrite_metadata_version
from patched_wheel.policy import LABEL_NAME
from patched_wheel.wheelfile import read_wheel, zip_date_time
from wheel_helpers import LABEL, lock_for

WheelFactory = Callable[..., Path]


def build(base: Path, out_dir: Path, overlay: Optional[Path] = None) -> Path:
    wheel = read_base(base, lock=lock_for(base))
    parsed = read_overlay(overlay) if overlay else None
    return build_patched_wheel(wheel, out_dir=out_dir, overlay=parsed)


def refused(base: Path, out_dir: Path, message: str) -> None:
    """The build of ``base`` fails with exactly ``message`` and leaves ``out_dir`` empty."""
    with pytest.raises(PatchError) as error:
        build(base, out_dir)
    assert error.match("^" + re.escape(message) + "$")
    assert list(out_dir.iterdir()) == []


def test_truncated_zip_is_refused(synthetic_wheel: WheelFactory, out_dir: Path) -> None:
    base = synthetic_wheel()
    base.write_bytes(base.read_bytes()[:-200])
    refused(
        base,
        out_dir,
        f"{base.name}: not a valid zip file (its last 22 bytes are not a zip end record without comment); the download may be "
        "truncated, delete it and download it again",
    )


def test_file_edited_without_record_is_refused(
    synthetic_wheel: WheelFactory, out_dir: Path
) -> None:
    base = synthetic_wheel(
        {"torch_tensorrt/_compiled.py": b"x = 2\n"},
        record={"torch_tensorrt/_compiled.py": b"x = 1\n"},
    )
    refused(
        base,
        out_dir,
        f"{base.name}: torch_tensorrt/_compiled.py does not match its RECORD hash; the wheel "
        "was changed or damaged after it was built, use the official wheel",
    )


def test_file_missing_from_record_is_refused(synthetic_wheel: WheelFactory, out_dir: Path) -> None:
    base = synthetic_wheel()
    with zipfile.ZipFile(base, "a") as archive:
        archive.writestr("torch_tensorrt/extra.py", b"")
    refused(
        base,
        out_dir,
        f"{base.name}: torch_tensorrt/extra.py is not listed in RECORD; the wheel was changed "
        "or damaged after it was built, use the official wheel",
    )


def test_file_listed_but_absent_is_refused(synthetic_wheel: WheelFactory, out_dir: Path) -> None:
    base = synthetic_wheel(record={"torch_tensorrt/gone.py": b""})
    refused(
        base,
        out_dir,
        f"{base.name}: RECORD lists torch_tensorrt/gone.py, which the wheel lacks; the wheel "
        "was changed or damaged after it was built, use the official wheel",
    )


def test_wheel_without_the_target_module_is_refused(
    tmp_path: Path, synthetic_wheel: WheelFactory, out_dir: Path
) -> None:
    base = synthetic_wheel()
    stripped = tmp_path / base.name
    with zipfile.ZipFile(base) as source, zipfile.ZipFile(stripped, "w") as archive:
        record = source.read("torch_tensorrt-2.14.0.dist-info/RECORD").decode()
        for info in source.infolist():
            if info.filename == "torch_tensorrt/dynamo/utils.py":
                continue
            data = source.read(info)
            if info.filename.endswith("RECORD"):
                data = "".join(
                    line + "\n"
                    for line in record.splitlines()
                    if not line.startswith("torch_tensorrt/dynamo/utils.py")
                ).encode()
            archive.writestr(info, data)
    with pytest.raises(PatchError, match=re.escape("has no torch_tensorrt/dynamo/utils.py")):
        build(stripped, out_dir)
    assert list(out_dir.iterdir()) == []


def test_reader_accepts_a_good_wheel(synthetic_wheel: WheelFactory) -> None:
    base = synthetic_wheel()
    wheel = read_wheel(base.read_bytes(), base.name)
    assert str(wheel.version) == "2.14.0"
    assert wheel.dist_info == "torch_tensorrt-2.14.0.dist-info"


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        pytest.param("2.14.0", f"2.14.0+{LABEL}", id="plain"),
        pytest.param("2.9.0+cu130", f"2.9.0+cu130.{LABEL}", id="appended-to-label"),
        pytest.param("2.10.0.post1", f"2.10.0.post1+{LABEL}", id="post-release"),
    ],
)
def test_patched_version(base: str, expected: str) -> None:
    assert patched_version(base, LABEL) == expected


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(f"2.14.0+{LABEL}", id="current"),
        pytest.param(f"2.14.0+{LABEL_NAME}", id="before-numbered-labels"),
        pytest.param(f"2.9.0+cu130.{LABEL_NAME}.7", id="variant-numbered"),
        pytest.param(f"2.14.0+{LABEL_NAME}.2.dev.g0123456789", id="development"),
    ],
)
def test_already_patched_version_is_refused(version: str) -> None:
    with pytest.raises(PatchError, match=re.escape("this wheel is already patched")):
        patched_version(version, LABEL)


def test_invalid_label_is_refused() -> None:
    with pytest.raises(PatchError, match=re.escape("is not a canonical PEP 440 version")):
        patched_version("2.14.0", "mem-fix")


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        pytest.param("0", (1980, 1, 1, 0, 0, 0), id="before-1980-floored"),
        pytest.param("315532800", (1980, 1, 1, 0, 0, 0), id="1980"),
        pytest.param("1700000000", (2023, 11, 14, 22, 13, 20), id="2023"),
    ],
)
def test_source_date_epoch_sets_the_time_of_written_members(
    synthetic_wheel: WheelFactory,
    out_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    epoch: str,
    expected: tuple[int, ...],
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    patched = build(synthetic_wheel(), out_dir)
    with zipfile.ZipFile(patched) as archive:
        times = {info.filename: info.date_time for info in archive.infolist()}
    dist_info = f"torch_tensorrt-2.14.0+{LABEL}.dist-info"
    for written in (
        "torch_tensorrt/dynamo/utils.py",
        f"{dist_info}/METADATA",
        f"{dist_info}/sboms/patched_wheel.cdx.json",
        f"{dist_info}/RECORD",
    ):
        assert times.pop(written) == expected
    assert set(times.values()) == {(2020, 2, 2, 12, 0, 0)}  # untouched members keep theirs


def test_without_source_date_epoch_written_members_keep_the_base_time(
    synthetic_wheel: WheelFactory, out_dir: Path
) -> None:
    patched = build(synthetic_wheel(), out_dir)
    with zipfile.ZipFile(patched) as archive:
        assert {info.date_time for info in archive.infolist()} == {(2020, 2, 2, 12, 0, 0)}


@pytest.mark.parametrize(
    "epoch",
    [
        pytest.param("soon", id="not-a-number"),
        pytest.param("99999999999999999999", id="beyond-the-clock"),
        pytest.param("4354819200", id="after-2107"),
    ],
)
def test_bad_source_date_epoch_is_refused(epoch: str) -> None:
    with pytest.raises(PatchError, match=re.escape(f"SOURCE_DATE_EPOCH={epoch!r} is")):
        zip_date_time(epoch)


def test_record_signatures_are_dropped_and_record_is_regenerated(
    synthetic_wheel: WheelFactory, out_dir: Path
) -> None:
    signature = "torch_tensorrt-2.14.0.dist-info/RECORD.jws"
    patched = build(synthetic_wheel({signature: b"{}"}), out_dir)
    with zipfile.ZipFile(patched) as archive:
        names = archive.namelist()
    assert not any(name.endswith(("RECORD.jws", "RECORD.p7s")) for name in names)
    assert names[-1] == f"torch_tensorrt-2.14.0+{LABEL}.dist-info/RECORD"
    assert names == sorted(names[:-1], key=lambda n: ("dist-info/" in n, n)) + names[-1:]
    read_wheel(patched.read_bytes(), patched.name)  # RECORD holds for every member


def test_incompatible_call_site_is_refused(
    synthetic_wheel: WheelFactory, out_dir: Path, tmp_path: Path
) -> None:
    overlay = tmp_path / "overlay.py"
    overlay.write_text("def deallocate_module(module):\n    pass\n", encoding="utf-8")
    base = synthetic_wheel()
    with pytest.raises(PatchError) as error:
        build(base, out_dir, overlay)
    assert error.match(
        "^"
        + re.escape(
            f"{base.name}: 1 call(s) in upstream's package do not fit the overlay:\n"
            "  torch_tensorrt/dynamo/_compiler.py:5: deallocate_module(gm, "
            "delete_module=False) does not fit deallocate_module(module): got an unexpected "
            "keyword argument 'delete_module'\n"
            "Change the overlay's signature to accept these calls, or build from a supported "
            "base release"
        )
        + "$"
    )
    assert list(out_dir.iterdir()) == []


@pytest.mark.parametrize(
    "newline", [pytest.param(b"\n", id="lf"), pytest.param(b"\r\n", id="crlf-windows-wheels")]
)
def test_metadata_rewrite_changes_the_version_line_only(newline: bytes) -> None:
    lines = [b"Metadata-Version: 2.4", b"Name: torch_tensorrt", b"Version: 2.14.0"]
    lines += [b"License: first line", b"        ", b"        second line", b"", b"Version: body"]
    metadata = newline.join(lines) + newline
    expected = metadata.replace(b"Version: 2.14.0", f"Version: 2.14.0+{LABEL}".encode())
    assert rewrite_metadata_version(metadata, f"2.14.0+{LABEL}") == expected
