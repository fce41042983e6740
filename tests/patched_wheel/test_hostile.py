"""Hostile bases crafted from a real official wheel: each class of refusal, and what still builds.

Every crafted base gets past the lock (the test's lock knows its sha256), so that the rule
under test is the one that refuses it: the message is matched whole, no wheel is written,
and nothing else appears in the output folder.
"""

from __future__ import annotations

import re
import shutil
import struct
import time
import tracemalloc
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Dict, List

import pytest
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from patched_wheel.lock import Lock, load_lock
from patched_wheel.request import BaseRequest
from patched_wheel.resolve import fetch_base
from patched_wheel.wheelfile import MAX_WHEEL_BYTES
from wheel_helpers import (
    LABEL,
    TARGET,
    Member,
    added,
    craft,
    lock_for,
    members,
    read_entries,
    replaced,
    rerecord,
    write_entries,
)

NAME = "torch_tensorrt-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl"
DIST_INFO = "torch_tensorrt-2.14.0.dist-info"
REFUSED = "; this is not a wheel the build can patch, use the official wheel"
CHANGED = "; the wheel was changed or damaged after it was built, use the official wheel"


@pytest.fixture(scope="module")
def slim(base_wheels: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The official 2.14.0 wheel less its binaries, stored uncompressed (crafting and building
    stay fast), RECORD rewritten."""

    def sources_only(entries: List[Member]) -> List[Member]:
        kept = [(i, d) for i, d in entries if not i.filename.endswith((".so", ".dll", ".exe"))]
        for info, _ in kept:
            info.compress_type = zipfile.ZIP_STORED
        return kept

    return craft(base_wheels["2.14.0"], tmp_path_factory.mktemp("slim"), sources_only)


def refused(base: Path, out_dir: Path, pattern: str) -> None:
    """The build of ``base`` fails with a message matching ``pattern`` whole, writing nothing."""
    with pytest.raises(PatchError) as error:
        wheel = read_base(base, lock=lock_for(base))
        build_patched_wheel(wheel, out_dir=out_dir)
    assert re.fullmatch(pattern, str(error.value)), str(error.value)
    assert list(out_dir.iterdir()) == []


def exactly(message: str) -> str:
    return re.escape(message)


def refusal(message: str) -> str:
    """A refusal of the wheel's structure: ``message`` and what to do."""
    return re.escape(message + REFUSED)


def with_mode(mode: int) -> Callable[[List[Member]], List[Member]]:
    return lambda entries: added(entries, "torch_tensorrt/evil", b"x", mode)


def edited(name: str, edit: Callable[[bytes], bytes]) -> Callable[[List[Member]], List[Member]]:
    def change(entries: List[Member]) -> List[Member]:
        return [(i, edit(d) if i.filename == name else d) for i, d in entries]

    return change


def dropped(name: str) -> Callable[[List[Member]], List[Member]]:
    return lambda entries: [(i, d) for i, d in entries if i.filename != name]


def new(name: str, data: bytes = b"x = 1\n") -> Callable[[List[Member]], List[Member]]:
    return lambda entries: added(entries, name, data)


METADATA = f"{DIST_INFO}/METADATA"
WHEEL = f"{DIST_INFO}/WHEEL"

STRUCTURE_CASES = [
    pytest.param(
        new("torch_tensorrt/../evil.py"),
        refusal(f"{NAME}: the member 'torch_tensorrt/../evil.py' has an empty, '.' or '..' part"),
        id="dot-dot",
    ),
    pytest.param(
        new("/etc/evil.py"),
        refusal(f"{NAME}: the member '/etc/evil.py' is an absolute path"),
        id="absolute",
    ),
    pytest.param(
        new("torch_tensorrt\\evil.py"),
        refusal(f"{NAME}: the member 'torch_tensorrt\\\\evil.py' holds a backslash or a NUL"),
        id="backslash",
    ),
    pytest.param(
        with_mode(0o120777),
        refusal(
            f"{NAME}: the member 'torch_tensorrt/evil' is not a regular file (mode 120777: a "
            "symlink, folder or device)"
        ),
        id="symlink",
    ),
    pytest.param(
        with_mode(0o104755),
        refusal(
            f"{NAME}: the member 'torch_tensorrt/evil' has the setuid, setgid or sticky bit "
            "(mode 104755)"
        ),
        id="setuid",
    ),
    pytest.param(
        new("torch_tensorrt/_version.py"),
        refusal(
            f"{NAME}: the members 'torch_tensorrt/_version.py' and 'torch_tensorrt/_version.py' "
            "have the same name"
        ),
        id="duplicate",
    ),
    pytest.param(
        new("torch_tensorrt/_Version.py"),
        refusal(
            f"{NAME}: the members 'torch_tensorrt/_version.py' and 'torch_tensorrt/_Version.py' "
            "have the same name"
        ),
        id="case-collision",
    ),
    pytest.param(
        new("other-1.0.dist-info/METADATA"),
        refusal(
            f"{NAME}: its .dist-info folders are ['other-1.0.dist-info', '{DIST_INFO}'], not "
            f"the one '{DIST_INFO}'"
        ),
        id="second-dist-info",
    ),
    pytest.param(dropped(WHEEL), refusal(f"{NAME}: {DIST_INFO} lacks WHEEL"), id="no-wheel-file"),
    pytest.param(
        dropped(METADATA), refusal(f"{NAME}: {DIST_INFO} lacks METADATA"), id="no-metadata"
    ),
    pytest.param(
        edited(WHEEL, lambda d: d.replace(b"Wheel-Version: 1.0", b"Wheel-Version: 9.0")),
        refusal(f"{NAME}: its WHEEL has Wheel-Version ['9.0'], not one 1.x"),
        id="wheel-version-9",
    ),
    pytest.param(
        edited(WHEEL, lambda d: d.replace(b"cp311-cp311", b"cp312-cp312")),
        refusal(f"{NAME}: the tags in its WHEEL differ from its file name's"),
        id="wheel-tags",
    ),
    pytest.param(
        edited(METADATA, lambda d: d.replace(b"Name: torch_tensorrt", b"Name: trojan", 1)),
        refusal(f"{NAME}: its METADATA names ['trojan'], not 'torch-tensorrt'"),
        id="metadata-name",
    ),
    pytest.param(
        edited(METADATA, lambda d: d.replace(b"Version: 2.14.0", b"Version: 2.13.0", 1)),
        refusal(f"{NAME}: its METADATA has Version ['2.13.0'], not 2.14.0"),
        id="metadata-version",
    ),
]


def shadowing(name: str) -> object:
    return pytest.param(
        new(name),
        exactly(
            f"{NAME}: holds {name!r}, which Python would import instead of the patched "
            f"{TARGET}; use the official wheel"
        ),
        id=f"shadow-{name.rsplit('/', 2)[-2]}-{name.rsplit('/', 1)[-1]}",
    )


SHADOW_CASES = [
    shadowing("torch_tensorrt/dynamo/utils/__init__.py"),
    shadowing("torch_tensorrt-2.14.0.data/purelib/torch_tensorrt/dynamo/utils/__init__.py"),
    shadowing("torch_tensorrt-2.14.0.data/platlib/torch_tensorrt/dynamo/utils/__init__.py"),
    shadowing("torch_tensorrt/dynamo/utils.abi3.so"),
    shadowing("torch_tensorrt/dynamo/utils.cpython-311-x86_64-linux-gnu.so"),
    shadowing("torch_tensorrt/dynamo/Utils.pyd"),
    shadowing("torch_tensorrt/dynamo/utils.pyc"),
    shadowing("torch_tensorrt-2.14.0.data/platlib/torch_tensorrt/dynamo/utils.abi3.so"),
]

# A 1000-term expression: parsed fine, but CPython's compiler recurses once per term.
LONG_EXPRESSION = b"\nLONG = " + b" + ".join(b"1" for _ in range(1000)) + b"\n"

PLAN_CASES = [
    pytest.param(
        edited(TARGET, lambda d: d + LONG_EXPRESSION),
        exactly(
            f"{NAME}:{TARGET} nests deeper than 100 levels (at line 1032), which no official "
            "module does; use the official file"
        ),
        id="thousand-term-expression",
    ),
    pytest.param(
        edited(TARGET, lambda d: d + b"\n" + b"pass\n" * 110_000),
        exactly(
            f"{NAME}:{TARGET} is larger than 512 KiB, which no official module comes near; "
            "use the official file"
        ),
        id="source-beyond-the-ceiling",
    ),
    pytest.param(
        new(f"torch_tensorrt-2.14.0.data/purelib/{TARGET}"),
        exactly(
            f"{NAME}: holds a second {TARGET} as 'torch_tensorrt-2.14.0.data/purelib/{TARGET}', "
            "which installers would put over the patched one; use the official wheel"
        ),
        id="target-under-data",
    ),
    pytest.param(
        new(f"torch_tensorrt-2.14.0+{LABEL}.dist-info"),
        exactly(
            f"{NAME}: already has a member 'torch_tensorrt-2.14.0+{LABEL}.dist-info' under the "
            "patched wheel's .dist-info name; this wheel is already patched or crafted, use the "
            "official wheel"
        ),
        id="new-dist-info-name-taken",
    ),
    pytest.param(
        edited(TARGET, lambda d: d + b"\ndeallocate_module = print\n"),
        f"{re.escape(NAME)}: {re.escape(TARGET)} binds 'deallocate_module' again at line \\d+, "
        "after the definition the overlay replaces, so the fix would not take effect; use the "
        "official wheel",
        id="rebinding-after-definition",
    ),
    pytest.param(
        edited(
            TARGET, lambda d: d + b"\nif True:\n    from os import getcwd as deallocate_module\n"
        ),
        f"{re.escape(NAME)}: {re.escape(TARGET)} binds 'deallocate_module' again at line \\d+, "
        ".*",
        id="rebinding-by-import-in-a-block",
    ),
    pytest.param(
        edited(TARGET, lambda d: d + b"\ndef broken(:\n"),
        f"{re.escape(NAME)}:{re.escape(TARGET)} is not valid Python \\(.*, line \\d+\\); use the "
        "official file, or fix the overlay",
        id="syntax-error",
    ),
    pytest.param(
        edited(TARGET, lambda d: d + b"\nx = '\x00'\n"),
        f"{re.escape(NAME)}:{re.escape(TARGET)} (is not valid|cannot be parsed as) Python .*",
        id="null-byte",
    ),
    pytest.param(
        edited(TARGET, lambda d: b"# -*- coding: klingon -*-\n" + d),
        f"{re.escape(NAME)}:{re.escape(TARGET)} cannot be decoded as Python source .*",
        id="unknown-coding-cookie",
    ),
    pytest.param(
        edited(TARGET, lambda d: d + b"\n# \xff\xfe\n"),
        f"{re.escape(NAME)}:{re.escape(TARGET)} cannot be decoded as Python source .*",
        id="not-utf8",
    ),
]


@pytest.mark.parametrize(("edit", "pattern"), STRUCTURE_CASES + SHADOW_CASES + PLAN_CASES)
def test_hostile_base_is_refused(
    slim: Path,
    tmp_path: Path,
    out_dir: Path,
    edit: Callable[[List[Member]], List[Member]],
    pattern: str,
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate it is asked to write
        base = craft(slim, tmp_path / "base", edit)
    refused(base, out_dir, pattern)


RECORD = f"{DIST_INFO}/RECORD"


def test_record_size_differing_from_the_zip_header_is_refused(
    slim: Path, tmp_path: Path, out_dir: Path
) -> None:
    entries = rerecord(read_entries(slim), {"torch_tensorrt/_version.py": b"longer than it is"})
    base = write_entries(tmp_path / NAME, entries)
    refused(
        base,
        out_dir,
        exactly(f"{NAME}: torch_tensorrt/_version.py's size differs from RECORD's{CHANGED}"),
    )


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        pytest.param(
            "torch_tensorrt/caf\xe9.py,,\n".encode("latin-1"),
            r"its RECORD cannot be read \('utf-8' codec can't decode .*\)",
            id="not-utf8",
        ),
        pytest.param(
            ("x" * 200_000 + ",,\n").encode(),
            exactly("its RECORD cannot be read (field larger than field limit (131072))"),
            id="huge-field",
        ),
        pytest.param(
            b"a,b\n",
            exactly("its RECORD row ['a', 'b'] is malformed or repeated"),
            id="two-fields",
        ),
    ],
)
def test_unreadable_record_is_refused(
    slim: Path, tmp_path: Path, out_dir: Path, record: bytes, pattern: str
) -> None:
    base = craft(slim, tmp_path, lambda e: replaced(e, RECORD, record), record=False)
    refused(base, out_dir, re.escape(f"{NAME}: ") + pattern + re.escape(REFUSED))


