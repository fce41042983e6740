"""The patch as data: what the build will write, decided from a verified base and the overlay.

:func:`plan_patch` analyses and decides, and writes nothing: the new version, the new
``.dist-info`` name, the new file name, the new bytes of the two members that change
(``torch_tensorrt/dynamo/utils.py`` and METADATA) and of the one it adds (the provenance
record, :mod:`patched_wheel.provenance_record`). The plan is the one statement of what the
patched wheel holds: the writer (:mod:`patched_wheel.build`) and ``verify`` both ask it
(:meth:`PatchPlan.members`, :meth:`PatchPlan.contents`). Every check that needs the overlay lives
here: the fixes find their upstream functions, no top-level statement rebinds a replaced name
after its definition, every call of a replaced function fits the overlay's signature, the
spliced module compiles in the base module's own encoding.
"""

from __future__ import annotations

import ast
import re
import zipfile
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.callsites import check_call_sites
from patched_wheel.labels import split_label
from patched_wheel.policy import FIXES, TARGET, Fix, supported_releases_text
from patched_wheel.provenance import SourceRevision
from patched_wheel.provenance_record import ProvenanceRecord, record_bytes, record_member
from patched_wheel.sources import decode_source, encode_source
from patched_wheel.splice import (
    DefinitionNode,
    OverlayParts,
    check_splice,
    parse_source,
    splice_overlay,
    top_level_definitions,
)
from patched_wheel.wheelfile import RECORD_SIGNATURES, Wheel, parse_headers

__all__ = [
    "BuildOrigin",
    "PatchPlan",
    "PlannedMember",
    "patched_version",
    "plan_patch",
    "rewrite_metadata_version",
]


@dataclass(frozen=True)
class BuildOrigin:
    """What the build knows of itself, for the label and the provenance record."""

    label: str
    overlay_sha256: str
    revision: SourceRevision
    tool_sha256: str


@dataclass(frozen=True)
class PlannedMember:
    """One member of the patched wheel: its name, the base's entry it is made from (whose
    time, mode and compression it keeps), and its new bytes (``None``: the base's, unchanged).
    """

    name: str
    info: zipfile.ZipInfo
    data: Optional[bytes] = None


@dataclass(frozen=True)
class PatchPlan:
    """What the patched wheel is: its base, its names, and the members whose bytes change.

    ``new_members`` holds the new bytes by the member's name in the patched wheel (the
    members that change and the provenance record, which is added); ``dropped`` the base's
    members left out (RECORD's signatures, which cannot stay valid); ``record`` what the
    provenance record says.
    """

    base: Wheel
    version: str
    dist_info: str
    filename: str
    new_members: Mapping[str, bytes]
    dropped: Tuple[str, ...]
    record: ProvenanceRecord

    @property
    def record_name(self) -> str:
        """The patched wheel's RECORD (its bytes are computed by the writer)."""
        return f"{self.dist_info}/RECORD"

    def renamed(self, member: str) -> str:
        """The name of the base's ``member`` in the patched wheel."""
        dist_info = self.base.dist_info
        if member == dist_info or member.startswith(f"{dist_info}/"):
            return self.dist_info + member[len(dist_info) :]
        return member

    def members(self) -> Tuple[PlannedMember, ...]:
        """Every member of the patched wheel, in the base's order, the added ones last.

        An added member is made from METADATA's entry (same folder, same kind of file).
        """
        planned = []
        for info in self.base.infos:
            if info.filename not in self.dropped:
                name = self.renamed(info.filename)
                planned.append(PlannedMember(name, info, self.new_members.get(name)))
        metadata = f"{self.base.dist_info}/METADATA"
        template = next(info for info in self.base.infos if info.filename == metadata)
        names = {member.name for member in planned}
        for name, data in self.new_members.items():
            if name not in names:
                planned.append(PlannedMember(name, template, data))
        return tuple(planned)

    def contents(self) -> Dict[str, bytes]:
        """Every member's bytes by name (directories as ``b""``), RECORD aside."""
        contents: Dict[str, bytes] = {}
        for member in self.members():
            if member.data is not None:
                contents[member.name] = member.data
            elif member.info.is_dir():
                contents[member.name] = b""
            else:
                contents[member.name] = self.base.read(member.info.filename)
        contents.pop(self.record_name, None)
        return contents


def patched_version(base_version: str, label: str) -> str:
    """The base's version with ``label`` added to its local part (``2.9.0+cu130.memfix1.2``).

    Raises:
        PatchError: If the result is not a valid PEP 440 version, or the base already
            carries the label.
    """
    try:
        base = Version(base_version)
    except InvalidVersion:
        raise PatchError(f"{base_version!r} is not a PEP 440 version") from None
    carried = split_label(base_version)[1]
    if carried is not None:
        raise PatchError(
            f"version {base_version!r} already carries the label {carried!r}: this wheel is "
            "already patched; build from the official wheel instead"
        )
    new = f"{base_version}.{label}" if base.local is not None else f"{base_version}+{label}"
    try:
        valid = "-" not in label and str(Version(new)) == new
    except InvalidVersion:
        valid = False
    if not valid:
        raise PatchError(
            f"{new!r} is not a canonical PEP 440 version; the local label {label!r} may "
            "hold only lowercase letters, digits and dots"
        )
    return new


