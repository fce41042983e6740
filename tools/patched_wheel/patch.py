"""The patch: a base wheel and the overlay in, a patched wheel out (:func:`patch_wheel`, step
by step, in memory; ``verify`` rebuilds with it). The fixes are data (:data:`FIXES`): each, a
group of overlay functions, is spliced into one module of the base (its target: upstream's
``dynamo/utils.py``, or the module whose function it replaces), and only into a base whose
module has the fix's hook; the overlay's helpers always go into ``dynamo/utils.py``; a base
where no fix applies is refused."""

from __future__ import annotations

import ast
import copy
import hashlib
import io
import logging
import os
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

from packaging.version import InvalidVersion, Version

from . import PatchError, config, files, splice, wheel
from .provenance import (
    UNKNOWN,
    Provenance,
    SourceRevision,
    parse_provenance,
    provenance_bytes,
    provenance_member,
    release_revision,
    source_revision,
    tool_sha256,
)
from .releases import label_for, label_parts, load_overlay_releases, split_label

logger = logging.getLogger(__name__)


Hook = Callable[[ast.Module, Mapping[str, splice.DefinitionNode]], bool]


def _defines(name: str) -> Tuple[Hook, str]:
    """The hook "upstream's module defines ``name`` at top level", and its text."""

    def hook(module: ast.Module, overlay: Mapping[str, splice.DefinitionNode]) -> bool:
        return name in splice.top_level_definitions(module)

    return hook, f"upstream defines {name}"


def _copies_tensor_input(module: ast.Module, overlay: Mapping[str, splice.DefinitionNode]) -> bool:
    """The hook of ``input-copy``: upstream's ``prepare_inputs`` has a branch taken for a
    ``torch.Tensor`` input (an ``isinstance`` test naming ``Tensor``) that calls
    ``torch.tensor(...)`` on it, a full copy (2.10, 2.11; 2.12 passes the tensor as it is).
    One walk, each node once, marked by whether it lies in such a branch (walking each
    branch's body again made nested branches cost their depth times the module)."""
    function = splice.top_level_definitions(module).get("prepare_inputs")
    todo: List[Tuple[ast.AST, bool]] = [(function, False)] if function is not None else []
    while todo:
        node, in_branch = todo.pop()
        func = getattr(node, "func", None)
        if in_branch and isinstance(func, ast.Attribute) and func.attr == "tensor":
            if getattr(func.value, "id", None) == "torch":
                return True
        test = getattr(node, "test", None) if isinstance(node, ast.If) else None
        if isinstance(test, ast.Call) and getattr(test.func, "id", None) == "isinstance":
            if any(isinstance(n, ast.Attribute) and n.attr == "Tensor" for n in ast.walk(test)):
                todo += [(statement, True) for statement in getattr(node, "body")]
                todo += [(child, in_branch) for child in [test, *getattr(node, "orelse")]]
                continue
        todo += [(child, in_branch) for child in ast.iter_child_nodes(node)]
    return False


def _engine_keywords(function: Optional[splice.DefinitionNode]) -> Optional[Set[str]]:
    """The keywords of the call in ``function`` that hands over ``serialized_engine=``."""
    for node in ast.walk(function) if function is not None else []:
        if isinstance(node, ast.Call):
            keywords = {keyword.arg for keyword in node.keywords if keyword.arg}
            if "serialized_engine" in keywords:
                return keywords
    return None


def _creates_runtime_module_alike(
    module: ast.Module, overlay: Mapping[str, splice.DefinitionNode]
) -> bool:
    """The hook of ``engine-bytes``: upstream's ``convert_module`` creates the runtime module
    with the keywords the overlay's passes (``serialized_engine=`` and the interpreter result's
    other fields), so that the overlay hands over everything upstream's does."""
    upstream = splice.top_level_definitions(module).get("convert_module")
    keywords = _engine_keywords(upstream)
    return keywords is not None and keywords == _engine_keywords(overlay.get("convert_module"))


class Fix(NamedTuple):
    """One fix: its name, the overlay functions it consists of, the hook that says it applies,
    and the module of the base they are spliced into."""

    name: str
    functions: Tuple[str, ...]
    hook: Hook
    hook_text: str
    target: str = config.TARGET


