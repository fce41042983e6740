"""The simple index of patched wheels: its pages, and pip and uv installing from it."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Tuple
from urllib.parse import unquote

import pytest
from index_server import ServedIndex, serving
from installed_helpers import INDEX_BASES, plain_index
from patched_wheel import PatchError
from patched_wheel.__main__ import main
from patched_wheel.index import IndexedWheel, index_pages
from patched_wheel.index import write_simple_index as write_index
from patched_wheel.lock import load_lock
from patched_wheel.paths import DEFAULT_CACHE_DIR
from patched_wheel.request import BaseRequest
from patched_wheel.verify import listing_refusal
from uv import find_uv_bin
from wheel_helpers import LABEL, fetch

PATCHED_X86 = f"torch_tensorrt-2.14.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl"

# uv's names of the platforms of the matrix.
UV_PLATFORMS = {
    "manylinux_2_28_x86_64": "x86_64-manylinux_2_28",
    "manylinux_2_28_aarch64": "aarch64-manylinux_2_28",
    "win_amd64": "x86_64-pc-windows-msvc",
}
NEWEST = [
    pytest.param(r, id=f"{r.platform}-{r.python}") for r in INDEX_BASES if r.release == "2.14.0"
]


class Links(HTMLParser):
    """The anchors of a page: (href, data-requires-python, text), attributes unescaped."""

    def __init__(self) -> None:
        super().__init__()
        self.links: List[Tuple[str, str | None, str]] = []
        self._open: Dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str | None]]) -> None:
        if tag == "a":
            self._open = dict(attrs)

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            href = self._open.get("href") or ""
            self.links.append((href, self._open.get("data-requires-python"), data))
            self._open = None


def links(page: str) -> List[Tuple[str, str | None, str]]:
    parser = Links()
    parser.feed(page)
    return parser.links


def write_simple_index(folder: Path) -> Path:
    """The index of ``folder``, its wheels verified as the commands verify them: against the
    lock, and the overlay each wheel's record names."""
    check = functools.partial(listing_refusal, lock=load_lock(), cache_dir=DEFAULT_CACHE_DIR)
    return write_index(folder, check=check)


@pytest.fixture(scope="module")
def index_dir(index_wheels: Dict[BaseRequest, Path]) -> Path:
    folder = next(iter(index_wheels.values())).parent
    return write_simple_index(folder)


