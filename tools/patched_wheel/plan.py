"""The patch as data: what the build will write, decided from a verified base and the overlay.

:func:`plan_patch` analyses and decides, and writes nothing: the new version, the new
``.dist-info`` name, the new file name, and the new bytes of the two members that change
(``torch_tensorrt/dynamo/utils.py`` and METADATA). Every check that needs the overlay lives
here: the fixes find their upstream functions, no top-level statement rebinds a replaced name
after its definition, every call of a replaced function fits the overlay's signature, the
spliced module compiles in the base module's own encoding.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Sequence, Tuple

from packaging.version import InvalidVersion, Version
from patched_wheel import PatchError
from patched_wheel.callsites import check_call_sites
from patched_wheel.policy import FIXES, LOCAL_LABEL, TARGET, Fix, supported_releases_text
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

__all__ = ["PatchPlan", "patched_version", "plan_patch", "rewrite_metadata_version"]


@dataclass(frozen=True)
class PatchPlan:
    """What the patched wheel is: its names, and the members whose bytes change.

    ``new_members`` holds the new bytes by the member's name in the patched wheel;
    ``dropped`` the base's members left out (RECORD's signatures, which cannot stay valid).
    """

    version: str
    dist_info: str
    filename: str
    new_members: Mapping[str, bytes]
    dropped: Tuple[str, ...]

    def renamed(self, base: Wheel, member: str) -> str:
        """The name of the base's ``member`` in the patched wheel."""
        if member == base.dist_info or member.startswith(f"{base.dist_info}/"):
            return self.dist_info + member[len(base.dist_info) :]
        return member


def patched_version(base_version: str, label: str = LOCAL_LABEL) -> str:
    """The base's version with ``label`` added to its local part (``2.9.0+cu130.memfix1``).

    Raises:
        PatchError: If the result is not a valid PEP 440 version, or the base already
            carries the label.
    """
    try:
        base = Version(base_version)
    except InvalidVersion:
        raise PatchError(f"{base_version!r} is not a PEP 440 version") from None
    if base.local is not None and label in base.local.split("."):
        raise PatchError(
            f"version {base_version!r} already carries the label {label!r}: this wheel is "
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
    """Every fix the overlay carries must find each upstream function it hooks into."""
    overlay_functions = {function.name for function in overlay.functions}
    for fix in fixes:
        for hook in fix.hooks:
            if hook in overlay_functions and hook not in base_definitions:
                raise PatchError(
                    f"{wheel}: no top-level {hook!r} in {TARGET}, so the fix '{fix.title}' "
                    f"cannot apply (it takes effect through {hook}()); the build makes no "
                    f"wheel with only some of the fixes. Supported base releases are "
                    f"{supported_releases_text()}: choose one with TORCHTRT_BASE_VERSION"
                )


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


def plan_patch(
    base: Wheel,
    overlay: OverlayParts,
    *,
    label: str = LOCAL_LABEL,
    fixes: Sequence[Fix] = FIXES,
) -> PatchPlan:
    """Decide the patched wheel of ``base``; see the module docstring for the checks.

    Raises:
        PatchError: For any base or overlay the build refuses.
    """
    # 1. Names: the patched version, its .dist-info folder and its file name.
    version = patched_version(base.name.written_version, label)
    dist_info = f"{base.name.written_name}-{version}.dist-info"
    filename = f"{base.name.written_name}-{version}-{base.name.written_tags}.whl"
    _check_layout(base, dist_info)

    # 2. The target, spliced and checked; METADATA with the new version.
    target = _spliced_target(base, overlay, fixes)
    metadata = rewrite_metadata_version(base.read(f"{base.dist_info}/METADATA"), version)

    # 3. The plan: two members change, RECORD's signatures go, RECORD is written anew.
    new_members = {TARGET: target, f"{dist_info}/METADATA": metadata, f"{dist_info}/RECORD": b""}
    dropped = tuple(f"{base.dist_info}/{name}" for name in RECORD_SIGNATURES)
    return PatchPlan(version, dist_info, filename, new_members, dropped)
