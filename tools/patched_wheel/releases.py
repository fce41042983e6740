"""Released overlays: the registry, the labels, and the main branch that defines them.

A *released* overlay has a number N in the registry :data:`~.config.OVERLAY_RELEASES_FILE`
(number -> sha256 of the overlay) and its wheels carry the local label ``memfix1.<N>``; local
segments compare as numbers, so a newer release sorts above an older one. The registry that
counts is the one committed on the main branch's first-parent history: an overlay only on
another branch, in a stash or in an unreachable commit was never released. Every other build is
``memfix1.dev<N>.g<sha256 prefix>``: PEP 440 sorts the string segment ``dev<N>`` below any
number, so it never wins ``pip install -U``. :func:`split_label` reads every label the fork has
written (``memfix1``, ``memfix1.<N>``, ``memfix1.<N>.dev.g<sha>``, the above).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Set, Tuple

from packaging.version import InvalidVersion, Version

from . import PatchError, config, files, git

logger = logging.getLogger(__name__)

FETCH_HISTORY = (
    "the clone may lack history: fetch it with 'git fetch --unshallow origin main' (or "
    "'git fetch origin main'), or verify from a full clone"
)
REGISTER_COMMAND = "python tools/patched_wheel register-overlay"
_ABOUT = (
    "The overlays released so far: number -> sha256 of py/torch_tensorrt/dynamo/utils.py. "
    f"A patched wheel's label is {config.LABEL_NAME}.<number>. Add the current overlay with: "
    f"{REGISTER_COMMAND}"
)
DEV_DIGITS = 10  # hex digits of the overlay's sha256 in a development label
# Every label the fork has written: memfix1, memfix1.N, memfix1.N.dev.gSHA, memfix1.devN.gSHA.
_LABEL = re.compile(
    rf"{config.LABEL_NAME}(?:\.(?P<number>[1-9][0-9]*)"
    rf"(?:\.dev\.g(?P<old>[0-9a-f]{{{DEV_DIGITS}}}))?"
    rf"|\.dev(?P<after>[0-9]+)\.g(?P<sha>[0-9a-f]{{{DEV_DIGITS}}}))?"
)


def is_sha256_hex(text: object) -> bool:
    """Whether ``text`` is a sha256 as this repository writes one: 64 lowercase hex digits."""
    return isinstance(text, str) and re.fullmatch(r"[0-9a-f]{64}", text) is not None


def release_label(number: int) -> str:
    return f"{config.LABEL_NAME}.{number}"


def label_for(overlay_sha256: str, releases: Mapping[str, int], *, clean: Optional[bool]) -> str:
    """The release label of a registered overlay built from its own revision (``clean``);
    else a development label, with a warning that says why (``None``: no revision known)."""
    number = releases.get(overlay_sha256)
    if number is not None and clean:
        return release_label(number)
    newest = max(releases.values(), default=1)  # 1: the unnumbered memfix1 wheels
    label = f"{config.LABEL_NAME}.dev{newest}.g{overlay_sha256[:DEV_DIGITS]}"
    why = "not the revision's own overlay and tool"
    if number is None:
        why = "not a released one"
    elif clean is None:
        why = "built where no revision is known (no git, or no .git and no revision file)"
    logger.warning(
        "the overlay (sha256 %s) is %s, so the wheel is labelled +%s, a development build "
        "that sorts below every release; to release it, commit it and run: %s",
        overlay_sha256,
        why,
        label,
        REGISTER_COMMAND,
    )
    return label


def split_label(version: str) -> Tuple[str, Optional[str]]:
    """(base version, the fork's label) of a patched version; the label is ``None`` for a
    version without (``2.9.0+cu130.memfix1.2`` gives ``("2.9.0+cu130", "memfix1.2")``)."""
    try:  # greedy: the label starts at the last local segment that can start one
        match = re.fullmatch(rf"(?:(.*)\.)?({_LABEL.pattern})", Version(version).local or "")
    except InvalidVersion:
        return version, None
    if match is None:
        return version, None
    return version.split("+", 1)[0] + (f"+{match[1]}" if match[1] else ""), match[2]


def label_parts(label: str) -> Tuple[Optional[int], Optional[str]]:
    """(release number, development sha256 prefix) a label names; ``(None, None)``: neither."""
    match = _LABEL.fullmatch(label)
    if match is None:
        return None, None
    if match["number"] and not match["old"]:
        return int(match["number"]), None
    return None, match["old"] or match["sha"]


def releases_from_bytes(data: bytes, where: str) -> Dict[str, int]:
    """The registry in ``data`` as sha256 -> number (``where`` names it in messages)."""
    try:
        entries = json.loads(data.decode("utf-8"))["overlays"]
    except (ValueError, KeyError, TypeError, RecursionError):
        entries = None
    if not isinstance(entries, dict):  # not an assert: python -O would drop it
        raise PatchError(f"{where} is not a registry of overlays; restore it from git")
    for number, sha256 in entries.items():
        if not (re.fullmatch(r"[2-9]|[1-9][0-9]+", number) and is_sha256_hex(sha256)):  # from 2
            raise PatchError(f"{where}: {number!r}: {sha256!r} is not an overlay number and sha256")
    numbers = {sha256: int(number) for number, sha256 in entries.items()}
    if len(numbers) != len(entries):
        raise PatchError(f"{where} registers one overlay under two numbers; keep the first")
    return numbers


def load_overlay_releases(path: Path = config.OVERLAY_RELEASES_FILE) -> Dict[str, int]:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise PatchError(f"cannot read the overlay registry {str(path)!r} ({error})") from None
    return releases_from_bytes(data, repr(str(path)))


def register_overlay(
    overlay_sha256: str, path: Path = config.OVERLAY_RELEASES_FILE
) -> Tuple[int, bool]:
    """Release the overlay with this sha256 under the next number (or say its number)."""
    releases = load_overlay_releases(path)
    if overlay_sha256 in releases:
        return releases[overlay_sha256], False
    number = max(releases.values(), default=1) + 1
    by_number = sorted((n, s) for s, n in releases.items()) + [(number, overlay_sha256)]
    document = {"about": _ABOUT, "overlays": {str(n): s for n, s in by_number}}
    files.write_text_atomically(Path(path), json.dumps(document, indent=2) + "\n")
    return number, True


# The refs whose first-parent history defines the releases: the clone's main, and the main it
# was cloned from as last fetched (a local main behind it must not call a release unreleased).
MAIN_REFS = ("refs/heads/main", "refs/remotes/origin/main")


def main_history(repository: Path) -> Dict[str, Set[str]]:
    """Each of :data:`MAIN_REFS` the clone has, with every commit of its first-parent history
    (empty without either)."""
    history = {}
    for ref in MAIN_REFS:
        listed = git.git_text(repository, "rev-list", "--first-parent", ref, "--")
        if listed is not None:  # git fails on a ref that does not exist
            history[ref.split("/", 2)[2]] = set(listed.split())
    return history


def tool_digest(files: Iterable[Tuple[str, bytes]]) -> str:
    """The sha256 of the build tool's Python sources, given as (file name, bytes)."""
    digest = hashlib.sha256()
    for name, data in sorted(files):
        digest.update(f"{name}\0{len(data)}\0".encode("utf-8") + data)
    return digest.hexdigest()


def tool_sha256_at(repository: Path, revision: str) -> Optional[str]:
    """The :func:`tool_digest` of the tool as committed at ``revision`` (``None``: no tool),
    from git's objects, whatever line ends the clone's settings would give them."""
    committed = git.blobs(repository, revision, f"{config.TOOL_PATH}/")
    files = [
        (path.rpartition("/")[2], data)
        for path, data in (committed or {}).items()
        if path.rpartition("/")[0] == config.TOOL_PATH and path.endswith(".py")
    ]
    return tool_digest(files) if files else None


def _build_inputs(repository: Path, revision: str) -> Optional[str]:
    """What a release build's bytes depend on at ``revision``: git's ids of the tool's Python
    sources and of the overlay (``None``: git cannot list them)."""
    listing = git.git_text(
        repository,
        "ls-tree",
        "--full-tree",
        "--end-of-options",
        revision,
        "--",
        f"{config.TOOL_PATH}/",
        config.OVERLAY_PATH,
    )
    if listing is None:
        return None
    return "\n".join(sorted(row for row in listing.splitlines() if row.endswith(".py")))


def _registry_at(repository: Path, revision: str) -> Dict[str, int]:
    path = f"{config.TOOL_PATH}/{config.OVERLAY_RELEASES_FILE.name}"
    data = git.git_bytes(repository, "cat-file", "blob", f"{revision}:{path}")
    return {} if data is None else releases_from_bytes(data, f"the registry at {revision}")


def release_commit(
    repository: Path, revision: str, overlay_sha256: str, number: int
) -> Tuple[str, str]:
    """(commit, its committer time) that released the overlay as ``number`` with the tool of
    ``revision``: the oldest commit of ``revision``'s first-parent history from which the tool's
    sources and the overlay are ``revision``'s and the registry lists the overlay as ``number``.
    A release build names it, its tool and its time, so a clone at any later commit that leaves
    the fork's files alone builds the same bytes."""
    paths = (config.TOOL_PATH, config.OVERLAY_PATH)
    log = git.git_text(
        repository,
        "log",
        "--first-parent",
        "--format=%H %ct",
        "--end-of-options",
        revision,
        "--",
        *paths,
    )
    inputs, found, ended = _build_inputs(repository, revision), None, False
    for line in (log or "").splitlines():
        commit, _, time = line.partition(" ")
        ended = _build_inputs(repository, commit) != inputs
        ended = ended or _registry_at(repository, commit).get(overlay_sha256) != number
        if ended:
            break
        found = (commit, time)
    shallow = git.git_text(repository, "rev-parse", "--is-shallow-repository") == "true\n"
    if found is None or (shallow and not ended):  # the release may lie beyond what was fetched
        raise PatchError(
            f"the history of revision {revision} does not show where overlay "
            f"{overlay_sha256[:12]} was released as {release_label(number)}; {FETCH_HISTORY}"
        )
    return found


def released_at(repository: Path, revision: str) -> Tuple[bytes, Dict[str, int]]:
    """(the overlay's bytes, the registry) as committed at ``revision``, which has both."""
    registry_path = f"{config.TOOL_PATH}/{config.OVERLAY_RELEASES_FILE.name}"
    overlay, registry = (
        git.git_bytes(repository, "cat-file", "blob", f"{revision}:{path}")
        for path in (config.OVERLAY_PATH, registry_path)
    )
    if overlay is None or registry is None:
        raise PatchError(
            f"revision {revision} has no {config.OVERLAY_PATH} or no registry of overlays"
        )
    return overlay, releases_from_bytes(registry, f"the registry at {revision}")