OFFLOAD, HOST_TRIM, INPUT_COPY, ENGINE_BYTES = config.FIX_NAMES
FIXES = (
    Fix(OFFLOAD, ("deallocate_module",), *_defines("deallocate_module")),
    Fix(
        HOST_TRIM,
        ("_glibc_malloc_trim", "trim_host_heap", "release_host_and_device_memory"),
        *_defines("release_host_and_device_memory"),
    ),
    Fix(
        INPUT_COPY,
        ("prepare_inputs",),
        _copies_tensor_input,
        "upstream's prepare_inputs copies a tensor input with torch.tensor(...)",
    ),
    Fix(
        ENGINE_BYTES,
        (
            "convert_module",
            "_builder_output_handed_on",
            "_BuilderOutput",
            "_DeferringRuntime",
            "_TensorRTDeferringRuntime",
            "_ItemsGivenUp",
            "_cpp_engine_from_info",
        ),
        _creates_runtime_module_alike,
        "upstream's convert_module creates the runtime module as the overlay's does",
        config.CONVERSION_TARGET,
    ),
)


class Origin(NamedTuple):
    """What the build knows of itself: the label, the revision, the tool, the time."""

    label: str
    revision: SourceRevision
    tool_sha256: str
    source_date_epoch: Optional[str] = None


class PatchedWheel(NamedTuple):
    """A patched wheel in memory: its file name, bytes, and what its provenance says."""

    filename: str
    data: bytes
    provenance: Provenance


def read_overlay(path: Path = config.DEFAULT_OVERLAY) -> Tuple[splice.OverlayParts, bytes]:
    """(the overlay parsed, its bytes with line ends as git stores them); one line if it
    cannot be read or spliced."""
    data = files.read_file(path, what="the overlay", cap=1 << 20, kind=config.OVERLAY_KIND)
    data = files.as_committed(data)
    return splice.overlay_from_bytes(data, repr(str(path))), data


def build_origin(overlay_data: bytes, *, repository: Path = config.REPOSITORY) -> Origin:
    """This build's origin: a release label only for a registered overlay built from its own
    revision (overlay and tool as committed), a development label otherwise. A release names
    the commit that released it and takes that commit's time, so its bytes are one file
    whatever later commit builds it; ``SOURCE_DATE_EPOCH`` dates a development build only."""
    revision = source_revision(repository, overlay_data)
    clean = revision.dirty is False and revision.revision != UNKNOWN
    sha256 = hashlib.sha256(overlay_data).hexdigest()
    releases = load_overlay_releases(config.OVERLAY_RELEASES_FILE)
    known = revision.revision != UNKNOWN
    label = label_for(sha256, releases, clean=clean if known else None)
    epoch = wheel.source_date_epoch(os.environ.get("SOURCE_DATE_EPOCH", ""))
    number = label_parts(label)[0]
    if number is not None:
        revision = release_revision(repository, revision, sha256, number)
        if revision.date is not None and epoch not in (None, revision.date):
            logger.warning(
                "SOURCE_DATE_EPOCH=%s is not used: +%s is dated by the commit that released it "
                "(%s), so that every build of it has the same bytes",
                epoch,
                label,
                revision.date,
            )
        epoch = revision.date or epoch
    return Origin(label, revision, tool_sha256(), epoch)


def current_label(overlay_path: Path = config.DEFAULT_OVERLAY) -> str:
    """The label a build of the overlay at ``overlay_path`` gets here and now."""
    return build_origin(read_overlay(overlay_path)[1]).label


def patched_version(base_version: str, label: str) -> str:
    """The base's version with ``label`` added to its local part (``2.9.0+cu130.memfix1.2``);
    refused if the base is patched already or the result is not a canonical PEP 440 version."""
    carried = split_label(base_version)[1]
    if carried is not None:
        raise PatchError(
            f"version {base_version!r} already carries the label {carried!r}: this wheel is "
            "already patched; build from the official wheel instead"
        )
    try:
        new = f"{base_version}{'.' if Version(base_version).local else '+'}{label}"
        valid = "-" not in label and str(Version(new)) == new
    except InvalidVersion:
        new, valid = f"{base_version}+{label}", False
    if not valid:
        raise PatchError(
            f"{new!r} is not a canonical PEP 440 version; the local label {label!r} may "
            "hold only lowercase letters, digits and dots"
        )
    return new