def isolated_environment() -> Dict[str, str]:
    """The environment without pip's or uv's configuration files and index variables."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    environment.update(PIP_CONFIG_FILE=os.devnull, UV_NO_CONFIG="1")
    return environment


def pip_download(
    index_dir: Path, dest: Path, requirement: str, platform: str, python: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        "--disable-pip-version-check", "--index-url", index_dir.as_uri(), "--platform", platform,
        "--python-version", python, "--implementation", "cp", "--dest", str(dest), *extra,
        requirement,
    ]  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, env=isolated_environment(), check=False
    )


def uv_install(
    index_dir: Path,
    target: Path,
    requirement: str,
    platform: str,
    python: str,
    *,
    dry_run: bool = True,
    extra: Tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    command = [
        find_uv_bin(), "pip", "install", "--no-deps", "--no-cache", "--index-url",
        index_dir.as_uri(), "--python-platform", UV_PLATFORMS[platform], "--python-version",
        python, "--target", str(target), *extra, requirement,
    ] + (["--dry-run"] if dry_run else [])  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, env=isolated_environment(), check=False
    )


# The pages, made from the wheels' names, digests and Python requirements.


def test_pages_list_the_normalized_project_and_its_wheels() -> None:
    wheels = [
        IndexedWheel(PATCHED_X86, "ab" * 32, ">=3.10"),
        IndexedWheel(f"Torch_TensorRT-2.12.0+{LABEL}-cp311-cp311-win_amd64.whl", "cd" * 32, None),
        IndexedWheel("other-1.0-py3-none-any.whl", "ef" * 32, '<4,>=3.9 ; "&"'),
    ]
    pages = index_pages(wheels)
    assert sorted(pages) == ["index.html", "other/index.html", "torch-tensorrt/index.html"]
    assert links(pages["index.html"]) == [
        ("other/", None, "other"),
        ("torch-tensorrt/", None, "torch-tensorrt"),
    ]
    assert links(pages["torch-tensorrt/index.html"]) == [
        (
            f"../../Torch_TensorRT-2.12.0%2B{LABEL}-cp311-cp311-win_amd64.whl#sha256=" + "cd" * 32,
            None,
            f"Torch_TensorRT-2.12.0+{LABEL}-cp311-cp311-win_amd64.whl",
        ),
        (
            f"../../torch_tensorrt-2.14.0%2B{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl"
            "#sha256=" + "ab" * 32,
            ">=3.10",
            PATCHED_X86,
        ),
    ]
    assert links(pages["other/index.html"])[0][1] == '<4,>=3.9 ; "&"'
    assert 'data-requires-python="&lt;4,&gt;=3.9 ; &quot;&amp;&quot;"' in pages["other/index.html"]


def test_the_index_of_a_folder_links_each_wheel_with_its_digest(
    index_dir: Path, index_wheels: Dict[BaseRequest, Path]
) -> None:
    folder = index_dir.parent
    assert sorted(p.name for p in index_dir.rglob("*")) == [
        "index.html", "index.html", "torch-tensorrt"
    ]  # fmt: skip
    found = links((index_dir / "torch-tensorrt" / "index.html").read_text(encoding="utf-8"))
    assert sorted(text for _, _, text in found) == sorted(p.name for p in index_wheels.values())
    for href, requires_python, text in found:
        path, _, fragment = href.partition("#")
        wheel = Path(os.path.normpath(index_dir / "torch-tensorrt" / unquote(path)))
        assert wheel == folder / text
        assert fragment == f"sha256={hashlib.sha256(wheel.read_bytes()).hexdigest()}"
        assert requires_python == ">=3.10"


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PatchError, match="holds no wheel to index; build them first with"):
        write_simple_index(tmp_path)
    assert not (tmp_path / "simple").exists()


def test_a_file_that_is_not_a_wheel_is_refused(tmp_path: Path) -> None:
    (tmp_path / PATCHED_X86).write_bytes(b"not a zip")
    with pytest.raises(PatchError, match=f"^{re.escape(PATCHED_X86)}: not a valid zip file"):
        write_simple_index(tmp_path)


def test_the_index_command(
    index_wheels: Dict[BaseRequest, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = index_wheels[INDEX_BASES[0]]
    (tmp_path / wheel.name).symlink_to(wheel)
    assert main(["index", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        f"{tmp_path / 'simple'}: pip install --extra-index-url {(tmp_path / 'simple').as_uri()} "
        "torch_tensorrt\n"
    )
    assert [
        text for _, _, text in links((tmp_path / "simple/torch-tensorrt/index.html").read_text())
    ] == [wheel.name]
    assert main(["index", str(tmp_path / "missing")]) == 1
    assert "is not a folder; give the folder of the wheels" in capsys.readouterr().err


@pytest.mark.network
def test_the_matrix_command_writes_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against an index served here, offering the official wheel (fetched into the cache)."""
    official = fetch("2.14.0", "3.11", "manylinux_2_28_x86_64")
    arguments = ["--release", "2.14.0", "--platform", "manylinux_2_28_x86_64", "--python", "3.11"]
    with serving(ServedIndex.of(official)) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        assert main(["matrix", "--out", str(tmp_path), *arguments]) == 0
    found = links((tmp_path / "simple" / "torch-tensorrt" / "index.html").read_text())
    assert [text for _, _, text in found] == [PATCHED_X86]


# pip and uv, pointed at the index, pick the wheel of each platform and Python.