def _patch_headers(
    path: Path, member: str, offset_local: int, offset_central: int, value: int
) -> None:
    """Set a 2-byte field of ``member`` in its local header and its central directory entry."""
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(member)
    struct.pack_into("<H", data, info.header_offset + offset_local, value)
    central = data.rfind(b"PK\x01\x02" + data[info.header_offset + 4 : info.header_offset + 6])
    position = data.find(b"PK\x01\x02")
    while position >= 0:
        (name_length,) = struct.unpack_from("<H", data, position + 28)
        if data[position + 46 : position + 46 + name_length] == member.encode():
            central = position
            break
        position = data.find(b"PK\x01\x02", position + 4)
    struct.pack_into("<H", data, central + offset_central, value)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("local", "central", "value", "problem"),
    [
        pytest.param(
            8, 10, 99, "uses compression method 99, not stored or deflated", id="method-99"
        ),
        pytest.param(6, 8, 0x1, "is encrypted", id="encrypted-flag"),
    ],
)
def test_unsupported_member_encoding_is_refused(
    slim: Path, tmp_path: Path, out_dir: Path, local: int, central: int, value: int, problem: str
) -> None:
    base = craft(slim, tmp_path, lambda e: e)
    _patch_headers(base, "torch_tensorrt/_version.py", local, central, value)
    refused(
        base,
        out_dir,
        exactly(f"{NAME}: the member 'torch_tensorrt/_version.py' {problem}{REFUSED}"),
    )