def rewrite_metadata_version(metadata: bytes, new_version: str) -> bytes:
    """METADATA with its one ``Version:`` header set to ``new_version``, nothing else changed:
    the line is replaced in the bytes (a ``BytesGenerator`` round trip would re-fold the
    official wheels' multi-line ``License``), and the result parsed again to prove it."""
    headers = wheel.parse_headers(metadata)
    versions = [value.strip() for key, value in headers if key.lower() == "version"]
    header_block = re.split(rb"\r?\n\r?\n", metadata, maxsplit=1)[0]
    value = re.escape(versions[0].encode()) if len(versions) == 1 else b"(?!)"
    pattern = rb"^Version:[ \t]*" + value + rb"[ \t]*(?=\r?$)"
    matches = list(re.finditer(pattern, header_block, re.M))
    if len(matches) != 1:
        raise PatchError(
            "METADATA's Version is not one header on a line of its own; use an official wheel"
        )
    start, end = matches[0].span()
    rewritten = metadata[:start] + f"Version: {new_version}".encode() + metadata[end:]
    expected = [(k, new_version if k.lower() == "version" else v) for k, v in headers]
    if wheel.parse_headers(rewritten) != expected:
        raise PatchError("rewriting METADATA's Version changed other headers; report this wheel")
    return rewritten


def _shadows_target(name: str, target: str) -> bool:
    """Whether an installer would put the member where Python imports it instead of the
    patched module ``target``: a second copy under ``<name>.data/<scheme>/``, a package of its
    name, a ``.so``/``.pyd``/``.pyc`` of its name beside it, or its bytecode in ``__pycache__``
    beside it (an unchecked-hash ``.pyc`` there runs instead of the source, and ``pip install
    --no-compile``, uv's default, never rewrites it), under ``purelib`` or ``platlib`` too,
    compared without case as macOS's and Windows' file systems compare. Refused, not dropped:
    no official wheel holds bytecode, so a base that does is not one."""
    top, _, rest = name.partition("/")
    if top.endswith(".data"):
        scheme, _, name = rest.partition("/")
        if name.casefold() == target.casefold():
            return True
        if scheme not in ("purelib", "platlib"):
            return False
    path, module = name.casefold(), PurePosixPath(target.casefold())
    folder, stem = re.escape(str(module.parent)), re.escape(module.stem)
    inside = rf"(?s){folder}/(?:__pycache__/)?{stem}(?:/.*|\.[^/]*)?"
    return path != str(module) and re.fullmatch(inside, path) is not None


def _needed_by(
    overlay: splice.OverlayParts, definitions: Tuple[splice.DefinitionNode, ...]
) -> splice.OverlayParts:
    """The overlay with ``definitions`` and only the imports and constants they use (what a
    target module other than the main one gets)."""
    used = {n.id for d in definitions for n in ast.walk(d) if isinstance(n, ast.Name)}
    imports = []
    for node in overlay.imports:
        names = [a for a in node.names if (a.asname or a.name.split(".")[0]) in used]
        if names:
            imports.append(copy.copy(node))
            imports[-1].names = names
    constants = tuple(c for c in overlay.constants if splice.constant_name(c) in used)
    return overlay._replace(definitions=definitions, imports=tuple(imports), constants=constants)


