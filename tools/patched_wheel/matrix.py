"""The release command: patched wheels for every release, platform and Python the lock holds.

Each locked file serving a request is fetched where missing (threads: the network), then
patched with one overlay and one origin (forked processes: the splice is Python). ``update_docs``
rewrites the docs' matrix, ``docsrc/_data/supported_matrix.json``, only when every wheel was
built; :func:`supported_table` makes the one table of it that the README (through cog) and the
docs both show.
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import PatchError, config, files, settings
from .fetch import cached_base, usable_cache
from .lock import Lock
from .patch import Origin, build_origin, patch_wheel, read_overlay
from .releases import split_label
from .splice import overlay_from_bytes
from .wheel import BaseWheel, parse_wheel_name

logger = logging.getLogger(__name__)

# A locked base to patch: name, request, sha256, its cached path or why it was not fetched,
# and the overlay, origin and folder shared by every wheel.
_Work = Tuple[str, settings.BaseRequest, str, Optional[Path], Optional[str], bytes, Origin, Path]

UPDATE_DOCS_COMMAND = "python tools/patched_wheel matrix --update-docs"
# What refreshes the README's generated blocks, this table among them, from the docs' files
# (cog, a test requirement: the tool itself never runs it).
README_COMMAND = "python3 -m cogapp -r -I tools README.md"
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
    distribution: str = config.PROJECT
    fixes: Tuple[str, ...] = ()


def requests_for(
    releases: Optional[Sequence[str]],
    platforms: Sequence[str],
    pythons: Sequence[str],
    distributions: Sequence[str] = (config.PROJECT,),
) -> List[settings.BaseRequest]:
    """Every combination; no releases: each distribution's supported ones."""
    return [
        settings.BaseRequest(r, p, v, d)
        for d in distributions
        for r, p, v in itertools.product(releases or config.RELEASES[d], platforms, pythons)
    ]


def build_matrix(
    requests: Sequence[settings.BaseRequest],
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
    found: Dict[str, settings.BaseRequest] = {}
    for request in requests:
        if (name := lock.official_name(request)) is not None:
            found.setdefault(name, request)

    def fetch(name: str) -> Tuple[Optional[Path], Optional[str]]:
        try:
            return cached_base(found[name], name, lock.wheels[name], cache_dir), None
        except PatchError as error:
            return None, str(error)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        fetched = list(pool.map(fetch, found))

    # 2. Each base read once, checked and patched in a process per core.
    overlay_data = read_overlay(overlay_path or config.DEFAULT_OVERLAY)[1]
    shared = (overlay_data, build_origin(overlay_data), out_dir)
    work = [(n, r, lock.wheels[n], *f, *shared) for (n, r), f in zip(found.items(), fetched)]
    if sys.platform == "linux":  # forked workers share the loaded tool, however it was loaded
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=context) as workers:
            entries = list(workers.map(_patch_one, work))
    else:
        entries = [_patch_one(item) for item in work]
    for number, e in enumerate(entries, 1):
        if e.error is None:
            logger.info("[%3d/%d] %s (%.2f s)", number, len(entries), e.patched_wheel, e.seconds)
        else:
            logger.info("[%3d/%d] FAILED %s: %s", number, len(entries), e.base_wheel, e.error)
    return entries


def _patch_one(item: _Work) -> MatrixEntry:
    """The entry of one locked base (in a worker): its patched wheel, or why there is none."""
    name, request, sha256, path, error, overlay_data, origin, out_dir = item
    where = (request.release, str(request.platform), str(request.python))
    entry = MatrixEntry(*where, name, None, 0.0, error, request.distribution)
    if path is None:
        return entry
    start = time.perf_counter()
    try:
        data = files.read_file(path, what="the cached base wheel")
        Lock({name: sha256}).check(name, hashlib.sha256(data).hexdigest(), unlocked=False)
        overlay = overlay_from_bytes(overlay_data, "the overlay")
        wheel = patch_wheel(BaseWheel(data, name, sha256=sha256), overlay, origin=origin)
        files.write_atomically(out_dir / wheel.filename, wheel.data)
        patched, fixes = wheel.filename, wheel.provenance.fixes
    except PatchError as failure:
        patched, fixes, error = None, (), str(failure)
    seconds = time.perf_counter() - start
    return replace(entry, patched_wheel=patched, seconds=seconds, error=error, fixes=fixes)