def test_name_marked_utf8_that_is_not_is_refused(slim: Path, tmp_path: Path, out_dir: Path) -> None:
    base = craft(slim, tmp_path, new("torch_tensorrt/caf\xe9.py"))
    data = base.read_bytes()
    assert data.count("caf\xe9.py".encode()) >= 2  # the local header, the central directory
    base.write_bytes(data.replace("caf\xe9.py".encode(), b"caf\xe9\xe9.py"))
    refused(base, out_dir, exactly(f"{NAME}: a member's name is marked UTF-8 but is not{REFUSED}"))


def test_zip_bomb_is_refused_from_the_headers_quickly_in_little_memory(
    slim: Path, tmp_path: Path, out_dir: Path
) -> None:
    bomb = bytes(256 << 20)  # 256 MiB of zeros: deflated to about 250 KiB
    base = craft(slim, tmp_path, lambda e: added(e, "torch_tensorrt/zeros.bin", bomb))
    del bomb
    tracemalloc.start()
    start = time.perf_counter()
    try:
        refused(
            base,
            out_dir,
            re.escape(f"{NAME}: its members unpack to ")
            + r"\d+ bytes, more than \d+ "
            + re.escape(
                "(16 times the wheel, at most 2048 MiB): a zip bomb or not an official wheel"
            )
            + re.escape(REFUSED),
        )
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 5, seconds
    assert peak < 4 * base.stat().st_size + (16 << 20), peak  # the wheel's bytes, not 256 MiB