def rewrite_metadata_version(metadata: bytes, new_version: str) -> bytes:
    """METADATA with its ``Version:`` header set to ``new_version`` and nothing else changed.

    METADATA is parsed with ``BytesParser(policy=compat32)`` to find the one ``Version``
    header, but the line is replaced in the bytes: a ``BytesGenerator`` round trip would
    re-fold the multi-line ``License`` header of the official wheels. The result is parsed
    again and must differ from the original in the ``Version`` header alone.

    Raises:
        PatchError: If METADATA has no single ``Version:`` header on a line of its own, or
            the rewrite would change anything else.
    """
    headers = parse_headers(metadata)
    versions = [value for key, value in headers if key.lower() == "version"]
    blank_line = re.search(rb"\r?\n\r?\n", metadata)
    header_block = metadata if blank_line is None else metadata[: blank_line.start() + 1]
    value = re.escape(versions[0].encode()) if len(versions) == 1 else b"(?!)"
    old_line = re.compile(rb"^Version:[ \t]*" + value + rb"[ \t]*(?=\r?$)", re.M)
    matches = list(old_line.finditer(header_block))
    if len(matches) != 1:
        raise PatchError(
            "METADATA's Version is not one header on a line of its own; use an official wheel"
        )
    found = matches[0]
    rewritten = (
        metadata[: found.start()] + f"Version: {new_version}".encode() + metadata[found.end() :]
    )
    expected = [(k, new_version if k.lower() == "version" else v) for k, v in headers]
    if parse_headers(rewritten) != expected:
        raise PatchError("rewriting METADATA's Version changed other headers; report this wheel")
    return rewritten


def _check_layout(base: Wheel, dist_info: str) -> None:
    """The target is there, once; nothing is in the way of the new names."""
    names = [info.filename for info in base.infos]
    wheel = base.filename
    if TARGET not in base.members:
        raise PatchError(
            f"{wheel}: has no {TARGET}; this is not a torch_tensorrt wheel the overlay "
            f"fits. Supported base releases are {supported_releases_text()}"
        )
    for name in names:
        if name.split("/")[0] == dist_info:
            raise PatchError(
                f"{wheel}: already has a member {name!r} under the patched wheel's .dist-info "
                "name; this wheel is already patched or crafted, use the official wheel"
            )
        top, _, rest = name.partition("/")
        if top.endswith(".data") and rest.partition("/")[2].casefold() == TARGET.casefold():
            raise PatchError(
                f"{wheel}: holds a second {TARGET} as {name!r}, which installers would put "
                "over the patched one; use the official wheel"
            )
        if _shadows_target(name):
            raise PatchError(
                f"{wheel}: holds {name!r}, which Python would import instead of the patched "
                f"{TARGET}; use the official wheel"
            )


def _installed_path(name: str) -> str:
    """Where an installer puts a member, relative to site-packages: the member's own path, or
    its path under ``<name>.data/purelib`` or ``platlib``; ``""`` for other schemes."""
    top, _, rest = name.partition("/")
    if not top.endswith(".data"):
        return name
    scheme, _, path = rest.partition("/")
    return path if scheme in ("purelib", "platlib") else ""


def _shadows_target(name: str) -> bool:
    """Whether the member would be imported as ``torch_tensorrt.dynamo.utils`` before the
    patched ``utils.py``: a package ``utils/`` (its ``__init__``, or anything in it), or an
    extension or bytecode module ``utils.<...>.so``, ``.pyd``, ``.pyc`` beside it. Compared
    without case, as macOS's and Windows' file systems compare names."""
    path = _installed_path(name).casefold()
    folder, _, module_file = TARGET.casefold().rpartition("/")
    stem = module_file.split(".")[0]
    if not path.startswith(f"{folder}/"):
        return False
    inside = path[len(folder) + 1 :]
    if inside.startswith(f"{stem}/"):
        return True
    return "/" not in inside and inside.split(".")[0] == stem and inside != module_file


def _check_fixes_apply(
    base_definitions: Mapping[str, object], overlay: OverlayParts, fixes: Sequence[Fix], wheel: str
) -> None:
    """Every fix the overlay carries must find each upstream function it hooks into.

    A hook with alternative names is found when the base has one of the names the overlay
    defines; a hook whose names the overlay defines none of is not the overlay's to check.
    """
    overlay_functions = {function.name for function in overlay.functions}
    for fix in fixes:
        for names in fix.alternatives():
            defined = [name for name in names if name in overlay_functions]
            if defined and not any(name in base_definitions for name in defined):
                raise PatchError(
                    f"{wheel}: no top-level {_either(defined)} in {TARGET}, so the fix "
                    f"'{fix.title}' cannot apply (it takes effect through {defined[0]}()); the "
                    "build makes no wheel with only some of the fixes. Supported base releases "
                    f"are {supported_releases_text()}: choose one with TORCHTRT_BASE_VERSION"
                )


