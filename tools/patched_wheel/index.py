"""A PEP 503 simple index of the verified wheels in a folder, so that pip and uv install them.

A page per project, each link relative (the folder works from disk or a static host) with
``#sha256=`` and ``data-requires-python``. Each wheel is read once and those bytes verified,
hashed and read, so no file swapped between reads reaches a page; a wheel not verified is
refused and nothing is written. No symlinked folder is followed; pages are renamed into place.
"""

from __future__ import annotations

import hashlib
import html
import io
import logging
import os
import stat
import zipfile
from contextlib import suppress
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple
from urllib.parse import quote

from . import PatchError, config, console, files
from .wheel import header_values, parse_wheel_name, read_member

logger = logging.getLogger(__name__)

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


# What the index says of one wheel: its file name, sha256 and Requires-Python.
IndexedWheel = Tuple[str, str, Optional[str]]


def _page(title: str, links: Iterable[Tuple[str, str, str]]) -> str:
    """A page of ``links`` (href, text, attributes), each href and text escaped here."""
    rows = [f'    <a href="{html.escape(h)}"{a}>{html.escape(t)}</a><br>' for h, t, a in links]
    return _PAGE.format(title=html.escape(title), links="\n".join(rows))


def index_pages(wheels: Sequence[IndexedWheel]) -> Dict[str, str]:
    """The pages by path in the index folder: ``index.html`` (the projects) and
    ``<project>/index.html`` (a project's wheels in name order, linked two folders up)."""
    by_project: Dict[str, List[Tuple[str, str, str]]] = {}
    for filename, sha256, requires in sorted(wheels):
        attribute = f' data-requires-python="{html.escape(requires)}"' if requires else ""
        link = (f"../../{quote(filename)}#sha256={sha256}", filename, attribute)
        by_project.setdefault(parse_wheel_name(filename).name, []).append(link)
    pages = {f"{p}/index.html": _page(f"Links for {p}", by_project[p]) for p in sorted(by_project)}
    projects = [(f"{quote(p)}/", p, "") for p in sorted(by_project)]
    return {**pages, "index.html": _page("Simple index", projects)}


def indexed_wheel(data: bytes, filename: str) -> IndexedWheel:
    """The index's entry of a wheel from its bytes (the ones the check judged)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(f"{parse_wheel_name(filename).dist_info}/METADATA")
        requires = header_values(read_member(archive, info, 1 << 20), "Requires-Python")
    return filename, hashlib.sha256(data).hexdigest(), requires[0] if requires else None


def write_simple_index(wheel_dir: Path, *, check: Callable[[bytes, str], Optional[str]]) -> Path:
    """Index the ``*.whl`` files directly in ``wheel_dir`` (not hidden ones: the build's
    temporary files) into ``wheel_dir/simple``; ``check`` says why a wheel may not be listed."""
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
            if parse_wheel_name(path.name).name not in config.DISTRIBUTIONS:
                raise PatchError(
                    f"{path.name}: not a {config.DISTRIBUTIONS[0]} wheel; the index lists only "
                    "this repository's patched wheels, move it out of the folder"
                )
            data = files.read_file(path, what="the wheel", cap=config.MAX_WHEEL_BYTES)
            if (problem := check(data, path.name)) is not None:
                raise PatchError(problem)
            listed.append(indexed_wheel(data, path.name))
        except (PatchError, KeyError, zipfile.BadZipFile) as error:
            problems.append(console.escaped(str(error)))
    if len(problems) > 1:
        for problem in problems:
            logger.error("%s", problem)
        raise PatchError(
            f"{len(problems)} of {len(paths)} wheels cannot be listed (above); remove them from "
            "the folder or build them again with 'python tools/patched_wheel matrix'"
        )
    if problems:
        raise PatchError(problems[0])
    index_dir, pages = wheel_dir / "simple", index_pages(listed)
    # Every place a page goes is checked before one is written: a real folder, a file or free.
    places = {index_dir: "folder"}
    for relative in pages:
        places.update({(index_dir / relative).parent: "folder", index_dir / relative: "file"})
    # Nor is anything already in it a link: a static host would serve a linked
    # simple/<project> as the index's own, with pages the index never wrote.
    if index_dir.is_dir() and not index_dir.is_symlink():
        for entry in [*index_dir.iterdir(), *index_dir.glob("*/*")]:
            places.setdefault(entry, "folder" if entry.is_dir() else "file")
    for place, kind in places.items():
        with suppress(FileNotFoundError):
            mode = os.lstat(place).st_mode
            if not (stat.S_ISDIR(mode) if kind == "folder" else stat.S_ISREG(mode)):
                raise PatchError(
                    f"{str(place)!r} is a symlink or not a {kind}; the index writes only inside "
                    f"{str(wheel_dir)!r}: remove it and index again"
                )
    # The project list last, so that it never links a page not yet written.
    for relative in sorted(pages, key=lambda name: name == "index.html"):
        page = index_dir / relative
        for folder in (index_dir, page.parent):
            with suppress(FileExistsError):
                os.mkdir(folder)
        files.write_text_atomically(page, pages[relative])
    # A project no wheel here is of any more: its page would link files that are gone.
    for folder in index_dir.iterdir():
        stale = folder / "index.html"
        paged = f"{folder.name}/index.html" in pages
        if folder.is_dir() and not folder.is_symlink() and not paged:
            if stale.is_file() and not stale.is_symlink():
                stale.unlink()
                logger.info("removed the page of %s, which no wheel here is of", folder.name)
            with suppress(OSError):
                folder.rmdir()
    logger.info("indexed %d wheels in %s", len(paths), index_dir)
    return index_dir
