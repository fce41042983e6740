"""A PEP 503 simple index of the verified wheels in a folder, so that pip and uv install them.

``index DIR`` (and ``matrix --out DIR``) writes ``DIR/simple/index.html`` (the projects) and
``DIR/simple/<project>/index.html`` (one page per distribution, its wheels). Each link
carries the wheel's ``#sha256=``, which pip and uv check after the download, and its
``data-requires-python``, from METADATA, so an installer skips a wheel its Python cannot use.
Links are relative (``../../<wheel>``): the folder works from disk or behind a static host.

Each wheel is read once; that one byte string is verified (:func:`~.verify.verify_bytes`),
and its sha256 and ``Requires-Python`` are taken from it, so no file swapped between reads
can reach a page. Only verified wheels are listed; any other (another project, an unpatched
or development build, a tampered file) is refused, one line each, and nothing is written.
The folders are created and written without following a symlink out of ``DIR``; pages are
written under a temporary name and renamed, so a host never serves half a page.
"""

from __future__ import annotations

import hashlib
import html
import io
import logging
import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence
from urllib.parse import quote

from packaging.utils import canonicalize_name

from . import PatchError, config
from .wheel import header_values, parse_wheel_name

logger = logging.getLogger(__name__)

INDEX_DIR_NAME = "simple"
# Why a wheel (its bytes and file name) may not be listed, in one line; None: it may.
ListingCheck = Callable[[bytes, str], Optional[str]]

_PAGE = """\
<!DOCTYPE html>
<html>
  <head>
    <meta name="pypi:repository-version" content="1.0">
    <title>{title}</title>
  </head>
  <body>
    <h1>{title}</h1>
{links}
  </body>
</html>
"""


@dataclass(frozen=True)
class IndexedWheel:
    """What the index says of one wheel: its file name, sha256 and ``Requires-Python``."""

    filename: str
    sha256: str
    requires_python: Optional[str]

    @property
    def project(self) -> str:
        return str(parse_wheel_name(self.filename).name)


def _page(title: str, links: Sequence[str]) -> str:
    body = "\n".join(f"    {link}<br>" for link in links)
    return _PAGE.format(title=html.escape(title), links=body)


def index_pages(wheels: Sequence[IndexedWheel]) -> Dict[str, str]:
    """The pages, by path relative to the index folder: ``index.html`` lists the projects,
    ``<project>/index.html`` a project's wheels in name order, linked two folders up."""
    by_project: Dict[str, List[str]] = {}
    for wheel in sorted(wheels, key=lambda w: w.filename):
        href = html.escape(f"../../{quote(wheel.filename)}#sha256={wheel.sha256}")
        requires = wheel.requires_python
        attribute = f' data-requires-python="{html.escape(requires)}"' if requires else ""
        link = f'<a href="{href}"{attribute}>{html.escape(wheel.filename)}</a>'
        by_project.setdefault(wheel.project, []).append(link)
    pages = {
        f"{p}/index.html": _page(f"Links for {p}", links) for p, links in sorted(by_project.items())
    }
    projects = [
        f'<a href="{html.escape(quote(p))}/">{html.escape(p)}</a>' for p in sorted(by_project)
    ]
    pages["index.html"] = _page("Simple index", projects)
    return pages


def indexed_wheel(data: bytes, filename: str) -> IndexedWheel:
    """The index's entry of a wheel from its bytes (the ones the check judged)."""
    name = parse_wheel_name(filename)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(f"{name.dist_info}/METADATA")
        with archive.open(info) as stream:
            metadata = stream.read(1 << 20)
    requires = header_values(metadata, "Requires-Python")
    return IndexedWheel(
        filename, hashlib.sha256(data).hexdigest(), requires[0] if requires else None
    )


def _real_folder(folder: Path, top: Path) -> None:
    """Create ``folder`` inside ``top`` (each part a real folder, never a symlink)."""
    for part in reversed([p for p in [folder, *folder.parents] if top in p.parents]):
        try:
            os.mkdir(part)
        except FileExistsError:
            pass
        if not stat.S_ISDIR(os.lstat(part).st_mode):
            raise PatchError(
                f"{str(part)!r} is a symlink or not a folder; the index writes only inside "
                f"{str(top)!r}: remove it and index again"
            )


def write_simple_index(wheel_dir: Path, *, check: ListingCheck) -> Path:
    """Write the simple index of the ``*.whl`` files directly in ``wheel_dir`` (hidden ones,
    such as the build's temporary files, left out) into ``wheel_dir/simple``.

    Raises:
        PatchError: If ``wheel_dir`` holds no wheel, or any that may not be listed (then
            nothing is written), or a folder of the index is a symlink.
    """
    wheel_dir = Path(wheel_dir)
    if not wheel_dir.is_dir():
        raise PatchError(f"{str(wheel_dir)!r} is not a folder; give the folder of the wheels")
    paths = sorted(p for p in wheel_dir.glob("*.whl") if not p.name.startswith("."))
    if not paths:
        raise PatchError(
            f"{str(wheel_dir)!r} holds no wheel to index; build them first with "
            f"'python tools/patched_wheel matrix --out {wheel_dir}'"
        )
    listed, problems = [], []
    for path in paths:
        try:
            project = parse_wheel_name(path.name).name
            if project not in map(canonicalize_name, config.DISTRIBUTIONS):
                raise PatchError(
                    f"{path.name}: not a {config.DISTRIBUTIONS[0]} wheel; the index lists only "
                    "this "
                    "repository's patched wheels, move it out of the folder"
                )
            data = config.read_file(path, what="the wheel", cap=config.MAX_WHEEL_BYTES)
            problem = check(data, path.name)
            if problem is not None:
                raise PatchError(problem)
            listed.append(indexed_wheel(data, path.name))
        except (PatchError, KeyError, zipfile.BadZipFile) as error:
            problems.append(config.escaped(str(error)))
    if len(problems) > 1:
        for problem in problems:
            logger.error("%s", problem)
        raise PatchError(
            f"{len(problems)} of {len(paths)} wheels cannot be listed (above); remove them from "
            "the folder or build them again with 'python tools/patched_wheel matrix'"
        )
    if problems:
        raise PatchError(problems[0])
    index_dir = wheel_dir / INDEX_DIR_NAME
    pages = index_pages(listed)
    # The project list last, so that it never links a page not yet written.
    for relative in sorted(pages, key=lambda name: name == "index.html"):
        page = index_dir / relative
        _real_folder(page.parent, wheel_dir)
        config.write_text_atomically(page, pages[relative])
    logger.info("indexed %d wheels in %s", len(paths), index_dir)
    return index_dir