def _either(names: Sequence[str]) -> str:
    """``'a'``, or ``'a' or 'b'`` for alternatives."""
    return " or ".join(repr(name) for name in names)


def _bindings(nodes: List[ast.AST]) -> Iterator[Tuple[str, int]]:
    """(name, line) of each binding at module level: not inside functions, classes, lambdas."""
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield (alias.asname or alias.name.split(".")[0]), node.lineno
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            yield node.id, node.lineno
        if not isinstance(node, scopes):
            nodes.extend(ast.iter_child_nodes(node))


def _check_no_rebinding(
    module: ast.Module, replaced: Mapping[str, DefinitionNode], wheel: str
) -> None:
    """No module-level statement binds a replaced name after the definition replaced."""
    for name, line in _bindings(list(module.body)):
        definition = replaced.get(name)
        if definition is not None and definition.end_lineno and line > definition.end_lineno:
            raise PatchError(
                f"{wheel}: {TARGET} binds {name!r} again at line {line}, after the definition "
                "the overlay replaces, so the fix would not take effect; use the official wheel"
            )


def _package_sources(base: Wheel) -> Dict[str, bytes]:
    """The base package's Python sources, by path in the wheel."""
    return {
        name: data
        for name, data in base.members.items()
        if name.endswith(".py") and not name.startswith(f"{base.dist_info}/")
    }


def _spliced_target(base: Wheel, overlay: OverlayParts, fixes: Sequence[Fix]) -> bytes:
    """The target's new bytes, after every check that needs the overlay."""
    wheel, what = base.filename, f"{base.filename}:{TARGET}"
    decoded = decode_source(base.read(TARGET), what)
    module = parse_source(decoded.text, what)
    base_definitions = top_level_definitions(module)
    _check_fixes_apply(base_definitions, overlay, fixes, wheel)
    replaced = {
        d.name: base_definitions[d.name] for d in overlay.definitions if d.name in base_definitions
    }
    _check_no_rebinding(module, replaced, wheel)
    functions = {f.name: f for f in overlay.functions if f.name in replaced}
    check_call_sites(_package_sources(base), functions, wheel=wheel)
    spliced = splice_overlay(decoded.text, overlay, module)
    data = encode_source(spliced, decoded.encoding, what)
    check_splice(data, overlay, filename=what)
    return data


def _record(base: Wheel, version: str, origin: BuildOrigin) -> ProvenanceRecord:
    return ProvenanceRecord(
        version=version,
        label=origin.label,
        base_wheel=base.filename,
        base_sha256=base.sha256,
        overlay_sha256=origin.overlay_sha256,
        revision=origin.revision.revision,
        dirty=origin.revision.dirty,
        tool_sha256=origin.tool_sha256,
    )


def plan_patch(
    base: Wheel,
    overlay: OverlayParts,
    *,
    origin: BuildOrigin,
    fixes: Sequence[Fix] = FIXES,
) -> PatchPlan:
    """Decide the patched wheel of ``base``; see the module docstring for the checks.

    ``origin`` gives the label and the record's fields the base and overlay do not; its
    ``overlay_sha256`` must be the overlay's.

    Raises:
        PatchError: For any base or overlay the build refuses.
    """
    # 1. Names: the patched version, its .dist-info folder and its file name.
    if overlay.sha256 and overlay.sha256 != origin.overlay_sha256:
        raise PatchError(
            "the build's origin names another overlay than the one spliced; report this"
        )
    version = patched_version(base.name.written_version, origin.label)
    dist_info = f"{base.name.written_name}-{version}.dist-info"
    filename = f"{base.name.written_name}-{version}-{base.name.written_tags}.whl"
    _check_layout(base, dist_info)

    # 2. The target, spliced and checked; METADATA with the new version; the record.
    target = _spliced_target(base, overlay, fixes)
    metadata = rewrite_metadata_version(base.read(f"{base.dist_info}/METADATA"), version)
    record = _record(base, version, origin)

    # 3. The plan: two members change, the record is added, RECORD's signatures go, RECORD is
    # written anew.
    new_members = {
        TARGET: target,
        f"{dist_info}/METADATA": metadata,
        record_member(dist_info): record_bytes(record),
        f"{dist_info}/RECORD": b"",
    }
    dropped = tuple(f"{base.dist_info}/{name}" for name in RECORD_SIGNATURES)
    return PatchPlan(base, version, dist_info, filename, new_members, dropped, record)