def _rows(entries: Sequence[MatrixEntry]) -> List[Tuple[str, str, List[str], List[MatrixEntry]]]:
    """Each row of the tables, in order: distribution, release, the fixes its wheels carry (one
    upstream module per release, so one set) and its entries."""
    rows: Dict[Tuple[str, str], List[MatrixEntry]] = {}

    def place(e: MatrixEntry) -> Tuple[int, Tuple[int, ...], str, Tuple[int, ...]]:
        distribution = config.DISTRIBUTIONS.index(e.distribution)
        release = tuple(int(part) for part in e.release.split("+")[0].split("."))
        return distribution, release, e.platform, settings.python_key(e.python)

    for entry in sorted(entries, key=place):
        rows.setdefault((entry.distribution, entry.release), []).append(entry)
    return [
        (d, r, [f for f in config.FIX_NAMES if any(f in e.fixes for e in row)], row)
        for (d, r), row in rows.items()
    ]


def matrix_document(
    entries: Sequence[MatrixEntry], *, command: str = UPDATE_DOCS_COMMAND
) -> Dict[str, object]:
    """The matrix as JSON: per release its fixes and wheels, the label the wheels carry (read
    from their names: the overlay that built them), and the command that made it."""
    releases = []
    for distribution, release, fixes, row in _rows(entries):
        wheels = [
            {
                "platform": e.platform,
                "python": e.python,
                "base_wheel": e.base_wheel,
                "patched_wheel": e.patched_wheel,
                **({} if e.error is None else {"error": e.error}),
            }
            for e in row
        ]
        releases.append(
            {"distribution": distribution, "release": release, "fixes": fixes, "wheels": wheels}
        )
    built = [parse_wheel_name(e.patched_wheel) for e in entries if e.patched_wheel is not None]
    labels = {split_label(name.written_version)[1] for name in built}
    return {
        "about": "Patched torch_tensorrt wheels the build makes from the official ones. "
        f"Generated by: {command}",
        "local_label": labels.pop() if len(labels) == 1 else None,
        "releases": releases,
    }


def summary(entries: Sequence[MatrixEntry]) -> str:
    """The table printed at the end of a run: counts, time and fixes per release."""
    lines = [f"{'release':<24} {'built':>5} {'failed':>6} {'seconds':>8} fixes"]
    for distribution, release, fixes, row in _rows(entries):
        failed, seconds = sum(e.error is not None for e in row), sum(e.seconds for e in row)
        name, shown = f"{distribution} {release}", ", ".join(fixes) or "-"
        lines.append(f"{name:<24} {len(row) - failed:>5} {failed:>6} {seconds:>8.1f} {shown}")
    failed, total = sum(e.error is not None for e in entries), sum(e.seconds for e in entries)
    lines.append(f"{'total':<24} {len(entries) - failed:>5} {failed:>6} {total:>8.1f}")
    return "\n".join(lines)


def supported_table(document: Dict[str, Any]) -> Tuple[List[str], List[List[str]]]:
    """The header and rows of the supported table, from a :func:`matrix_document`: per release
    its fixes and the Pythons built for each platform the document holds.

    The one builder of this table: the README's cog block and the docs' ``supported-matrix``
    directive both call it on ``docsrc/_data/supported_matrix.json``.
    """
    built = {wheel["platform"] for r in document["releases"] for wheel in r["wheels"]}
    platforms = [name for name in PLATFORM_TITLES if name in built]
    header = ["Distribution", "Base release", "Fixes", *(PLATFORM_TITLES[p] for p in platforms)]
    rows = []
    for release in document["releases"]:
        cells = [release["distribution"], release["release"], ", ".join(release["fixes"]) or "-"]
        for platform in platforms:
            pythons = [w["python"] for w in release["wheels"] if w["platform"] == platform]
            cells.append(", ".join(pythons) or "-")
        rows.append(cells)
    return header, rows


def update_docs(entries: Sequence[MatrixEntry], *, docs_matrix: Path) -> None:
    """Write the committed matrix JSON, ``docs_matrix`` (nothing if a wheel failed). The README's
    table is made from that file by :data:`README_COMMAND`, never here."""
    failed = [entry.base_wheel for entry in entries if entry.error is not None]
    if failed or not entries:
        raise PatchError(
            f"{len(failed)} of {len(entries)} wheels were not built, so the docs are left "
            "unchanged (a partial table is never written); fix the failures and run again"
        )
    files.write_text_atomically(docs_matrix, json.dumps(matrix_document(entries), indent=2) + "\n")
