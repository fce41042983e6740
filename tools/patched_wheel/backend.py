"""The PEP 517 build backend of this repository: the whole build, without setuptools.

``pip wheel .``, ``pip install .``, ``python -m build`` and ``uv build`` / ``uv pip install .``
call these hooks (``pyproject.toml``: ``build-backend = "patched_wheel.backend"``). Nothing is
compiled: :func:`build_wheel` hands the base that the environment chooses
(:mod:`.config`) to :func:`.lock.open_base` and :func:`.patch.build_patched_wheel`, the
functions the command line's ``build`` calls too, so every route gives the same bytes.

* :func:`prepare_metadata_for_build_wheel` answers with the METADATA the patched wheel will
  carry (the official wheel's, with the patched version), so that pip resolves torch and
  TensorRT exactly as for the official wheel. It resolves the base as the wheel build does
  (fetched, or found in the cache, and checked): pip runs each hook in a process of its own,
  so the wheel build then finds it in the cache.
* :func:`build_sdist` writes the tree the build needs to run again: the build tool with its
  lock, the overlay, ``pyproject.toml``, and ``.source-revision.json`` (the git revision, for
  the provenance of a wheel built from the sdist, where there is no git). Its version is the
  patched version of the chosen base, known without the network.
* The editable hooks refuse: a patched wheel is the official wheel with one file replaced, and
  there is no source tree of it to edit in place.

The base is chosen by the environment only (``TORCHTRT_BASE_*``, see
:mod:`.config`); ``config_settings`` are not read. A refusal is one line,
``error: ...``, and the hook exits with status 1.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, Union

from . import PatchError, config
from .fetch import installed_request
from .lock import load_lock, open_base
from .patch import build_origin, build_patched_wheel, patch_wheel, patched_version, read_overlay
from .provenance import REVISION_FILE, write_revision_file
from .wheel import BaseWheel, parse_wheel_name

ConfigSettings = Optional[Dict[str, Union[str, List[str], None]]]

# The time of the sdist's members without SOURCE_DATE_EPOCH: fixed, so that two sdists of one
# tree are the same bytes (1980-01-01, as the zip floor of the wheels).
SDIST_DEFAULT_MTIME = 315532800

# The files of the repository an sdist carries besides the build tool's folder and the overlay.
SDIST_FILES = ("pyproject.toml", "README.md", "LICENSE")

EDITABLE_REFUSED = (
    "error: an editable install of torch_tensorrt is not possible here: the patched wheel is "
    "the official wheel with one file replaced, so there is no source tree to edit in place; "
    "install it with 'pip install .' (without -e)"
)


@contextlib.contextmanager
def _one_line_errors() -> Iterator[None]:
    """A refusal as one ``error: ...`` line and exit status 1, with the build's log lines."""
    with config.logging_configured():
        try:
            yield
        except PatchError as error:
            raise SystemExit(f"error: {config.escaped(str(error))}") from None
        except config.Interrupted as error:
            raise SystemExit(f"error: {error.describe()}") from None


def _base_from_environment() -> BaseWheel:
    """The base the environment chooses; a local install's is refused here, since pip's
    temporary folder would not keep the original that the way back needs."""
    base = open_base(config.choice_from_environment(os.environ), lock=load_lock())
    if base.local_install:
        raise PatchError(
            f"{base.filename} is a local install that no official wheel matches; build it with "
            "'python tools/patched_wheel build --release installed', which keeps the original "
            "beside the patched wheel for the way back"
        )
    return base


