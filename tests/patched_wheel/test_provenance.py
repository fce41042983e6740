"""A version per overlay, a provenance record in every wheel, and ``verify`` from that record.

The history tests make small git repositories of their own (the build tool and the overlay,
copied from this checkout) and build a wheel at one commit, then verify it from a later one,
with the command line, as a user with a clone would.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from installed_helpers import rewrite_wheel
from packaging.version import Version
from patched_wheel import PatchError
from patched_wheel.__main__ import main
from patched_wheel.base import read_base
from patched_wheel.build import build_origin, build_patched_wheel
from patched_wheel.installed import _release
from patched_wheel.labels import (
    LEGACY_LABEL,
    REGISTER_COMMAND,
    OverlayReleases,
    label_for,
    load_overlay_releases,
    register_overlay,
    release_label,
    split_label,
)
from patched_wheel.lock import Lock, write_lock
from patched_wheel.overlay import read_overlay
from patched_wheel.paths import DEFAULT_OVERLAY, OVERLAY_PATH, OVERLAY_RELEASES_FILE, REPOSITORY
from patched_wheel.policy import LABEL_NAME
from patched_wheel.provenance import SourceRevision, overlay_sha256, source_revision
from patched_wheel.provenance_record import (
    ProvenanceRecord,
    parse_record,
    record_bytes,
    tool_sha256,
)
from patched_wheel.splice import OverlayParts, parse_overlay
from patched_wheel.verify import verify_patched_wheel
from wheel_helpers import LABEL, make_wheel, sha256

# An overlay function a later revision of the fork adds (so its splice differs).
LATER_FUNCTION = '''

def later_revision_helper() -> None:
    """Added by a later revision of the overlay."""
'''


# -- the label ------------------------------------------------------------------------------


def test_the_overlay_is_registered() -> None:
    """Fails whenever the overlay changed and nobody released it under a new number."""
    sha = overlay_sha256()
    number = load_overlay_releases().number_of(sha)
    assert number is not None, (
        f"{OVERLAY_PATH} (sha256 {sha}) is not in {OVERLAY_RELEASES_FILE.name}: the overlay "
        f"changed, so its wheels need a new version. Run '{REGISTER_COMMAND}' and commit "
        f"tools/patched_wheel/{OVERLAY_RELEASES_FILE.name}"
    )
    assert LABEL == release_label(number)


def test_the_docs_name_the_current_label() -> None:
    """Every patched version the README and the docs' pages show carries the label the build
    gives the overlay now (a new overlay number makes this fail until they follow)."""
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docsrc").rglob("*.rst"))]
    for page in pages:
        for version, label in re.findall(
            rf"\b(\d+\.\d+\.\d+)\+({LABEL_NAME}[\w.]*\w)", page.read_text(encoding="utf-8")
        ):
            assert label == LABEL, f"{page.relative_to(REPOSITORY)}: {version}+{label}"


def test_newer_overlays_sort_above_older_ones_for_pip() -> None:
    newest_first = [
        f"2.14.0+{LABEL_NAME}.10",
        f"2.14.0+{LABEL_NAME}.9",
        f"2.14.0+{LABEL_NAME}.2.dev.g0123456789",
        f"2.14.0+{LABEL_NAME}.2",
        f"2.14.0+{LEGACY_LABEL}",
        "2.14.0",
    ]
    assert sorted(newest_first, key=Version, reverse=True) == newest_first
    assert Version(f"2.9.0+cu130.{LABEL_NAME}.2") > Version(f"2.9.0+cu130.{LEGACY_LABEL}")


def test_why_the_label_is_not_memfix_dot_n() -> None:
    """``memfix`` is a prefix of ``memfix1``, so ``memfix.2`` would sort below old wheels."""
    assert Version("2.14.0+memfix.2") < Version(f"2.14.0+{LEGACY_LABEL}")


@pytest.mark.parametrize(
    "version, expected",
    [
        pytest.param(f"2.14.0+{LABEL_NAME}.2", ("2.14.0", f"{LABEL_NAME}.2"), id="released"),
        pytest.param(f"2.14.0+{LEGACY_LABEL}", ("2.14.0", LEGACY_LABEL), id="legacy"),
        pytest.param(
            f"2.9.0+cu130.{LABEL_NAME}.12", ("2.9.0+cu130", f"{LABEL_NAME}.12"), id="variant"
        ),
        pytest.param(
            f"2.14.0+{LABEL_NAME}.3.dev.gabcdef0123",
            ("2.14.0", f"{LABEL_NAME}.3.dev.gabcdef0123"),
            id="development",
        ),
        pytest.param("2.14.0", ("2.14.0", None), id="official"),
        pytest.param("2.9.0+cu130", ("2.9.0+cu130", None), id="official-variant"),
        pytest.param(f"2.14.0+{LABEL_NAME}.0", (f"2.14.0+{LABEL_NAME}.0", None), id="number-0"),
        pytest.param(f"2.14.0+{LABEL_NAME}.2.x", (f"2.14.0+{LABEL_NAME}.2.x", None), id="tail"),
    ],
)
def test_one_function_maps_a_patched_version_to_its_base(
    version: str, expected: tuple[str, Optional[str]]
) -> None:
    assert split_label(version) == expected


@pytest.mark.parametrize(
    "version",
    [
        pytest.param(f"2.12.1+{LEGACY_LABEL}", id="legacy"),
        pytest.param(f"2.12.1+{LABEL_NAME}.2", id="released"),
        pytest.param(f"2.12.1+{LABEL_NAME}.3.dev.g0123456789", id="development"),
    ],
)
def test_an_installed_patched_wheel_stands_for_its_base_release(version: str) -> None:
    assert _release(version, unlocked=False) == "2.12.1"


def test_registering_gives_the_next_number_once(tmp_path: Path) -> None:
    registry = Path(shutil.copy(OVERLAY_RELEASES_FILE, tmp_path / "registry.json"))
    newest = load_overlay_releases(registry).newest
    assert register_overlay("ab" * 32, registry)[0] == newest + 1
    assert register_overlay("ab" * 32, registry)[0] == newest + 1
    assert register_overlay(overlay_sha256(), registry)[0] <= newest
    assert load_overlay_releases(registry).by_number[newest + 1] == "ab" * 32


def test_registering_a_missing_overlay_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = Path(shutil.copy(OVERLAY_RELEASES_FILE, tmp_path / "registry.json"))
    argv = [
        "register-overlay",
        "--overlay",
        str(tmp_path / "absent.py"),
        "--registry",
        str(registry),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "absent.py" in err
    assert registry.read_bytes() == OVERLAY_RELEASES_FILE.read_bytes()


def test_a_registry_number_written_in_other_digits_is_refused(tmp_path: Path) -> None:
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps({"overlays": {"\u00b2": "ab" * 32}}))
    with pytest.raises(PatchError, match="is not an overlay number"):
        load_overlay_releases(registry)


def test_the_register_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = Path(shutil.copy(OVERLAY_RELEASES_FILE, tmp_path / "registry.json"))
    overlay = tmp_path / "utils.py"
    overlay.write_bytes(DEFAULT_OVERLAY.read_bytes() + LATER_FUNCTION.encode())
    newest = load_overlay_releases(registry).newest
    assert main(["register-overlay", "--overlay", str(overlay), "--registry", str(registry)]) == 0
    expected = f"registered as overlay {newest + 1}: +{LABEL_NAME}.{newest + 1}\n"
    assert capsys.readouterr().out.endswith(expected)


def test_an_unregistered_overlay_gets_a_development_label_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    releases = OverlayReleases({2: "00" * 32, 3: "11" * 32})
    with caplog.at_level(logging.WARNING, logger="patched_wheel"):
        label = label_for("9f" * 32, releases)
    assert label == f"{LABEL_NAME}.3.dev.g9f9f9f9f9f"
    assert f"to release it, run: {REGISTER_COMMAND}" in caplog.text
    assert label_for("11" * 32, releases) == f"{LABEL_NAME}.3"


def _build(base: Path, out: Path, overlay: OverlayParts, releases: OverlayReleases) -> Path:
    wheel = read_base(base, lock=Lock({base.name: sha256(base)}))
    origin = build_origin(overlay, releases=releases)
    return build_patched_wheel(wheel, out_dir=out, overlay=overlay, origin=origin)


def test_two_overlays_never_share_a_version_and_one_builds_the_same_bytes(
    tmp_path: Path,
) -> None:
    base = make_wheel(tmp_path)
    first = read_overlay()
    second = parse_overlay(first.source + LATER_FUNCTION)
    releases = OverlayReleases({2: first.sha256})
    once = _build(base, tmp_path / "once", first, releases)
    twice = _build(base, tmp_path / "twice", first, releases)
    other = _build(base, tmp_path / "other", second, releases)
    assert once.name == twice.name and once.read_bytes() == twice.read_bytes()
    assert f"+{LABEL_NAME}.2-" in once.name
    assert f"+{LABEL_NAME}.2.dev.g{second.sha256[:10]}-" in other.name


# -- the record -----------------------------------------------------------------------------

RECORD = ProvenanceRecord(
    version=f"2.14.0+{LABEL_NAME}.2",
    label=f"{LABEL_NAME}.2",
    base_wheel="torch_tensorrt-2.14.0-cp311-cp311-manylinux_2_28_x86_64.whl",
    base_sha256="12" * 32,
    overlay_sha256="34" * 32,
    revision="56" * 20,
    dirty=False,
    tool_sha256="78" * 32,
)


@pytest.mark.parametrize("dirty", [True, False, None])
@pytest.mark.parametrize("revision", ["56" * 20, "unknown"])
def test_the_record_reads_back_as_written(dirty: Optional[bool], revision: str) -> None:
    record = dataclasses.replace(RECORD, dirty=dirty, revision=revision)
    assert parse_record(record_bytes(record), "r") == record


def test_the_record_is_a_cyclonedx_sbom_with_the_base_as_ancestor() -> None:
    document = json.loads(record_bytes(RECORD))
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.6")
    component = document["metadata"]["component"]
    ancestor = component["pedigree"]["ancestors"][0]
    assert ancestor["purl"] == f"pkg:pypi/torch-tensorrt@2.14.0?file_name={RECORD.base_wheel}"
    assert ancestor["hashes"] == [{"alg": "SHA-256", "content": RECORD.base_sha256}]
    assert component["pedigree"]["commits"] == [{"uid": RECORD.revision}]
    assert "timestamp" not in json.dumps(document)


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda text: text.replace("\n  ", "\n   ", 1), id="reformatted"),
        pytest.param(lambda text: text.replace('"version": 1', '"version": 1, "x": 2'), id="extra"),
        pytest.param(lambda text: text.replace('"false"', '"maybe"'), id="bad-dirty"),
        pytest.param(lambda text: text[:-30], id="truncated"),
    ],
)
def test_a_record_not_as_the_build_writes_it_is_refused(edit: object) -> None:
    text = edit(record_bytes(RECORD).decode())  # type: ignore[operator]
    with pytest.raises(PatchError, match=r"^r: (not a provenance record|the provenance record)"):
        parse_record(text.encode(), "r")


def test_every_wheel_carries_its_record_listed_in_record(tmp_path: Path) -> None:
    base = make_wheel(tmp_path)
    patched = build_patched_wheel(
        read_base(base, lock=Lock({base.name: sha256(base)})), out_dir=tmp_path / "out"
    )
    dist_info = f"torch_tensorrt-2.14.0+{LABEL}.dist-info"
    with zipfile.ZipFile(patched) as archive:
        data = archive.read(f"{dist_info}/sboms/patched_wheel.cdx.json")
        record_rows = archive.read(f"{dist_info}/RECORD").decode().splitlines()
    assert any(
        row.startswith(f"{dist_info}/sboms/patched_wheel.cdx.json,sha256=") for row in record_rows
    )
    revision = source_revision()
    assert parse_record(data, "r") == ProvenanceRecord(
        version=f"2.14.0+{LABEL}",
        label=LABEL,
        base_wheel=base.name,
        base_sha256=sha256(base),
        overlay_sha256=overlay_sha256(),
        revision=revision.revision,
        dirty=revision.dirty,
        tool_sha256=tool_sha256(),
    )


def test_the_provenance_command_prints_the_record(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = make_wheel(tmp_path)
    patched = build_patched_wheel(
        read_base(base, lock=Lock({base.name: sha256(base)})), out_dir=tmp_path / "out"
    )
    assert main(["provenance", str(patched)]) == 0
    out = capsys.readouterr().out
    assert f"base wheel:      {base.name}\n" in out
    assert f"overlay sha256:  {overlay_sha256()} ({OVERLAY_PATH})\n" in out


# -- verify from the record, across revisions ----------------------------------------------


def _git(repository: Path, *args: str) -> str:
    command = ["git", "-C", str(repository), "-c", "user.name=t", "-c", "user.email=t@t"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def _new_repository(path: Path, overlay: bytes) -> Path:
    """A git repository holding the build tool (as checked out here) and ``overlay``."""
    shutil.copytree(
        REPOSITORY / "tools" / "patched_wheel",
        path / "tools" / "patched_wheel",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    (path / OVERLAY_PATH).parent.mkdir(parents=True)
    (path / OVERLAY_PATH).write_bytes(overlay)
    _git(path, "init", "-q")
    _commit(path, "A")
    return path


def _commit(repository: Path, message: str) -> str:
    _git(repository, "add", "-A")
    _git(repository, "commit", "-q", "-m", message)
    return _git(repository, "rev-parse", "HEAD")


def _tool(repository: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    """The command line of the tool inside ``repository``, as a user runs it."""
    command = [sys.executable, str(repository / "tools" / "patched_wheel"), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=repository, timeout=300)


class History:
    """A wheel built at revision A of a repository whose overlay changed at revision B."""

    def __init__(self, root: Path) -> None:
        self.base = make_wheel(root)
        self.lock = root / "lock.json"
        write_lock({self.base.name: sha256(self.base)}, self.lock)
        self.overlay_a = DEFAULT_OVERLAY.read_bytes()
        self.repository = _new_repository(root / "repository", self.overlay_a)
        self.revision_a = _git(self.repository, "rev-parse", "HEAD")
        built = _tool(self.repository, "build", *self.base_options(), "--out", str(root / "out"))
        assert built.returncode == 0, built.stderr
        self.wheel = Path(built.stdout.strip().splitlines()[-1])
        (self.repository / OVERLAY_PATH).write_bytes(self.overlay_a + LATER_FUNCTION.encode())
        self.revision_b = _commit(self.repository, "B: the overlay changes")

    def base_options(self) -> List[str]:
        return ["--base-wheel", str(self.base), "--lock", str(self.lock)]

    def verify(
        self, repository: Path, wheel: Optional[Path] = None, *extra: str
    ) -> "subprocess.CompletedProcess[str]":
        options = ["--base-wheel", str(self.base), "--lock", str(self.lock), *extra]
        return _tool(repository, "verify", str(wheel or self.wheel), *options)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> History:
    return History(tmp_path_factory.mktemp("history"))


def test_a_wheel_built_at_a_verifies_from_a_later_revision_in_one_command(
    history: History,
) -> None:
    assert _git(history.repository, "rev-parse", "HEAD") == history.revision_b
    completed = history.verify(history.repository)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.rstrip().endswith(
        "verified: the official wheel plus this repository's overlay, nothing else"
    )
    assert f"overlay: {OVERLAY_PATH} at revision {history.revision_a}\n" in completed.stderr


def test_the_overlay_of_b_does_not_verify_a_wheel_of_a(history: History, tmp_path: Path) -> None:
    overlay_b = tmp_path / "utils.py"
    overlay_b.write_bytes((history.repository / OVERLAY_PATH).read_bytes())
    completed = history.verify(history.repository, None, "--overlay", str(overlay_b))
    assert completed.returncode == 1
    assert completed.stderr.startswith("error: --overlay has sha256 ")
    assert "this overlay did not make it" in completed.stderr


def test_a_clone_without_the_revision_says_what_to_do(history: History, tmp_path: Path) -> None:
    clone = _new_repository(tmp_path / "clone", (history.repository / OVERLAY_PATH).read_bytes())
    completed = history.verify(clone)
    assert completed.returncode == 1
    assert completed.stderr == (
        f"error: the overlay the wheel's record names (sha256 {sha256_of(history.overlay_a)}, "
        f"built at revision {history.revision_a}) is in neither {str(clone)!r}'s working tree "
        f"nor its git history: fetch that revision (git fetch origin {history.revision_a}) or "
        "give the overlay file with --overlay PATH\n"
    )
    overlay_a = tmp_path / "utils_a.py"
    overlay_a.write_bytes(history.overlay_a)
    assert history.verify(clone, None, "--overlay", str(overlay_a)).returncode == 0
    _git(clone, "fetch", "-q", str(history.repository), "HEAD:refs/remotes/origin/main")
    assert history.verify(clone).returncode == 0


def test_a_revision_unknown_to_the_record_is_found_by_the_overlays_sha256(
    history: History, tmp_path: Path
) -> None:
    base = read_base(history.base, lock=Lock({history.base.name: sha256(history.base)}))
    overlay = read_overlay()
    origin = build_origin(overlay, revision=SourceRevision("unknown", None))
    wheel = build_patched_wheel(base, out_dir=tmp_path, overlay=overlay, origin=origin)
    completed = history.verify(history.repository, wheel)
    assert completed.returncode == 0, completed.stderr
    assert f"overlay: {OVERLAY_PATH} at commit {history.revision_a} (from git log)" in (
        completed.stderr
    )


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _record_name(wheel: Path) -> str:
    version = wheel.name.split("-")[1]
    return f"torch_tensorrt-{version}.dist-info/sboms/patched_wheel.cdx.json"


def _with_record(history: History, tmp_path: Path, **changes: object) -> Path:
    """A copy of the wheel whose record says otherwise (RECORD made to match)."""
    name = _record_name(history.wheel)

    def change(members: Dict[str, bytes]) -> None:
        record = parse_record(members[name], name)
        members[name] = record_bytes(dataclasses.replace(record, **changes))

    return rewrite_wheel(history.wheel, tmp_path / history.wheel.name, change)


def _verify_in_process(history: History, wheel: Path, **options: object) -> None:
    options.setdefault("lock", Lock({history.base.name: sha256(history.base)}))
    options.setdefault("base_wheel", history.base)
    verify_patched_wheel(wheel, repository=history.repository, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes, message",
    [
        pytest.param(
            {"base_sha256": "ab" * 32},
            "its provenance record names the base torch_tensorrt-2.14.0-cp311-cp311-manylinux_"
            f"2_28_x86_64.whl with sha256 {'ab' * 32}, and the lock's official file has ",
            id="base-sha256",
        ),
        pytest.param(
            {"base_wheel": "torch_tensorrt-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"},
            "the provenance record disagrees with the wheel: it names the base wheel "
            "'torch_tensorrt-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl'",
            id="base-wheel",
        ),
        pytest.param(
            {"label": f"{LABEL_NAME}.3"},
            f"the provenance record disagrees with the wheel: it names the label "
            f"'{LABEL_NAME}.3'",
            id="label",
        ),
        pytest.param(
            {"version": "2.14.0"},
            "the provenance record disagrees with the wheel: it names the version '2.14.0'",
            id="version",
        ),
        pytest.param(
            {"overlay_sha256": "cd" * 32},
            f"its label +{LABEL} is the released overlay",
            id="overlay-sha256",
        ),
    ],
)
def test_a_record_that_lies_is_refused_naming_what(
    history: History, tmp_path: Path, changes: Dict[str, object], message: str
) -> None:
    tampered = _with_record(history, tmp_path, **changes)
    with pytest.raises(PatchError) as error:
        _verify_in_process(history, tampered)
    assert str(error.value).startswith(f"{tampered.name}: ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "changes, problem",
    [
        pytest.param(
            {"revision": "--output=OUTSIDE"},
            "its revision is neither a git commit id nor 'unknown'",
            id="revision-as-git-option",
        ),
        pytest.param(
            {"overlay_sha256": "\x1b[2J" + "0" * 60},
            "its overlay_sha256 is not a sha256 in hex",
            id="digest-with-terminal-escape",
        ),
        pytest.param(
            {"label": "memfix1.2\x1b[2K"},
            "its label holds characters no build writes",
            id="label-with-terminal-escape",
        ),
    ],
)
def test_a_record_field_no_build_writes_is_refused_before_use(
    history: History, tmp_path: Path, changes: Dict[str, str], problem: str
) -> None:
    """A record's revision goes to git's command line; as ``--output=FILE`` it would make git
    write a file. Such fields are refused when the record is read, and nothing is written."""
    outside = tmp_path / "written-by-git"
    changes = {k: v.replace("OUTSIDE", str(outside)) for k, v in changes.items()}
    tampered = _with_record(history, tmp_path, **changes)
    with pytest.raises(PatchError) as error:
        _verify_in_process(history, tampered)
    assert problem in str(error.value)
    assert not outside.exists()


def test_a_record_whose_base_is_not_a_wheel_name_is_refused(
    history: History, tmp_path: Path
) -> None:
    """Edited as text: the build's own writer cannot write such a record."""
    name = _record_name(history.wheel)

    def change(members: Dict[str, bytes]) -> None:
        base = parse_record(members[name], name).base_wheel
        members[name] = members[name].replace(f"file_name={base}".encode(), b"file_name=x.whl")

    tampered = rewrite_wheel(history.wheel, tmp_path / history.wheel.name, change)
    with pytest.raises(PatchError, match="its base wheel is not a wheel's file name"):
        _verify_in_process(history, tampered)


