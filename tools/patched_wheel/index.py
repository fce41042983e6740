"""A PEP 503 simple index of the wheels in a folder, so that pip and uv install from it.

``matrix --out DIR`` leaves the patched wheels in ``DIR``; :func:`write_simple_index` adds
``DIR/simple/index.html`` (the projects) and ``DIR/simple/<project>/index.html`` (its wheels).
Each link carries the wheel's ``#sha256=`` digest, which pip and uv check after the download,
and its ``data-requires-python``, taken from the wheel's METADATA, so that an installer skips
wheels the running Python cannot use without downloading them. Links are relative
(``../../<wheel>``), so the folder works as it is: from the disk
(``--index-url file://DIR/simple``) or behind any static web host.

Only wheels of this project that pass the caller's ``check`` are listed; the commands pass
``verify`` (:func:`~patched_wheel.verify.listing_refusal`: patched wheels whose official wheel
the lock knows, each the official wheel plus the overlay its record names and nothing else),
so this module knows pages, not how a wheel is verified. A wheel of another project (an index
that serves ``torch`` or ``tensorrt`` next to the patched wheels invites dependency
confusion) and every wheel the check refuses (an official or otherwise unpatched wheel, a
tampered one) are refused, one line each, and nothing is written.

The pages are made by a pure function, :func:`index_pages`, from the wheels' names, digests
and Python requirements; the files are written one by one under a temporary name and renamed,
so that a web host serving the folder never hands out half a page.
"""

from __future__ import annotations

import html
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence
from urllib.parse import quote

from packaging.utils import canonicalize_name, parse_wheel_filename
from patched_wheel import PatchError
from patched_wheel.console import escaped
from patched_wheel.files import write_text_atomically
from patched_wheel.policy import PROJECT
from patched_wheel.wheelfile import parse_headers, parse_wheel_name, read_wheel, read_wheel_file

__all__ = [
    "INDEX_DIR_NAME",
    "ListingCheck",
    "IndexedWheel",
    "index_pages",
    "read_indexed_wheel",
    "write_simple_index",
]

logger = logging.getLogger(__name__)

# The folder, inside the wheels' folder, that holds the index.
INDEX_DIR_NAME = "simple"

# Why a wheel may not be listed, in one line, or ``None`` where it may.
ListingCheck = Callable[[Path], Optional[str]]

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
        """The normalized project name (PEP 503), e.g. ``torch-tensorrt``."""
        return canonicalize_name(parse_wheel_filename(self.filename)[0])


def _page(title: str, links: Sequence[str]) -> str:
    body = "\n".join(f"    {link}<br>" for link in links)
    return _PAGE.format(title=html.escape(title), links=body)


def _wheel_link(wheel: IndexedWheel) -> str:
    href = html.escape(f"../../{quote(wheel.filename)}#sha256={wheel.sha256}")
    requires = ""
    if wheel.requires_python:
        requires = f' data-requires-python="{html.escape(wheel.requires_python)}"'
    return f'<a href="{href}"{requires}>{html.escape(wheel.filename)}</a>'


def index_pages(wheels: Sequence[IndexedWheel]) -> Dict[str, str]:
    """The pages of the index, by path relative to the index folder.

    ``index.html`` lists the projects; ``<project>/index.html`` lists a project's wheels,
    sorted by file name. The hrefs point two folders up, where the wheels lie.
    """
    by_project: Dict[str, List[IndexedWheel]] = {}
    for wheel in sorted(wheels, key=lambda w: w.filename):
        by_project.setdefault(wheel.project, []).append(wheel)
    pages = {
        f"{project}/index.html": _page(
            f"Links for {project}", [_wheel_link(w) for w in project_wheels]
        )
        for project, project_wheels in sorted(by_project.items())
    }
    projects = [
        f'<a href="{html.escape(quote(p))}/">{html.escape(p)}</a>' for p in sorted(by_project)
    ]
    pages["index.html"] = _page("Simple index", projects)
    return pages


def read_indexed_wheel(path: Path) -> IndexedWheel:
    """Name, sha256 and ``Requires-Python`` of one wheel file, verified as a wheel.

    The wheel is read once and checked as the build checks a base (RECORD, structure, names),
    so that the index never lists a damaged or altered file.

    Raises:
        PatchError: For a file that is not a wheel, or one that fails a check.
    """
    wheel = read_wheel(read_wheel_file(path, what="the wheel"), path.name)
    headers = parse_headers(wheel.read(f"{wheel.dist_info}/METADATA"))
    requires = [value.strip() for key, value in headers if key.lower() == "requires-python"]
    return IndexedWheel(path.name, wheel.sha256, requires[0] if requires else None)


def _foreign(path: Path) -> Optional[str]:
    """Why the file may not be listed by its name alone (another project), or ``None``."""
    try:
        project = parse_wheel_name(path.name).name
    except PatchError as error:
        return str(error)
    if project != canonicalize_name(PROJECT):
        return (
            f"{path.name}: not a {PROJECT} wheel; the index lists only this repository's "
            "patched wheels, move it out of the folder"
        )
    return None


def _listed(path: Path, check: ListingCheck) -> IndexedWheel:
    """The index's entry of a wheel that passes the check, its sha256 that of the bytes
    checked (read before and after the check: a file changed meanwhile is refused)."""
    problem = _foreign(path)
    before = None if problem else read_indexed_wheel(path)
    problem = problem or check(path)
    if problem is None and read_indexed_wheel(path) != before:
        problem = f"{path.name}: changed while it was being verified; index the folder again"
    if problem is not None or before is None:
        raise PatchError(escaped(problem or f"{path.name}: cannot be listed"))
    return before


def _checked_wheels(paths: Sequence[Path], check: ListingCheck) -> List[IndexedWheel]:
    """Every wheel's entry; every refusal is logged, one line each, then the first raised."""
    listed, problems = [], []
    for path in paths:
        try:
            listed.append(_listed(path, check))
        except PatchError as error:
            problems.append(str(error))
    if len(problems) > 1:
        for problem in problems:
            logger.error("%s", problem)
        raise PatchError(
            f"{len(problems)} of {len(paths)} wheels cannot be listed (above); remove them from "
            "the folder or build them again with 'python tools/patched_wheel matrix'"
        )
    if problems:
        raise PatchError(problems[0])
    return listed


def write_simple_index(wheel_dir: Path, *, check: ListingCheck) -> Path:
    """Write the simple index of the wheels in ``wheel_dir`` into ``wheel_dir/simple``.

    Only the ``*.whl`` files directly in ``wheel_dir`` are considered (hidden ones, such as the
    build's temporary files, are not), and each must be a wheel of this project that ``check``
    passes (the commands pass :func:`~patched_wheel.verify.listing_refusal`). Pages already
    there are replaced; a project page whose wheels are all gone is left, but the project
    list no longer links it.

    Returns:
        The index folder.

    Raises:
        PatchError: If ``wheel_dir`` holds no wheel, or any that may not be listed: then
            nothing is written.
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
    index_dir = wheel_dir / INDEX_DIR_NAME
    wheels = _checked_wheels(paths, check)
    pages = index_pages(wheels)
    # The project list last, so that it never links a page not yet written.
    for relative in sorted(pages, key=lambda name: name == "index.html"):
        write_text_atomically(index_dir / relative, pages[relative])
    logger.info("indexed %d wheels in %s", len(paths), index_dir)
    return index_dir
