"""The release command: patched wheels for every release, platform and Python the index has.

It asks the index once for its list of files (a combination the index lacks is skipped),
fetches every base the lock knows into the cache (in parallel), builds a patched wheel from
each into one folder, logs a line per wheel and prints a table at the end, and writes
``supported_matrix.json`` beside the wheels. With ``update_docs`` it also rewrites the
committed ``docsrc/_data/supported_matrix.json`` and the README's table between its markers,
so the supported table is produced by this command, never typed by hand; it does so only when
every wheel was checked and built, so that a failure never leaves a partial table.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_origin, build_patched_wheel
from patched_wheel.download import IndexFile, index_files, index_url
from patched_wheel.files import write_text_atomically
from patched_wheel.labels import split_label
from patched_wheel.lock import Lock
from patched_wheel.overlay import read_overlay
from patched_wheel.plan import BuildOrigin
from patched_wheel.refresh import indexed_name
from patched_wheel.request import BaseRequest
from patched_wheel.resolve import ensure_cached, usable_cache
from patched_wheel.splice import OverlayParts
from patched_wheel.wheelfile import parse_wheel_name

__all__ = [
    "END_MARKER",
    "MatrixEntry",
    "START_MARKER",
    "build_matrix",
    "matrix_document",
    "readme_table",
    "requests_for",
    "summary",
    "update_docs",
]

logger = logging.getLogger(__name__)

START_MARKER = "<!-- supported-matrix:start -->"
END_MARKER = "<!-- supported-matrix:end -->"

PLATFORM_TITLES = {
    "manylinux_2_28_x86_64": "Linux x86_64",
    "manylinux_2_28_aarch64": "Linux aarch64",
    "win_amd64": "Windows x86_64",
}


@dataclass(frozen=True)
class MatrixEntry:
    """One combination the index has: its base wheel and the patched wheel, or why it failed."""

    release: str
    platform: str
    python: str
    base_wheel: str
    patched_wheel: Optional[str]
    seconds: float
    error: Optional[str] = None


def _fetch(
    found: Sequence[Tuple[BaseRequest, str]],
    lock: Lock,
    cache_dir: Path,
    jobs: int,
    listing: Tuple[str, Mapping[str, IndexFile]],
) -> List[Tuple[BaseRequest, str, Optional[Path], Optional[str]]]:
    """(request, base name, cached path or None, error or None) for each base, in order.

    ``listing`` is the index and its list of files, asked for once.
    """
    index, files = listing

    def fetch(
        item: Tuple[BaseRequest, str],
    ) -> Tuple[BaseRequest, str, Optional[Path], Optional[str]]:
        try:
            path = ensure_cached(item[0], lock=lock, cache_dir=cache_dir, index=index, files=files)
            return item[0], item[1], path, None
        except PatchError as error:
            return item[0], item[1], None, str(error)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(fetch, found))


def _build_one(
    path: Path, lock: Lock, out_dir: Path, overlay: OverlayParts, origin: BuildOrigin
) -> Tuple[Optional[str], Optional[str]]:
    """(patched wheel's name, None) or (None, why it failed)."""
    try:
        base = read_base(path, lock=lock, what="the cached base wheel")
        patched = build_patched_wheel(base, out_dir=out_dir, overlay=overlay, origin=origin)
        return patched.name, None
    except PatchError as error:
        return None, str(error)


def build_matrix(
    requests: Sequence[BaseRequest],
    *,
    out_dir: Path,
    cache_dir: Path,
    lock: Lock,
    overlay: Optional[OverlayParts] = None,
    jobs: int = 4,
    index: Optional[str] = None,
) -> List[MatrixEntry]:
    """Build the patched wheel of every base in ``requests`` that the index has.

    Raises:
        PatchError: If the cache folder cannot be used (nothing is fetched).
        IndexUnreachable: If the index's list of files cannot be had (nothing is built).
    """
    usable_cache(cache_dir)
    index = index or index_url()
    files = index_files(index)
    found = [(r, n) for r in requests for n in [indexed_name(r, files)] if n is not None]
    fetched = _fetch(found, lock, cache_dir, jobs, (index, files))
    overlay = overlay or read_overlay()
    origin = build_origin(overlay)  # one for every wheel
    entries = []
    for number, (request, name, path, error) in enumerate(fetched, start=1):
        entry = _entry(request, name, path, error, (lock, out_dir, overlay, origin))
        entries.append(entry)
        if entry.error is None:
            logger.info(
                "[%3d/%d] %s (%.2f s)", number, len(fetched), entry.patched_wheel, entry.seconds
            )
        else:
            logger.info("[%3d/%d] FAILED %s: %s", number, len(fetched), name, entry.error)
    return entries


def _entry(
    request: BaseRequest,
    name: str,
    path: Optional[Path],
    error: Optional[str],
    build: Tuple[Lock, Path, OverlayParts, BuildOrigin],
) -> MatrixEntry:
    """The entry of one base: built from its cached ``path``, or failed with ``error``."""
    start = time.perf_counter()
    patched = None
    if path is not None:
        patched, error = _build_one(path, *build)
    seconds = time.perf_counter() - start
    platform, python = str(request.platform), str(request.python)
    return MatrixEntry(request.release, platform, python, name, patched, seconds, error)


def _python_key(python: str) -> tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _built_label(entries: Sequence[MatrixEntry]) -> Optional[str]:
    """The label the built wheels carry (one overlay built them all), ``None`` if none was."""
    labels = {
        split_label(parse_wheel_name(entry.patched_wheel).written_version)[1]
        for entry in entries
        if entry.patched_wheel is not None
    }
    return labels.pop() if len(labels) == 1 else None


def matrix_document(entries: Sequence[MatrixEntry]) -> Dict[str, object]:
    """The JSON document of the matrix: per release, the patched wheel of each base, and the
    label those wheels carry (read from their names, so it is the overlay that built them)."""
    releases: Dict[str, List[Dict[str, object]]] = {}
    for entry in sorted(
        entries, key=lambda e: (_release_key(e.release), e.platform, _python_key(e.python))
    ):
        row: Dict[str, object] = {
            "platform": entry.platform,
            "python": entry.python,
            "base_wheel": entry.base_wheel,
            "patched_wheel": entry.patched_wheel,
        }
        if entry.error is not None:
            row["error"] = entry.error
        releases.setdefault(entry.release, []).append(row)
    return {
        "about": "Patched torch_tensorrt wheels the build makes from the official ones. "
        "Generated by: python tools/patched_wheel matrix --update-docs",
        "local_label": _built_label(entries),
        "releases": [{"release": r, "wheels": w} for r, w in releases.items()],
    }


def readme_table(entries: Sequence[MatrixEntry]) -> str:
    """A Markdown table: a row per release, the Python versions built for each platform."""
    platforms = sorted({e.platform for e in entries}, key=list(PLATFORM_TITLES).index)
    header = ["Base release"] + [PLATFORM_TITLES.get(p, p) for p in platforms]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for release in sorted({e.release for e in entries}, key=_release_key):
        cells = [release]
        for platform in platforms:
            built = sorted(
                (
                    e.python
                    for e in entries
                    if e.release == release and e.platform == platform and e.error is None
                ),
                key=_python_key,
            )
            cells.append(", ".join(built) or "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(entries: Sequence[MatrixEntry]) -> str:
    """The table printed at the end of a run: counts and time per release."""
    lines = [f"{'release':<10} {'built':>5} {'failed':>6} {'seconds':>8}"]
    for release in sorted({e.release for e in entries}, key=_release_key):
        mine = [e for e in entries if e.release == release]
        failed = sum(e.error is not None for e in mine)
        seconds = sum(e.seconds for e in mine)
        lines.append(f"{release:<10} {len(mine) - failed:>5} {failed:>6} {seconds:>8.1f}")
    failed = sum(e.error is not None for e in entries)
    total = sum(e.seconds for e in entries)
    lines.append(f"{'total':<10} {len(entries) - failed:>5} {failed:>6} {total:>8.1f}")
    return "\n".join(lines)


def update_docs(entries: Sequence[MatrixEntry], *, docs_matrix: Path, readme: Path) -> None:
    """Write the committed matrix JSON and the README's table between its markers.

    Raises:
        PatchError: If any entry failed (a partial table is never written), or the README
            lacks the markers; nothing is written then.
    """
    failed = [entry.base_wheel for entry in entries if entry.error is not None]
    if failed or not entries:
        raise PatchError(
            f"{len(failed)} of {len(entries)} wheels were not built, so the docs are left "
            "unchanged (a partial table is never written); fix the failures and run again"
        )
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(START_MARKER), text.find(END_MARKER)
    if start < 0 or end < start:
        raise PatchError(
            f"{readme}: no {START_MARKER} ... {END_MARKER} markers; add them where the "
            "supported table belongs"
        )
    block = f"{START_MARKER}\n{readme_table(entries)}\n{END_MARKER}"
    write_text_atomically(docs_matrix, json.dumps(matrix_document(entries), indent=2) + "\n")
    write_text_atomically(readme, text[:start] + block + text[end + len(END_MARKER) :])


def requests_for(
    releases: Sequence[str], platforms: Sequence[str], pythons: Sequence[str]
) -> List[BaseRequest]:
    """Every combination of releases, platforms and Python versions."""
    return [
        BaseRequest(release, platform, python)
        for release, platform, python in itertools.product(releases, platforms, pythons)
    ]