@pytest.mark.parametrize("request_", NEWEST)
def test_pip_downloads_the_wheel_of_each_platform(
    request_: BaseRequest, index_dir: Path, index_wheels: Dict[BaseRequest, Path], tmp_path: Path
) -> None:
    assert request_.platform is not None and request_.python is not None
    completed = pip_download(
        index_dir, tmp_path, f"torch_tensorrt==2.14.0+{LABEL}", request_.platform, request_.python
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [p.name for p in tmp_path.iterdir()] == [index_wheels[request_].name]


@pytest.mark.parametrize(
    "requirement, expected",
    [
        pytest.param("torch_tensorrt", PATCHED_X86, id="newest"),
        pytest.param(
            "torch_tensorrt==2.12.0",
            f"torch_tensorrt-2.12.0+{LABEL}-cp311-cp311-manylinux_2_28_x86_64.whl",
            id="release-matches-the-labelled-version",
        ),
    ],
)
def test_pip_resolves_versions_in_the_index(
    requirement: str, expected: str, index_dir: Path, tmp_path: Path
) -> None:
    completed = pip_download(index_dir, tmp_path, requirement, "manylinux_2_28_x86_64", "3.11")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert [p.name for p in tmp_path.iterdir()] == [expected]


def test_pip_finds_nothing_for_a_python_without_wheels(index_dir: Path, tmp_path: Path) -> None:
    completed = pip_download(index_dir, tmp_path, "torch_tensorrt", "manylinux_2_28_x86_64", "3.10")
    assert completed.returncode != 0
    assert "No matching distribution found for torch_tensorrt" in completed.stderr


def test_pip_and_uv_refuse_a_wheel_whose_digest_differs(
    index_wheels: Dict[BaseRequest, Path], tmp_path: Path
) -> None:
    wheel = index_wheels[INDEX_BASES[0]]
    (tmp_path / wheel.name).symlink_to(wheel)
    page = write_simple_index(tmp_path) / "torch-tensorrt" / "index.html"
    page.write_text(
        page.read_text().replace(hashlib.sha256(wheel.read_bytes()).hexdigest(), "0" * 64)
    )
    arguments = ("torch_tensorrt", "manylinux_2_28_x86_64", "3.11")
    by_pip = pip_download(tmp_path / "simple", tmp_path / "pip", *arguments)
    assert by_pip.returncode != 0
    assert "DO NOT MATCH THE HASHES" in by_pip.stderr
    by_uv = uv_install(tmp_path / "simple", tmp_path / "uv", *arguments, dry_run=False)
    assert by_uv.returncode != 0
    assert f"Hash mismatch for `torch-tensorrt==2.14.0+{LABEL}`" in by_uv.stderr


@pytest.mark.parametrize("request_", NEWEST)
def test_uv_resolves_the_patched_wheel_on_each_platform(
    request_: BaseRequest, index_dir: Path, tmp_path: Path
) -> None:
    assert request_.platform is not None and request_.python is not None
    completed = uv_install(
        index_dir, tmp_path, "torch_tensorrt", request_.platform, request_.python
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f" + torch-tensorrt==2.14.0+{LABEL}\n" in completed.stderr
    assert not list(tmp_path.rglob("torch_tensorrt*")), "a dry run installs nothing"


def test_uv_finds_nothing_for_a_python_without_wheels(index_dir: Path, tmp_path: Path) -> None:
    completed = uv_install(index_dir, tmp_path, "torch_tensorrt", "win_amd64", "3.10")
    assert completed.returncode != 0
    assert "all versions of torch-tensorrt have no wheels with a matching" in completed.stderr


def test_uv_installs_the_wheel_checking_its_digest(index_dir: Path, tmp_path: Path) -> None:
    completed = uv_install(
        index_dir,
        tmp_path,
        f"torch_tensorrt==2.14.0+{LABEL}",
        "manylinux_2_28_x86_64",
        "3.11",
        dry_run=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert (tmp_path / f"torch_tensorrt-2.14.0+{LABEL}.dist-info" / "METADATA").is_file()
    assert (tmp_path / "torch_tensorrt" / "dynamo" / "utils.py").read_text().count(
        "def trim_host_heap("
    ) == 1


# Beside the official index: the local label makes the patched wheel the one installed.


@pytest.fixture(scope="module")
def official_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index of the official 2.14.0 wheel (cp311, x86_64): PyPI, as far as these tests go."""
    folder = tmp_path_factory.mktemp("official-index")
    official = DEFAULT_CACHE_DIR / PATCHED_X86.replace(f"+{LABEL}", "")
    (folder / official.name).symlink_to(official)
    return plain_index(folder)  # index refuses an official wheel


def test_pip_prefers_the_patched_wheel_of_a_release_over_the_official_one(
    official_index: Path, index_dir: Path, tmp_path: Path
) -> None:
    arguments = ("torch_tensorrt==2.14.0", "manylinux_2_28_x86_64", "3.11")
    both = pip_download(
        official_index, tmp_path / "both", *arguments, "--extra-index-url", index_dir.as_uri()
    )
    assert both.returncode == 0, both.stdout + both.stderr
    assert [p.name for p in (tmp_path / "both").iterdir()] == [PATCHED_X86]
    official_only = pip_download(official_index, tmp_path / "official", *arguments)
    assert official_only.returncode == 0, official_only.stdout + official_only.stderr
    assert [p.name for p in (tmp_path / "official").iterdir()] == [
        PATCHED_X86.replace(f"+{LABEL}", "")
    ]


def test_uv_takes_the_release_from_the_extra_index(
    official_index: Path, index_dir: Path, tmp_path: Path
) -> None:
    completed = uv_install(
        official_index, tmp_path, "torch_tensorrt==2.14.0", "manylinux_2_28_x86_64", "3.11",
        extra=("--extra-index-url", index_dir.as_uri()),
    )  # fmt: skip
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert f" + torch-tensorrt==2.14.0+{LABEL}\n" in completed.stderr


# Only wheels that pass verify are listed; the rest are refused, one line each.

REFUSED_BY_NAME = [
    pytest.param(
        "torch-99.0.0-cp311-cp311-manylinux_2_28_x86_64.whl",
        "torch-99.0.0-cp311-cp311-manylinux_2_28_x86_64.whl: not a torch-tensorrt wheel; the "
        "index lists only this repository's patched wheels, move it out of the folder",
        id="another-project",
    ),
    pytest.param(
        "tensorrt_cu13-99.0-py3-none-manylinux_2_28_x86_64.whl",
        "tensorrt_cu13-99.0-py3-none-manylinux_2_28_x86_64.whl: not a torch-tensorrt wheel; the "
        "index lists only this repository's patched wheels, move it out of the folder",
        id="dependency-confusion",
    ),
]


@pytest.mark.parametrize(("name", "message"), REFUSED_BY_NAME)
def test_a_wheel_of_another_project_is_refused_by_name(
    tmp_path: Path, name: str, message: str
) -> None:
    (tmp_path / name).write_bytes(b"never read")
    with pytest.raises(PatchError) as error:
        write_simple_index(tmp_path)
    assert str(error.value) == message
    assert not (tmp_path / "simple").exists()


def test_an_official_wheel_is_refused_by_name(tmp_path: Path) -> None:
    official = DEFAULT_CACHE_DIR / PATCHED_X86.replace(f"+{LABEL}", "")
    (tmp_path / official.name).symlink_to(official)
    with pytest.raises(
        PatchError,
        match=re.escape(
            f"{official.name}: its version '2.14.0' carries no label of this fork, so this "
            "repository's build did not make it"
        ),
    ):
        write_simple_index(tmp_path)
    assert not (tmp_path / "simple").exists()


def test_a_tampered_wheel_with_record_recomputed_is_refused(
    index_wheels: Dict[BaseRequest, Path], tmp_path: Path
) -> None:
    """RECORD agrees with the changed file, so only verify's comparison can catch it."""
    from installed_helpers import rewrite_wheel

    def change(members: Dict[str, bytes]) -> None:
        members["torch_tensorrt/_compile.py"] += b"import os\n"

    rewrite_wheel(index_wheels[INDEX_BASES[0]], tmp_path / PATCHED_X86, change)
    with pytest.raises(PatchError) as error:
        write_simple_index(tmp_path)
    assert str(error.value) == (
        f"NOT verified: {PATCHED_X86} differs from the official wheel plus this repository's "
        "overlay in 1 file (listed above); do not install it"
    )
    assert not (tmp_path / "simple").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_named_as_a_wheel_is_refused_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / PATCHED_X86)
    pattern = f"^the wheel '.*{re.escape(PATCHED_X86)}' cannot be read \\(not a regular file\\)"
    with pytest.raises(PatchError, match=pattern):
        write_simple_index(tmp_path)


def test_every_refused_wheel_gets_one_line_and_nothing_is_written(
    index_wheels: Dict[BaseRequest, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = index_wheels[INDEX_BASES[0]]
    (tmp_path / good.name).symlink_to(good)
    for param in REFUSED_BY_NAME:
        (tmp_path / param.values[0]).write_bytes(b"never read")  # type: ignore[operator]
    assert main(["index", str(tmp_path)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("overlay:")]
    assert err == [
        f"error: {param.values[1]}" for param in sorted(REFUSED_BY_NAME, key=lambda p: p.values[0])
    ] + [
        "error: 2 of 3 wheels cannot be listed (above); remove them from the folder or build "
        "them again with 'python tools/patched_wheel matrix'"
    ]
    assert not (tmp_path / "simple").exists()