def _splice_module(
    base: wheel.BaseWheel,
    target: str,
    source: Tuple[str, str, ast.Module],
    overlay: splice.OverlayParts,
    package: Dict[str, bytes],
) -> bytes:
    """Upstream's module ``target`` (its text, encoding and parse) with ``overlay`` spliced
    in, after the checks that need it: nothing in the wheel shadows the module; no module-level
    binding of a replaced name after its replaced definition (nested scopes bind their own
    names); every call of a replaced function in the package (``package``) fits the overlay's
    signature; and the result compiles with the overlay's definitions in it, unchanged."""
    text, encoding, module = source
    what = f"{base.filename}:{target}"
    for name in base.by_name:
        if _shadows_target(name, target):
            raise PatchError(
                f"{base.filename}: holds {name!r}, which would be imported or installed instead "
                f"of the patched {target}; use the official wheel"
            )
    base_definitions = splice.top_level_definitions(module)
    replaced = [d for d in overlay.definitions if d.name in base_definitions]
    ends = {d.name: getattr(base_definitions[d.name], "end_lineno") for d in replaced}
    scopes = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    nodes: List[ast.AST] = list(module.body)
    while nodes:
        node = nodes.pop()
        bound: List[str] = [node.name] if isinstance(node, splice.DEFINITIONS) else []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound = [node.id]
        line = getattr(node, "lineno", 0)
        rebound = [name for name in bound if name in ends and line > ends[name]]
        if rebound:
            raise PatchError(
                f"{base.filename}: {target} binds {rebound[0]!r} again at line {line}, "
                "after the definition the overlay replaces, so the fix would not take effect; "
                "use the official wheel"
            )
        if not isinstance(node, (*splice.DEFINITIONS, *scopes)):
            nodes.extend(ast.iter_child_nodes(node))
    splice.check_call_sites(package, replaced, wheel=base.filename)
    try:
        spliced = splice.splice_overlay(text, overlay, module).encode(encoding)
    except UnicodeEncodeError as error:
        raise PatchError(
            f"{what}: the overlay's text cannot be written in the module's encoding "
            f"{encoding} ({error.reason} at {error.start}); keep the overlay ASCII"
        ) from None
    splice.check_splice(spliced, overlay, filename=what)
    return spliced