def test_wheel_beyond_the_size_cap_is_refused_unread(tmp_path: Path, out_dir: Path) -> None:
    base = tmp_path / NAME
    with open(base, "wb") as stream:
        stream.truncate(MAX_WHEEL_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(PatchError) as error:
        read_base(base, lock=Lock({}), unlocked=True)
    assert str(error.value) == (
        f"base wheel {str(base)!r} is larger than {MAX_WHEEL_BYTES >> 20} MiB, which no "
        "official wheel is; use the official wheel"
    )


@pytest.mark.parametrize(
    ("name", "data", "pattern"),
    [
        pytest.param(
            NAME,
            b"just text\n",
            exactly(
                f"{NAME}: not a valid zip file (its last 22 bytes are not a zip end record without comment); the download may be "
                "truncated, delete it and download it again"
            ),
            id="text-file-named-as-a-wheel",
        ),
        pytest.param(
            "notes.txt",
            b"just text\n",
            exactly(
                "'notes.txt' is not a wheel file name (Invalid wheel filename (extension must be "
                "'.whl'): 'notes.txt'); pass the wheel as pip downloaded it, without renaming it"
            ),
            id="text-file",
        ),
    ],
)
def test_a_file_that_is_not_a_wheel_is_refused(
    tmp_path: Path, out_dir: Path, name: str, data: bytes, pattern: str
) -> None:
    base = tmp_path / name
    base.write_bytes(data)
    with pytest.raises(PatchError) as error:
        read_base(base, lock=lock_for(base), unlocked=True)
    assert re.fullmatch(pattern, str(error.value)), str(error.value)


def test_truncated_real_wheel_is_refused(slim: Path, tmp_path: Path, out_dir: Path) -> None:
    base = tmp_path / NAME
    base.write_bytes(slim.read_bytes()[: slim.stat().st_size // 2])
    refused(base, out_dir, re.escape(f"{NAME}: not a valid zip file (") + ".*")


# --- Valid Python in any encoding the language allows builds ---------------------------------


@pytest.mark.parametrize(
    ("edit", "encoding"),
    [
        pytest.param(lambda d: b"\xef\xbb\xbf" + d, "utf-8-sig", id="byte-order-mark"),
        pytest.param(
            lambda d: b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + d, "latin-1", id="coding-cookie"
        ),
    ],
)
def test_target_in_another_encoding_builds_and_keeps_it(
    slim: Path, tmp_path: Path, out_dir: Path, edit: Callable[[bytes], bytes], encoding: str
) -> None:
    base = craft(slim, tmp_path / "base", edited(TARGET, edit))
    patched = build_patched_wheel(read_base(base, lock=lock_for(base)), out_dir=out_dir)
    source = members(patched)[TARGET]
    original = members(base)[TARGET]
    assert source[:30] == original[:30]  # the BOM or the cookie is kept
    text = source.decode(encoding)
    assert "def trim_host_heap() -> None:" in text
    compile(source, TARGET, "exec", dont_inherit=True)


# --- The cache is not a source of trust --------------------------------------------------------


def test_cache_is_looked_up_by_the_exact_official_name_and_checked(
    base_wheels: Dict[str, Path], slim: Path, tmp_path: Path
) -> None:
    official = base_wheels["2.14.0"]
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(slim, cache / NAME.replace("-cp311", "-0-cp311", 1))  # a planted build tag
    shutil.copyfile(official, cache / NAME)
    request = BaseRequest("2.14.0", "manylinux_2_28_x86_64", "3.11")
    wheel = fetch_base(request, lock=load_lock(), cache_dir=cache)
    assert wheel.filename == NAME and wheel.read(TARGET) == members(official)[TARGET]

    shutil.copyfile(slim, cache / NAME)  # a poisoned cache under the official name
    with pytest.raises(PatchError) as error:
        fetch_base(request, lock=load_lock(), cache_dir=cache)
    assert str(error.value).startswith(f"{NAME}: sha256 ")
    assert str(error.value).endswith(
        "in the lock; this is not the official file, delete it and download it again"
    )


def test_a_known_release_under_another_file_name_is_refused_even_unlocked(
    slim: Path, tmp_path: Path
) -> None:
    build_tagged = tmp_path / NAME.replace("-cp311", "-0-cp311", 1)
    shutil.copyfile(slim, build_tagged)
    with pytest.raises(PatchError) as error:
        read_base(build_tagged, lock=load_lock(), unlocked=True)
    assert str(error.value) == (
        f"{build_tagged.name}: the lock knows this release, platform and Python as {NAME}, and "
        "this file is not it; use the official wheel (the opt-in for unknown bases does not "
        "apply to a wheel the lock knows)"
    )


# --- Where the wheel is written ------------------------------------------------------------------


def test_output_folder_that_is_a_file_is_refused(slim: Path, tmp_path: Path) -> None:
    target = tmp_path / "dist"
    target.write_text("a file\n")
    with pytest.raises(PatchError) as error:
        build_patched_wheel(read_base(slim, lock=lock_for(slim)), out_dir=target)
    assert re.fullmatch(
        re.escape(
            f"cannot write torch_tensorrt-2.14.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl into {str(target)!r} ("
        )
        + ".*"
        + re.escape("); choose an output folder you can write to"),
        str(error.value),
    ), str(error.value)


def test_file_name_too_long_for_the_file_system_is_refused(
    slim: Path, tmp_path: Path, out_dir: Path
) -> None:
    platform = "linux_" + "x" * (248 - len("torch_tensorrt-2.14.0-cp311-cp311-linux_.whl"))
    name = f"torch_tensorrt-2.14.0-cp311-cp311-{platform}.whl"
    assert len(name) == 248
    base = craft(
        slim,
        tmp_path / "base",
        edited(WHEEL, lambda d: d.replace(b"manylinux_2_28_x86_64", platform.encode())),
        name=name,
    )
    with pytest.raises(PatchError) as error:
        build_patched_wheel(read_base(base, lock=lock_for(base)), out_dir=out_dir)
    assert "File name too long" in str(error.value), str(error.value)
    assert list(out_dir.iterdir()) == []


# A FIFO given as the base: refused before anything waits on it. Each run in a process of its
# own with a time limit, so that a hang fails the test instead of stopping the suite.

REPOSITORY = Path(__file__).resolve().parents[2]


def _run_with_fifo(tmp_path: Path, arguments: List[str], variables: Dict[str, str]) -> str:
    import os
    import subprocess
    import sys

    environment = {k: v for k, v in os.environ.items() if not k.startswith("TORCHTRT_")}
    completed = subprocess.run(
        [sys.executable, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**environment, **variables},
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr.count("\n") == 1, completed.stderr
    return completed.stderr


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("how", ["option", "variable", "reader"])
def test_a_fifo_as_the_base_wheel_is_refused_without_waiting(tmp_path: Path, how: str) -> None:
    import os

    fifo = tmp_path / NAME
    os.mkfifo(fifo)
    cli = str(REPOSITORY / "tools" / "patched_wheel")
    if how == "option":
        err = _run_with_fifo(tmp_path, [cli, "build", "--base-wheel", str(fifo)], {})
    elif how == "variable":
        err = _run_with_fifo(tmp_path, [cli, "build"], {"TORCHTRT_BASE_WHEEL": str(fifo)})
    else:  # the reader itself, past every check of the callers
        code = (
            "import sys; from pathlib import Path; from patched_wheel import PatchError\n"
            "from patched_wheel.wheelfile import read_wheel_file\n"
            "try: read_wheel_file(Path(sys.argv[1]), what='--base-wheel')\n"
            "except PatchError as e: sys.exit(print(e, file=sys.stderr) or 1)\n"
        )
        pythonpath = {"PYTHONPATH": str(REPOSITORY / "tools")}
        err = _run_with_fifo(tmp_path, ["-c", code, str(fifo)], pythonpath)
        assert (
            err
            == f"--base-wheel {str(fifo)!r} cannot be read (not a regular file); give the path of an official torch-tensorrt wheel file\n"
        )
    assert "not a" in err


def test_a_record_row_with_terminal_escapes_is_shown_escaped(
    slim: Path, tmp_path: Path, out_dir: Path
) -> None:
    forged = "torch_tensorrt/\x1b[2K\x1b[1Afine.py"
    entries = rerecord(read_entries(slim), {forged: b"x = 1\n"})
    base = write_entries(tmp_path / NAME, entries)
    refused(
        base,
        out_dir,
        exactly(
            f"{NAME}: RECORD lists 'torch_tensorrt/\\x1b[2K\\x1b[1Afine.py', which the wheel lacks"
        )
        + re.escape(CHANGED),
    )
