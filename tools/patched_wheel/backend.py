"""The PEP 517 build backend of this repository: the whole build, without setuptools.

pip, ``python -m build`` and uv call these hooks. They hand the base that the environment
chooses (``TORCHTRT_BASE_*``; ``config_settings`` are not read) to the functions the CLI's
``build`` calls, so every route gives the same bytes. The optional hooks are left out, as PEP 517
lets a backend do: nothing is needed beyond ``build-system.requires``, and a frontend reads the
metadata from the built wheel (so pip resolves torch and TensorRT as for the official wheel).
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path
from typing import NoReturn, Optional

from . import PatchError, config, console, files, settings
from .fetch import installed_request
from .lock import load_lock, open_base
from .patch import build_origin, build_patched_wheel, patched_version, read_overlay
from .provenance import REVISION_FILE, write_revision_file
from .wheel import parse_wheel_name, source_date_epoch

# The members' time without SOURCE_DATE_EPOCH (1980-01-01, as in the wheels): one tree, one sdist.
SDIST_DEFAULT_MTIME = 315532800
# The files of the repository an sdist carries besides the build tool's folder and the overlay.
SDIST_FILES = ("pyproject.toml", "README.md", "LICENSE")
PKG_INFO = (
    "Metadata-Version: 2.1\nName: torch_tensorrt\nVersion: {version}\n"
    "Summary: torch_tensorrt with the compile-memory fixes, patched into the official wheel\n"
    "Requires-Python: >=3.10\n"
)


def build_wheel(
    wheel_directory: str,
    config_settings: object = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """Write the patched wheel of the chosen base into ``wheel_directory``; its file name."""
    with console.one_line_errors():
        base = open_base(settings.choice_from_environment(os.environ), lock=load_lock())
        if base.local_install:  # pip's temporary folder would not keep the original
            raise PatchError(
                f"{base.filename} is a local install that no official wheel matches; build it "
                "with 'python tools/patched_wheel build --release installed', which keeps the "
                "original beside the patched wheel for the way back"
            )
        patched = build_patched_wheel(base, out_dir=Path(wheel_directory))
        print(f"patched wheel: {patched.name}")
    return patched.name


def build_sdist(sdist_directory: str, config_settings: object = None) -> str:
    """Write ``torch_tensorrt-<patched version>.tar.gz``: the tree the build needs, reproducibly,
    with ``.source-revision.json`` for the provenance of a wheel built where there is no git."""
    with console.one_line_errors():
        # The patched version of the chosen base, known without the network
        choice = settings.choice_from_environment(os.environ)
        label = build_origin(read_overlay()[1]).label
        if choice.wheel is not None:
            release = parse_wheel_name(choice.wheel.name).written_version
        elif choice.request.release == config.INSTALLED:
            release = installed_request().release
        else:
            release = choice.request.release
        version = patched_version(release, label)
        top = f"torch_tensorrt-{version}"
        epoch = source_date_epoch(os.environ.get("SOURCE_DATE_EPOCH", ""))
        mtime = SDIST_DEFAULT_MTIME if epoch is None else int(epoch)
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
                    info.size, info.mtime = len(data), mtime  # mode 0o644, owner 0: defaults
                    tar.addfile(info, io.BytesIO(data))
        files.write_atomically(Path(sdist_directory) / f"{top}.tar.gz", sdist.getvalue())
    return f"{top}.tar.gz"


def build_editable(*args: object, **kwargs: object) -> NoReturn:
    """Refused, as the other editable hooks are: a patched wheel has no tree to edit in place."""
    raise SystemExit(
        "error: an editable install of torch_tensorrt is not possible here: the patched wheel is "
        "the official wheel with one file replaced, so there is no source tree to edit in place; "
        "install it with 'pip install .' (without -e)"
    )


get_requires_for_build_editable = prepare_metadata_for_build_editable = build_editable
