"""How the build talks to a package index: the exact locked file, credentials never shown, and
one line (no traceback) for a cache folder it cannot use or a list with malformed names.

Every index here is served on localhost (``index_server``), so no test needs the network; the
official wheels come from the cache (the ``base_wheels`` fixture).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import pytest
from index_server import ServedIndex, serving
from patched_wheel.__main__ import main
from patched_wheel.lock import load_lock, write_lock
from wheel_helpers import LABEL, TEST_PLATFORM, TEST_PYTHON, members

TOKEN = "s3cret-t0ken"
RELEASE_ARGS = ["--release", "2.14.0", "--python", TEST_PYTHON, "--platform", TEST_PLATFORM]


@pytest.fixture
def official(base_wheels: Dict[str, Path]) -> Path:
    return base_wheels["2.14.0"]


@pytest.fixture
def cu999(official: Path, synthetic_wheel: Callable[..., Path]) -> Path:
    """A ``2.14.0+cu999`` wheel for the same Python and platform: pip's choice for ``==2.14.0``."""
    return synthetic_wheel(version="2.14.0+cu999", tag=f"cp311-cp311-{TEST_PLATFORM}")


@pytest.fixture
def served(official: Path, cu999: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedIndex]:
    """An index offering the official 2.14.0 wheel and a ``+cu999`` one, set as pip's index."""
    with serving(ServedIndex.of(official, cu999)) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        yield index


def _errors(captured: str) -> List[str]:
    return [line for line in captured.splitlines() if line.strip()]


# --- A locked release is the exact locked file -------------------------------------------------


@pytest.mark.parametrize("unlocked", [[], ["--unlocked"]], ids=["locked", "unlocked-opt-in"])
def test_a_locked_release_is_fetched_by_its_exact_name(
    served: ServedIndex, official: Path, tmp_path: Path, unlocked: List[str]
) -> None:
    argv = ["build", *RELEASE_ARGS, "--cache", str(tmp_path / "cache"), *unlocked]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 0
    (wheel,) = (tmp_path / "out").iterdir()
    assert wheel.name == official.name.replace("2.14.0", f"2.14.0+{LABEL}")
    assert f"/files/{official.name}" in served.requests
    assert not any("cu999" in path for path in served.requests)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [official.name]
    utils = "torch_tensorrt/dynamo/utils.py"
    assert members(wheel)[utils] != members(official)[utils]