def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> List[str]:
    """Nothing beyond ``build-system.requires``."""
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> List[str]:
    """Nothing beyond ``build-system.requires``."""
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Write ``<name>-<version>.dist-info/METADATA`` as the patched wheel will carry it."""
    with _one_line_errors():
        base = _base_from_environment()
        overlay, data = read_overlay()
        patched = patch_wheel(base, overlay, origin=build_origin(data))
        dist_info = patched.filename.split("-")[0] + "-" + patched.record.version + ".dist-info"
        metadata = zipfile.ZipFile(io.BytesIO(patched.data)).read(f"{dist_info}/METADATA")
    folder = Path(metadata_directory) / dist_info
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "METADATA").write_bytes(metadata)
    return dist_info


def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Write the patched wheel of the chosen base into ``wheel_directory``; its file name."""
    with _one_line_errors():
        base = _base_from_environment()
        patched = build_patched_wheel(base, out_dir=Path(wheel_directory))
        print(f"patched wheel: {patched.name}")
    return patched.name


def sdist_version(choice: config.BaseChoice) -> str:
    """The patched version of the chosen base, known without the network."""
    label = build_origin(read_overlay()[1]).label
    if choice.wheel is not None:
        return patched_version(parse_wheel_name(choice.wheel.name).written_version, label)
    if choice.request.release == config.INSTALLED:
        return patched_version(installed_request().release, label)
    return patched_version(choice.request.release, label)


def _sdist_sources(revision_folder: Path) -> List[Tuple[str, Path]]:
    """(path in the sdist, file) of everything the build needs to run again, sorted."""
    tool = config.LOCK_FILE.parent
    files = [
        (name, config.REPOSITORY / name)
        for name in SDIST_FILES
        if (config.REPOSITORY / name).is_file()
    ]
    files += [
        (path.relative_to(config.REPOSITORY).as_posix(), path)
        for path in tool.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    files.append(
        (config.DEFAULT_OVERLAY.relative_to(config.REPOSITORY).as_posix(), config.DEFAULT_OVERLAY)
    )
    files.append((REVISION_FILE, revision_folder / REVISION_FILE))
    return sorted(files)


def _pkg_info(version: str) -> bytes:
    return (
        "Metadata-Version: 2.1\nName: torch_tensorrt\n"
        f"Version: {version}\n"
        "Summary: torch_tensorrt with the compile-memory fixes, patched into the official wheel\n"
        "Requires-Python: >=3.10\n"
    ).encode("utf-8")


def _tar_member(name: str, data: bytes, mtime: int) -> Tuple[tarfile.TarInfo, io.BytesIO]:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info, io.BytesIO(data)


def _write_sdist(path: Path, top: str, members: List[Tuple[str, bytes]], mtime: int) -> None:
    """A gzip'd tar of ``members`` under ``top/``, with fixed times and owners (reproducible),
    written under a temporary name and renamed into place."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            with gzip.GzipFile(filename="", mode="wb", fileobj=stream, mtime=0) as zipped:
                with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    for name, data in members:
                        tar.addfile(*_tar_member(f"{top}/{name}", data, mtime))
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """Write ``torch_tensorrt-<patched version>.tar.gz`` into ``sdist_directory``."""
    with _one_line_errors():
        version = sdist_version(config.choice_from_environment(os.environ))
    top = f"torch_tensorrt-{version}"
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    mtime = int(epoch) if epoch.isdigit() else SDIST_DEFAULT_MTIME
    with tempfile.TemporaryDirectory() as folder:
        write_revision_file(Path(folder))
        members = [(name, path.read_bytes()) for name, path in _sdist_sources(Path(folder))]
    members = sorted(members + [("PKG-INFO", _pkg_info(version))])
    Path(sdist_directory).mkdir(parents=True, exist_ok=True)
    _write_sdist(Path(sdist_directory) / f"{top}.tar.gz", top, members, mtime)
    return f"{top}.tar.gz"


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> List[str]:
    """Refused: see :data:`EDITABLE_REFUSED`."""
    raise SystemExit(EDITABLE_REFUSED)


def prepare_metadata_for_build_editable(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Refused: see :data:`EDITABLE_REFUSED`."""
    raise SystemExit(EDITABLE_REFUSED)


def build_editable(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Refused: see :data:`EDITABLE_REFUSED`."""
    raise SystemExit(EDITABLE_REFUSED)