def test_a_wheel_without_a_record_is_refused(history: History, tmp_path: Path) -> None:
    name = _record_name(history.wheel)

    def remove(members: Dict[str, bytes]) -> None:
        del members[name]

    stripped = rewrite_wheel(history.wheel, tmp_path / history.wheel.name, remove)
    with pytest.raises(PatchError, match=f"^{re.escape(stripped.name)}: has no provenance record"):
        _verify_in_process(history, stripped)


def test_a_changed_base_is_refused_naming_the_base(history: History, tmp_path: Path) -> None:
    other = make_wheel(tmp_path, {"torch_tensorrt/extra.py": b"x = 1\n"})
    with pytest.raises(PatchError) as error:
        _verify_in_process(history, history.wheel, base_wheel=other, lock=Lock({}), unlocked=True)
    assert str(error.value).startswith(
        f"the base wheel {other.name} has sha256 {sha256(other)}, and the patched wheel's record "
        f"names {sha256(history.base)}: this base did not make it"
    )


def test_a_changed_overlay_in_the_wheel_is_reported(history: History, tmp_path: Path) -> None:
    def change(members: Dict[str, bytes]) -> None:
        members["torch_tensorrt/dynamo/utils.py"] += b"HIDDEN = 1\n"

    tampered = rewrite_wheel(history.wheel, tmp_path / history.wheel.name, change)
    completed = history.verify(history.repository, tampered)
    assert completed.returncode == 1
    assert "\nchanged: torch_tensorrt/dynamo/utils.py (not what this repository's overlay" in (
        completed.stdout
    )