def patch_wheel(
    base: wheel.BaseWheel, overlay: splice.OverlayParts, *, origin: Origin
) -> PatchedWheel:
    """The patched wheel of ``base``, in memory (see the module docstring); any base or
    overlay the build refuses is a :class:`PatchError`."""
    # 1. Names: the patched version, its .dist-info folder and its file name.
    version = patched_version(base.name.written_version, origin.label)
    dist_info = f"{base.name.written_name}-{version}.dist-info"
    filename = f"{base.name.written_name}-{version}-{base.name.written_tags}.whl"

    # 2. The layout: the main target there, nothing in the way of the new names.
    if config.TARGET not in base.by_name:
        raise PatchError(
            f"{base.filename}: has no {config.TARGET}; this is not a torch_tensorrt wheel the "
            f"overlay fits. Supported base releases are {config.supported_releases_text()}"
        )
    for name in base.by_name:
        if name.split("/")[0] == dist_info:
            raise PatchError(
                f"{base.filename}: already has a member {name!r} under the patched wheel's "
                ".dist-info name; use the official wheel"
            )

    # 3. The fixes that apply: each where its hook is found in its target module; none is a
    # refusal. The overlay's other definitions (helpers) go into the main target.
    sources: Dict[str, Tuple[str, str, ast.Module]] = {}
    for target in dict.fromkeys([config.TARGET, *(fix.target for fix in FIXES)]):
        if target in base.by_name:
            what = f"{base.filename}:{target}"
            text, encoding = splice.decode_source(base.read(target, 1 << 20), what)
            sources[target] = (text, encoding, splice.parse_source(text, what))
    defined = {d.name: d for d in overlay.definitions}
    applied = [
        fix
        for fix in FIXES
        if set(fix.functions) & set(defined)
        and fix.target in sources
        and fix.hook(sources[fix.target][2], defined)
    ]
    if not applied:
        hooks = "; ".join(f"{fix.name}: {fix.hook_text}" for fix in FIXES)
        raise PatchError(
            f"{base.filename}: no fix of the overlay applies to this base ({hooks}: none "
            f"holds); supported base releases are {config.supported_releases_text()}"
        )
    left_out = {name for fix in FIXES if fix not in applied for name in fix.functions}
    placed = {name: fix.target for fix in applied for name in fix.functions}

    # 4. The splice into each target module (the checks: _splice_module).
    package = {
        name: base.read(name, 1 << 20)
        for name in base.by_name
        if name.endswith(".py") and not name.startswith(f"{base.dist_info}/")
    }
    new: Dict[str, bytes] = {}
    for target in dict.fromkeys([config.TARGET, *(fix.target for fix in applied)]):
        definitions = tuple(
            d
            for d in overlay.definitions
            if d.name not in left_out and placed.get(d.name, config.TARGET) == target
        )
        part = overlay._replace(definitions=definitions)
        if target != config.TARGET:
            part = _needed_by(overlay, definitions)
        new[target] = _splice_module(base, target, sources[target], part, package)

    # 5. METADATA with the new version, and the provenance.
    base_metadata = base.read(f"{base.dist_info}/METADATA", 1 << 20)
    metadata = rewrite_metadata_version(base_metadata, version)
    provenance = Provenance(
        version=version,
        label=origin.label,
        base_wheel=base.filename,
        base_sha256=base.sha256,
        overlay_sha256=overlay.sha256,
        revision=origin.revision.revision,
        dirty=origin.revision.dirty,
        tool_sha256=origin.tool_sha256,
        fixes=tuple(fix.name for fix in applied),
        source_date_epoch=origin.source_date_epoch,
        local_install=base.local_install,
    )

    # 6. The members: the base's order, RECORD's signatures dropped, the .dist-info renamed;
    # the new bytes stored, every other member's compressed bytes copied; the provenance added
    # before RECORD, which is derived (the base's rows for what is copied) and written last.
    written = wheel.zip_date_time(origin.source_date_epoch)
    new[f"{dist_info}/METADATA"] = metadata
    dropped = {f"{base.dist_info}/{name}" for name in ("RECORD", *wheel.RECORD_SIGNATURES)}
    rows, metadata_info = base.record(), base.by_name[f"{base.dist_info}/METADATA"]
    entries: List[wheel.Entry] = []
    record_rows: List[Tuple[str, str, str]] = []

    def store(name: str, data: bytes, template: zipfile.ZipInfo) -> None:
        entries.append(wheel.Entry.stored(name, data, template, written))
        record_rows.append((name, wheel.record_hash(data), str(len(data))))

    for info in (info for info in base.infos if info.filename not in dropped):
        name = info.filename
        if name.startswith(f"{base.dist_info}/"):
            name = dist_info + name[len(base.dist_info) :]
        if name in new:
            store(name, new[name], info)
            continue
        entries.append(wheel.Entry.copied(name, info, base))
        if not info.is_dir():
            if info.filename not in rows:
                raise base.refused(f"its RECORD lacks {info.filename!r}")
            record_rows.append((name, *rows[info.filename]))
    store(provenance_member(dist_info), provenance_bytes(provenance), metadata_info)
    record_rows.append((f"{dist_info}/RECORD", "", ""))
    record_text = wheel.record_text(record_rows)
    entries.append(wheel.Entry.stored(f"{dist_info}/RECORD", record_text, metadata_info, written))
    data = wheel.write_zip(entries)

    # 7. Read back what verify reads: the zip's names and the provenance, as verify takes them.
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if archive.namelist() != [entry.name for entry in entries]:
            raise PatchError(f"{filename}: the written zip does not list its members; report this")
        parse_provenance(archive.read(provenance_member(dist_info)), filename)
    return PatchedWheel(filename, data, provenance)


def build_patched_wheel(
    base: wheel.BaseWheel, *, out_dir: Path, overlay_path: Path = config.DEFAULT_OVERLAY
) -> Path:
    """Write the patched wheel of ``base`` with the overlay at ``overlay_path`` into
    ``out_dir`` (temporary name, then rename) and return its path."""
    overlay, data = read_overlay(overlay_path)
    patched = patch_wheel(base, overlay, origin=build_origin(data))
    saved, path = Path(out_dir) / base.filename, Path(out_dir) / patched.filename
    if base.local_install:  # the only copy of the original once the patched wheel replaces it
        files.write_atomically(saved, base.data)
        message = "the original install is saved as %s; to go back to it: pip install %s %s"
        logger.warning(message, saved, "--force-reinstall --no-deps", saved)
    files.write_atomically(path, patched.data)
    logger.debug("patched wheel: %s", path)
    return path