def test_an_index_listing_another_sha256_for_the_locked_file_is_refused(
    served: ServedIndex, official: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served.listed_sha256[official.name] = "0" * 64
    argv = ["build", *RELEASE_ARGS, "--cache", str(tmp_path / "cache")]
    assert main(argv + ["--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (
        f"error: the package index {served.url} lists {official.name} with sha256 {'0' * 64}, "
        f"not the lock's {load_lock().wheels[official.name]}; it is not the official file, use "
        "another index\n"
    )
    assert not (tmp_path / "out").exists()


# --- Credentials in the index URL ----------------------------------------------------------


@pytest.fixture
def private(official: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedIndex]:
    """An index behind basic authentication, set as pip's index with the right credentials."""
    with serving(ServedIndex.of(official, credentials=("user", TOKEN))) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url.replace("://", f"://user:{TOKEN}@"))
        yield index


def test_an_index_url_with_credentials_works_for_build_lock_and_matrix(
    private: ServedIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build = ["build", *RELEASE_ARGS, "--cache", str(tmp_path / "c1"), "--out", str(tmp_path / "b")]
    assert main(build) == 0
    lock_file = tmp_path / "lock.json"
    write_lock({}, lock_file)
    assert main(["lock", *RELEASE_ARGS, "--lock", str(lock_file)]) == 0
    assert load_lock(lock_file).wheels == {name: load_lock().wheels[name] for name in private.files}
    matrix = ["matrix", *RELEASE_ARGS, "--cache", str(tmp_path / "c2"), "--out"]
    assert main(matrix + [str(tmp_path / "m")]) == 0
    assert TOKEN not in "".join(capsys.readouterr())


@pytest.mark.parametrize("command", ["build", "lock", "matrix"])
@pytest.mark.parametrize(
    "url",
    [
        pytest.param(f"http://user:{TOKEN}@127.0.0.1:{{port}}/simple", id="refused-credentials"),
        pytest.param(f"https://user:{TOKEN}@index.invalid/simple", id="no-port-unreachable"),
    ],
)
def test_credentials_are_never_printed(
    command: str,
    url: str,
    official: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with serving(ServedIndex.of(official, credentials=("user", "another"))) as index:
        port = index.url.split(":")[2].split("/")[0]
        monkeypatch.setenv("PIP_INDEX_URL", url.format(port=port))
        lock_file = tmp_path / "lock.json"
        write_lock({}, lock_file)
        argv = {
            "build": ["build", *RELEASE_ARGS, "--cache", str(tmp_path / "c")],
            "lock": ["lock", *RELEASE_ARGS, "--lock", str(lock_file)],
            "matrix": ["matrix", *RELEASE_ARGS, "--cache", str(tmp_path / "c")],
        }[command]
        assert main(argv + (["--out", str(tmp_path / "o")] if command != "lock" else [])) == 1
    captured = capsys.readouterr()
    assert TOKEN not in captured.out + captured.err
    (line,) = _errors(captured.err)
    shown = re.escape(url.format(port=port).replace(f"user:{TOKEN}@", ""))
    assert re.match(f"error: .*(could not reach the package index|the package index) {shown}", line)


def _self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no system trusts, and its key."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj"]
        + ["/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is required")
def test_an_https_index_is_trusted_through_pips_cert_setting(
    official: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A private index's own certificate authority, set in pip's configuration, is the one the
    build trusts; without it, the index is refused in one line."""
    cert, key = _self_signed(tmp_path)
    monkeypatch.delenv("PIP_CERT", raising=False)
    without, with_cert = tmp_path / "plain.conf", tmp_path / "cert.conf"
    without.write_text("[global]\n")
    with_cert.write_text(f"[global]\ncert = {cert}\n")
    with serving(ServedIndex.of(official), tls=(cert, key)) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        monkeypatch.setenv("PIP_CONFIG_FILE", str(without))
        argv = ["build", *RELEASE_ARGS, "--cache", str(tmp_path / "c"), "--out"]
        assert main(argv + [str(tmp_path / "refused")]) == 1
        (line,) = _errors(capsys.readouterr().err)
        assert line.startswith(f"error: could not reach the package index {index.url}/")
        assert "CERTIFICATE_VERIFY_FAILED" in line
        monkeypatch.setenv("PIP_CONFIG_FILE", str(with_cert))
        assert main(argv + [str(tmp_path / "built")]) == 0
    assert [p.name for p in (tmp_path / "built").iterdir()] == [
        official.name.replace("2.14.0", f"2.14.0+{LABEL}")
    ]


# --- The cache folder, and malformed names in the index's list -----------------------------


@pytest.fixture(params=["a-file", "under-proc"])
def unusable_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "a-file":
        (tmp_path / "file").write_text("not a folder")
        return tmp_path / "file"
    return Path("/proc/torchtrt-cache")


def test_a_cache_folder_that_cannot_be_made_is_one_line(
    unusable_cache: Path,
    served: ServedIndex,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    official: Path,
) -> None:
    patched = tmp_path / "patched"
    assert main(["build", "--base-wheel", str(official), "--out", str(patched)]) == 0
    (patched_wheel,) = patched.iterdir()
    capsys.readouterr()
    for argv in (
        ["build", *RELEASE_ARGS, "--out", str(tmp_path / "out")],
        ["matrix", *RELEASE_ARGS, "--out", str(tmp_path / "out")],
        ["verify", str(patched_wheel)],
    ):
        assert main(argv + ["--cache", str(unusable_cache)]) == 1, argv
        (line,) = _errors(capsys.readouterr().err)
        assert re.fullmatch(
            re.escape(f"error: the cache folder {str(unusable_cache)!r} ")
            + r"(cannot be created \(.+\);|is not a folder;)"
            + re.escape(" give a folder you can write with --cache"),
            line,
        ), line
    assert not (tmp_path / "out").exists()


MALFORMED = ["torch_tensorrt-2.14.0-x-y-z-w.whl", "torch_tensorrt-not.a.version-py3-none-any.whl"]


def test_malformed_names_in_the_index_list_are_skipped_with_a_warning(
    served: ServedIndex,
    official: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served.extra_names.extend(MALFORMED)
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(official, cache / official.name)
    lock_file = tmp_path / "lock.json"
    write_lock({}, lock_file)
    assert main(["lock", *RELEASE_ARGS, "--lock", str(lock_file)]) == 0
    matrix = ["matrix", *RELEASE_ARGS, "--cache", str(cache), "--out", str(tmp_path / "m")]
    assert main(matrix) == 0
    err = capsys.readouterr().err
    for name in MALFORMED:
        warning = (
            f"warning: the package index {served.url}/torch-tensorrt/ lists {name!r}, which is "
            "not a wheel file name; skipped"
        )
        assert err.count(warning) == 2, err  # once by lock, once by matrix
    assert "Traceback" not in err
