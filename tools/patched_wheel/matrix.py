"""The release command: patched wheels for every release, platform and Python the lock holds.

The lock lists every official wheel (``lock`` refreshes it from the index), so the matrix is
the lock's files that serve the requested releases, platforms and Pythons: each is fetched
into the cache where missing (in parallel, pinned by sha256), patched into one folder with
one overlay and one origin, a line logged per wheel and a table printed at the end, and
``supported_matrix.json`` written beside the wheels. With ``update_docs`` it also rewrites the
committed ``docsrc/_data/supported_matrix.json`` and the README's table between its markers,
only when every wheel was built, so a failure never leaves a partial table.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import PatchError, config
from .fetch import cached_base, usable_cache
from .lock import Lock
from .patch import Origin, build_origin, patch_wheel, read_overlay
from .releases import split_label
from .splice import overlay_from_bytes
from .wheel import BaseWheel, parse_wheel_name

logger = logging.getLogger(__name__)

START_MARKER = "<!-- supported-matrix:start -->"
END_MARKER = "<!-- supported-matrix:end -->"
UPDATE_DOCS_COMMAND = "python tools/patched_wheel matrix --update-docs"
PLATFORM_TITLES = {
    "manylinux_2_28_x86_64": "Linux x86_64",
    "manylinux_2_28_aarch64": "Linux aarch64",
    "win_amd64": "Windows x86_64",
}


@dataclass(frozen=True)
class MatrixEntry:
    """One combination the lock holds: its base wheel and the patched wheel, or why it failed."""

    release: str
    platform: str
    python: str
    base_wheel: str
    patched_wheel: Optional[str]
    seconds: float
    error: Optional[str] = None


def requests_for(
    releases: Sequence[str],
    platforms: Sequence[str],
    pythons: Sequence[str],
    distribution: str = "torch-tensorrt",
) -> List[config.BaseRequest]:
    """Every combination of releases, platforms and Python versions."""
    return [
        config.BaseRequest(r, p, v, distribution)
        for r, p, v in itertools.product(releases, platforms, pythons)
    ]


def build_matrix(
    requests: Sequence[config.BaseRequest],
    *,
    out_dir: Path,
    cache_dir: Path,
    lock: Lock,
    overlay_path: Optional[Path] = None,
    jobs: int = 4,
) -> List[MatrixEntry]:
    """Build the patched wheel of every locked base that serves one of ``requests``."""
    # 1. The bases the lock holds for the requests, each once, fetched where missing.
    usable_cache(cache_dir)
    found: Dict[str, config.BaseRequest] = {}
    for request in requests:
        name = lock.official_name(request)
        if name is not None:
            found.setdefault(name, request)

    def fetch(item: Tuple[str, config.BaseRequest]) -> Tuple[Optional[Path], Optional[str]]:
        try:
            return cached_base(item[1], item[0], lock.wheels[item[0]], cache_dir), None
        except PatchError as error:
            return None, str(error)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        fetched = list(pool.map(fetch, found.items()))

    # 2. One overlay and one origin for every wheel; each base read once, checked and patched
    # in a process per core (the splice is Python, bound by one core each).
    overlay_data = read_overlay(overlay_path or config.DEFAULT_OVERLAY)[1]
    origin = build_origin(overlay_data)
    work = [
        (path, name, lock.wheels[name], overlay_data, origin, out_dir)
        for (name, _), (path, _) in zip(found.items(), fetched)
    ]
    if sys.platform == "linux":  # forked workers share the loaded tool, however it was loaded
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=context) as workers:
            built = list(workers.map(_patch_one, work))
    else:
        built = [_patch_one(item) for item in work]
    entries = []
    for number, ((name, request), (_, error), (patched, failure, seconds)) in enumerate(
        zip(found.items(), fetched, built), 1
    ):
        error = error or failure
        entry = MatrixEntry(
            request.release,
            str(request.platform),
            str(request.python),
            name,
            patched,
            seconds,
            error,
        )
        entries.append(entry)
        if error is None:
            logger.info("[%3d/%d] %s (%.2f s)", number, len(found), patched, seconds)
        else:
            logger.info("[%3d/%d] FAILED %s: %s", number, len(found), name, error)
    return entries


def _patch_one(
    item: Tuple[Optional[Path], str, str, bytes, Origin, Path],
) -> Tuple[Optional[str], Optional[str], float]:
    """(patched wheel's name, why it failed, seconds) of one cached base (in a worker)."""
    path, name, sha256, overlay_data, origin, out_dir = item
    start = time.perf_counter()
    if path is None:
        return None, None, 0.0
    try:
        data = config.read_file(path, what="the cached base wheel")
        Lock({name: sha256}).check(name, hashlib.sha256(data).hexdigest(), unlocked=False)
        overlay = overlay_from_bytes(overlay_data, "the overlay")
        wheel = patch_wheel(BaseWheel(data, name), overlay, origin=origin)
        config.write_atomically(out_dir / wheel.filename, wheel.data)
        return wheel.filename, None, time.perf_counter() - start
    except PatchError as error:
        return None, str(error), time.perf_counter() - start


def _release_key(release: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in release.split("+")[0].split("."))


def _built_label(entries: Sequence[MatrixEntry]) -> Optional[str]:
    """The label the built wheels carry (one overlay built them all), ``None`` if none was."""
    labels = {
        split_label(parse_wheel_name(entry.patched_wheel).written_version)[1]
        for entry in entries
        if entry.patched_wheel is not None
    }
    return labels.pop() if len(labels) == 1 else None


def matrix_document(
    entries: Sequence[MatrixEntry], *, command: str = UPDATE_DOCS_COMMAND
) -> Dict[str, object]:
    """The JSON document of the matrix: per release, the patched wheel of each base, the
    label those wheels carry (read from their names, so it is the overlay that built them),
    and the command that made it."""
    releases: Dict[str, List[Dict[str, object]]] = {}
    for entry in sorted(
        entries, key=lambda e: (_release_key(e.release), e.platform, config.python_key(e.python))
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
        f"Generated by: {command}",
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
                key=config.python_key,
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
    config.write_text_atomically(docs_matrix, json.dumps(matrix_document(entries), indent=2) + "\n")
    config.write_text_atomically(readme, text[:start] + block + text[end + len(END_MARKER) :])
