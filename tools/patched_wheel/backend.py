"""The PEP 517 build backend of this repository: the whole build, without setuptools.

pip, ``python -m build`` and uv call these hooks. They hand the base that the environment
chooses (``TORCHTRT_BASE_*``; ``config_settings`` are not read) to the functions the CLI's
``build`` calls, so every route gives the same bytes; the METADATA hook answers with the patched
wheel's, so that pip resolves torch and TensorRT as for the official wheel. The optional
``get_requires_for_build_*`` hooks are left out: nothing is needed beyond ``build-system.requires``.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, NoReturn, Optional, Union

from . import config
from .config import PatchError  # the class one_line_errors catches (config re-exports it)
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
PKG_INFO = (
    "Metadata-Version: 2.1\nName: torch_tensorrt\nVersion: {version}\n"
    "Summary: torch_tensorrt with the compile-memory fixes, patched into the official wheel\n"
    "Requires-Python: >=3.10\n"
)


def _base_from_environment() -> BaseWheel:
    """The base the environment chooses; a local install's is refused (pip's temporary folder
    would not keep the original that the way back needs)."""
    base = open_base(config.choice_from_environment(os.environ), lock=load_lock())
    if base.local_install:
        raise PatchError(
            f"{base.filename} is a local install that no official wheel matches; build it with "
            "'python tools/patched_wheel build --release installed', which keeps the original "
            "beside the patched wheel for the way back"
        )
    return base


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: ConfigSettings = None
) -> str:
    """Write ``<name>-<version>.dist-info/METADATA`` as the patched wheel will carry it."""
    with config.one_line_errors():
        base = _base_from_environment()
        overlay, data = read_overlay()
        patched = patch_wheel(base, overlay, origin=build_origin(data))
        dist_info = patched.filename.split("-")[0] + "-" + patched.record.version + ".dist-info"
        metadata = zipfile.ZipFile(io.BytesIO(patched.data)).read(f"{dist_info}/METADATA")
        config.write_atomically(Path(metadata_directory) / dist_info / "METADATA", metadata)
    return dist_info


def build_wheel(
    wheel_directory: str,
    config_settings: ConfigSettings = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Write the patched wheel of the chosen base into ``wheel_directory``; its file name."""
    with config.one_line_errors():
        base = _base_from_environment()
        patched = build_patched_wheel(base, out_dir=Path(wheel_directory))
        print(f"patched wheel: {patched.name}")
    return patched.name


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    """Write ``torch_tensorrt-<patched version>.tar.gz``: the tree the build needs, reproducibly,
    with ``.source-revision.json`` for the provenance of a wheel built where there is no git."""
    with config.one_line_errors():
        # The patched version of the chosen base, known without the network
        choice = config.choice_from_environment(os.environ)
        label = build_origin(read_overlay()[1]).label
        if choice.wheel is not None:
            release = parse_wheel_name(choice.wheel.name).written_version
        elif choice.request.release == config.INSTALLED:
            release = installed_request().release
        else:
            release = choice.request.release
        version = patched_version(release, label)
        top = f"torch_tensorrt-{version}"
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        mtime = int(epoch) if epoch.isdigit() else SDIST_DEFAULT_MTIME
        # The members: what the build needs to run again, the revision file and PKG-INFO
        tool = [p for p in config.LOCK_FILE.parent.rglob("*") if "__pycache__" not in p.parts]
        sources = [config.REPOSITORY / name for name in SDIST_FILES] + [config.DEFAULT_OVERLAY]
        sources = [p for p in sources + tool if p.is_file() and p.suffix != ".pyc"]
        members = {p.relative_to(config.REPOSITORY).as_posix(): p.read_bytes() for p in sources}
        with tempfile.TemporaryDirectory() as folder:
            write_revision_file(Path(folder))
            members[REVISION_FILE] = (Path(folder) / REVISION_FILE).read_bytes()
        members["PKG-INFO"] = PKG_INFO.format(version=version).encode("utf-8")
        # The gzip'd tar, in memory, then written whole
        sdist = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=sdist, mtime=0) as zipped:
            with tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for name, data in sorted(members.items()):
                    info = tarfile.TarInfo(f"{top}/{name}")
                    info.size, info.mtime, info.mode = len(data), mtime, 0o644
                    info.uid, info.gid, info.uname, info.gname = 0, 0, "", ""
                    tar.addfile(info, io.BytesIO(data))
        config.write_atomically(Path(sdist_directory) / f"{top}.tar.gz", sdist.getvalue())
    return f"{top}.tar.gz"


def build_editable(*args: object, **kwargs: object) -> NoReturn:
    """Refused, as the other editable hooks are: a patched wheel has no tree to edit in place."""
    raise SystemExit(
        "error: an editable install of torch_tensorrt is not possible here: the patched wheel is "
        "the official wheel with one file replaced, so there is no source tree to edit in place; "
        "install it with 'pip install .' (without -e)"
    )


get_requires_for_build_editable = prepare_metadata_for_build_editable = build_editable
