"""Splice the overlay's functions into upstream's module: a pure function on two sources.

The rules, as the overlay's module docstring states them:

* each top-level function (or class) of the overlay replaces the top-level definition of the
  same name in the base, in place: the base's lines from its first decorator to its last line
  give way to the overlay's lines of the same span;
* a definition the base lacks is appended at the end of the base, in the overlay's order;
* an import binding a name that the base's imports do not bind is inserted, one statement per
  name, after the base's last top-level import;
* a top-level constant (a plain assignment to one name) that the base lacks is inserted after
  those imports, with the comment lines directly above it; a constant the base already has
  with the same source is skipped, one with other source is refused;
* the overlay's module docstring and ``from __future__`` imports are not copied.

Every other byte of the base stays as it was, so an overlay with nothing to splice gives the
base back unchanged, and splicing the result again changes nothing.

Before the splice, every call of a replaced function in the base package is bound to the
overlay's signature (:func:`check_call_sites`), read from the overlay's AST: the overlay is
never imported by the build (it needs torch). The cost is linear in the size of the base's
module, and bounded: a source larger than
:data:`MAX_SOURCE_BYTES` or nested deeper than :data:`MAX_NESTING` is refused before it is
parsed or compiled (CPython's compiler recurses once per level and ends in ``RecursionError``
on a long enough expression).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import io
import re
import sys
import threading
import tokenize
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, Union

from . import PatchError

# Ceilings on a Python source the build parses. The official modules are at most 133 KB
# (aten_ops_converters.py in 2.14; utils.py is 39 KB) and nest at most 24 levels. Benefit: a
# hostile base costs at most a few hundred MB and seconds, and never a RecursionError. Cost:
# a module beyond them cannot be patched (raise them here for one).
MAX_SOURCE_BYTES = 512 << 10
MAX_NESTING = 100

# Where the tokenizer ends a line (not at a form feed, unlike ``str.splitlines``).
_LINE_END = re.compile(r"\r\n|\r|\n")

CallShape = Tuple[int, str, int, Tuple[str, ...], bool]
FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
DefinitionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class OverlayParts:
    """The top-level statements of an overlay, sorted by what the splice does with them."""

    source: str
    definitions: Tuple[DefinitionNode, ...]
    imports: Tuple[Union[ast.Import, ast.ImportFrom], ...]
    constants: Tuple[Union[ast.Assign, ast.AnnAssign], ...]
    # The sha256 of the overlay's bytes (of ``source`` in UTF-8 unless read from a file).
    sha256: str = ""

    @property
    def functions(self) -> Tuple[FunctionNode, ...]:
        """The overlay's top-level functions (its definitions less its classes)."""
        return tuple(d for d in self.definitions if not isinstance(d, ast.ClassDef))


# CPython 3.11 before 3.11.8 can raise "AST constructor recursion depth mismatch" when two
# threads build ASTs at once (python/cpython#106905); ``matrix`` and the tests build wheels
# in threads, so every parse here takes this lock.
_AST_LOCK = threading.Lock()


def parse_source(source: Union[str, bytes], what: str, *, compiled: bool = True) -> ast.Module:
    """``ast.parse`` with every failure, a null byte or a bomb of nesting too, as a refusal;
    a source beyond :data:`MAX_SOURCE_BYTES` or :data:`MAX_NESTING` is refused too."""
    size = len(
        source
        if isinstance(source, bytes)
        else source[: MAX_SOURCE_BYTES + 1].encode("utf-8", "surrogatepass")
    )
    if size > MAX_SOURCE_BYTES:
        raise PatchError(
            f"{what} is larger than {MAX_SOURCE_BYTES >> 10} KiB, which no official module "
            "comes near; use the official file"
        )
    try:
        with _AST_LOCK:
            module = ast.parse(source, "<unknown>")
    except SyntaxError as error:
        raise PatchError(
            f"{what} is not valid Python ({error.msg}, line {error.lineno}); "
            "use the official file, or fix the overlay"
        ) from None
    except (ValueError, MemoryError, RecursionError) as error:
        raise PatchError(
            f"{what} cannot be parsed as Python ({type(error).__name__}: {error}); "
            "use the official file, or fix the overlay"
        ) from None
    if compiled:  # a module only walked (ast.walk keeps no stack) needs no nesting bound
        _check_nesting(module, what)
    return module


def _check_nesting(module: ast.Module, what: str) -> None:
    """Refuse a module whose syntax tree is deeper than :data:`MAX_NESTING` (walked without
    recursion, so that the check itself cannot overflow)."""
    stack: List[Tuple[ast.AST, int]] = [(module, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            line = getattr(node, "lineno", "?")
            raise PatchError(
                f"{what} nests deeper than {MAX_NESTING} levels (at line {line}), which no "
                "official module does; use the official file"
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def source_lines(source: str) -> List[str]:
    """``source``'s lines, ends kept, split where the tokenizer splits them (the lines that
    ``ast`` node positions count)."""
    lines, start = [], 0
    for match in _LINE_END.finditer(source):
        lines.append(source[start : match.end()])
        start = match.end()
    return lines + ([source[start:]] if start < len(source) else [])


def source_segment(lines: Sequence[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` on lines split once: that function splits the whole source
    at every call, which made the splice quadratic in the number of assignments."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset
    if first == last:
        return lines[first].encode("utf-8")[start:end].decode("utf-8")
    head = lines[first].encode("utf-8")[start:].decode("utf-8")
    tail = lines[last].encode("utf-8")[:end].decode("utf-8")
    return head + "".join(lines[first + 1 : last]) + tail


def _constant_name(node: ast.stmt) -> str | None:
    """The one name a plain top-level assignment binds, or ``None`` for other statements."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        return target.id if isinstance(target, ast.Name) else None
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def parse_overlay(overlay_source: str) -> OverlayParts:
    """Sort the overlay's top-level statements; refuse any the splice has no rule for."""
    module = parse_source(overlay_source, "the overlay")
    definitions: List[DefinitionNode] = []
    imports: List[Union[ast.Import, ast.ImportFrom]] = []
    constants: List[Union[ast.Assign, ast.AnnAssign]] = []
    for index, node in enumerate(module.body):
        if index == 0 and _is_docstring(node):
            continue
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            continue
        if isinstance(node, _DEFINITIONS):
            definitions.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and _constant_name(node):
            constants.append(node)
        else:
            raise PatchError(
                f"the overlay's line {node.lineno} is a top-level {type(node).__name__}, which "
                "the splice has no rule for; the overlay may hold only functions, classes, "
                "imports and assignments to one name"
            )
    names = [definition.name for definition in definitions]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise PatchError(f"the overlay defines {', '.join(duplicates)} more than once")
    sha256 = hashlib.sha256(overlay_source.encode("utf-8", "surrogatepass")).hexdigest()
    return OverlayParts(
        overlay_source, tuple(definitions), tuple(imports), tuple(constants), sha256
    )


def top_level_definitions(module: ast.Module) -> Dict[str, DefinitionNode]:
    """The module's top-level functions and classes by name (the last one wins, as at run time)."""
    return {node.name: node for node in module.body if isinstance(node, _DEFINITIONS)}


def _first_line(node: ast.stmt) -> int:
    """The 1-based first line of a statement, its decorators included."""
    decorators: List[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno] + [decorator.lineno for decorator in decorators])


def _end_line(node: ast.stmt) -> int:
    assert node.end_lineno is not None
    return node.end_lineno


def _segment(lines: Sequence[str], first: int, last: int, newline: str) -> List[str]:
    """Lines ``first..last`` (1-based, inclusive), each ending in the base's newline."""
    return [line.rstrip("\r\n") + newline for line in lines[first - 1 : last]]


def _comment_lines_above(lines: Sequence[str], first: int) -> int:
    """The first line of the run of comment lines directly above line ``first``."""
    while first > 1 and lines[first - 2].lstrip().startswith("#"):
        first -= 1
    return first


def _import_bindings(node: Union[ast.Import, ast.ImportFrom]) -> List[Tuple[str, str]]:
    """(bound name, one-name import statement) for each name the import binds."""
    bindings = []
    for alias in node.names:
        suffix = f" as {alias.asname}" if alias.asname else ""
        if isinstance(node, ast.Import):
            bound = alias.asname or alias.name.split(".")[0]
            statement = f"import {alias.name}{suffix}"
        else:
            bound = alias.asname or alias.name
            module = "." * node.level + (node.module or "")
            statement = f"from {module} import {alias.name}{suffix}"
        bindings.append((bound, statement))
    return bindings


def _names_bound_by_imports(module: ast.Module) -> Set[str]:
    """Names bound by imports at module level, inside top-level ``if``/``try`` blocks too."""
    names: Set[str] = set()
    pending: List[ast.stmt] = list(module.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(bound for bound, _ in _import_bindings(node))
        elif isinstance(node, (ast.If, ast.Try)):
            pending.extend(node.body + node.orelse + getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return names


def _other_top_level_names(module: ast.Module) -> Set[str]:
    """Names bound at top level by definitions and assignments (not by imports)."""
    names: Set[str] = set()
    for node in module.body:
        if isinstance(node, _DEFINITIONS):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def _insertion_line(module: ast.Module) -> int:
    """The 1-based line after which new imports go: the base's last top-level import."""
    imports = [node for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    if imports:
        return _end_line(imports[-1])
    if module.body and _is_docstring(module.body[0]):
        return _end_line(module.body[0])
    return 0


def _new_imports(base: ast.Module, overlay: OverlayParts, newline: str) -> List[str]:
    bound_by_imports = _names_bound_by_imports(base)
    bound_otherwise = _other_top_level_names(base)
    lines: List[str] = []
    for node in overlay.imports:
        for bound, statement in _import_bindings(node):
            if bound in bound_by_imports:
                continue
            if bound in bound_otherwise:
                raise PatchError(
                    f"the overlay imports {bound!r}, but upstream's module defines "
                    f"{bound!r} itself; rename the import in the overlay"
                )
            bound_by_imports.add(bound)
            lines.append(statement + newline)
    return lines


def _new_constants(
    base: ast.Module,
    base_source: str,
    overlay: OverlayParts,
    overlay_lines: Sequence[str],
    newline: str,
) -> List[str]:
    base_constants = {}
    base_lines = source_lines(base_source)
    for node in base.body:
        name = _constant_name(node)
        if name is not None:
            base_constants[name] = source_segment(base_lines, node)
    taken = _other_top_level_names(base) | _names_bound_by_imports(base)
    overlay_source_lines = source_lines(overlay.source)
    lines: List[str] = []
    for node in overlay.constants:
        name = _constant_name(node)
        assert name is not None
        source = source_segment(overlay_source_lines, node)
        if name in base_constants:
            if base_constants[name] == source:
                continue
            raise PatchError(
                f"the overlay has {source!r}, but upstream's module has "
                f"{base_constants[name]!r}; rename the overlay's constant"
            )
        if name in taken:
            raise PatchError(
                f"the overlay sets {name!r}, a name upstream's module defines otherwise; "
                "rename the overlay's constant"
            )
        first = _comment_lines_above(overlay_lines, _first_line(node))
        lines.append(newline)
        lines.extend(_segment(overlay_lines, first, _end_line(node), newline))
    return lines


def _definition_edits(
    base: ast.Module, overlay: OverlayParts, overlay_lines: Sequence[str], newline: str
) -> Tuple[List[Tuple[int, int, List[str]]], List[str]]:
    """(edits replacing the base's definitions, lines of the definitions to append)."""
    edits: List[Tuple[int, int, List[str]]] = []
    appended: List[str] = []
    base_definitions = top_level_definitions(base)
    for definition in overlay.definitions:
        first, last = _first_line(definition), _end_line(definition)
        new_lines = _segment(overlay_lines, first, last, newline)
        if definition.name in base_definitions:
            old = base_definitions[definition.name]
            edits.append((_first_line(old) - 1, _end_line(old), new_lines))
        else:
            appended.extend([newline, newline] + new_lines)
    return edits, appended


def _apply(
    base_lines: Sequence[str],
    edits: Sequence[Tuple[int, int, List[str]]],
    appended: Sequence[str],
    newline: str,
) -> str:
    """The base's lines with ``edits`` made (last first) and ``appended`` at the end."""
    result = list(base_lines)
    if appended:
        if result and not result[-1].endswith(("\n", "\r")):
            result[-1] += newline
        result.extend(appended)
    for first, after_last, new_lines in sorted(edits, key=lambda edit: edit[0], reverse=True):
        result[first:after_last] = new_lines
    return "".join(result)


def splice_overlay(
    base_source: str, overlay: OverlayParts, base: Optional[ast.Module] = None
) -> str:
    """Return ``base_source`` with the parsed overlay spliced in, by the rules of this module.

    Pure: no I/O, and the result depends on the two sources only. Lines keep the base's
    newline convention (``\\r\\n`` where the base's first line ends so). ``base`` is the
    base's module if the caller has parsed it already.
    """
    if base is None:
        base = parse_source(base_source, "upstream's module")
    base_lines = base_source.splitlines(keepends=True)
    overlay_lines = overlay.source.splitlines(keepends=True)
    newline = "\r\n" if base_lines and base_lines[0].endswith("\r\n") else "\n"
    edits, appended = _definition_edits(base, overlay, overlay_lines, newline)
    inserted = _new_imports(base, overlay, newline)
    inserted += _new_constants(base, base_source, overlay, overlay_lines, newline)
    if inserted:
        at = _insertion_line(base)
        edits.append((at, at, inserted))
    if not edits and not appended:
        return base_source
    return _apply(base_lines, edits, appended, newline)


def splice_functions(base_source: str, overlay_source: str) -> str:
    """:func:`splice_overlay` on two sources (the overlay parsed here)."""
    return splice_overlay(base_source, parse_overlay(overlay_source))


def check_splice(spliced: bytes, overlay: OverlayParts, *, filename: str) -> None:
    """Check that the spliced module compiles and holds each overlay definition unchanged.

    ``spliced`` is the module's bytes as written, so its encoding (BOM, coding cookie) is
    checked too.

    Raises:
        PatchError: If the result does not compile, or a function's AST differs from the
            overlay's.
    """
    try:
        with _AST_LOCK:
            module = ast.parse(spliced, filename)
            compile(module, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as error:
        raise PatchError(
            f"{filename}: the spliced module does not compile ({type(error).__name__}: "
            f"{error}); the overlay does not fit this base release"
        ) from None
    found = top_level_definitions(module)
    for definition in overlay.definitions:
        spliced_definition = found.get(definition.name)
        if spliced_definition is None or ast.dump(spliced_definition) != ast.dump(definition):
            raise PatchError(
                f"{filename}: after the splice, {definition.name} differs from the overlay's; "
                "the splice went wrong for this base release, please report it"
            )


def overlay_from_bytes(data: bytes, what: str) -> OverlayParts:
    """The overlay whose file holds ``data``, parsed, with the sha256 of those bytes; line
    ends read as a text file reads them, so a Windows checkout splices the same text."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise PatchError(f"cannot read the overlay {what} ({error}); it must be UTF-8") from None
    parts = parse_overlay(text.replace("\r\n", "\n").replace("\r", "\n"))
    return dataclasses.replace(parts, sha256=hashlib.sha256(data).hexdigest())


def decode_source(data: bytes, what: str) -> Tuple[str, str]:
    """(text, encoding) of a module's bytes, decoded as Python would (BOM, coding cookie)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        raise PatchError(
            f"{what} cannot be decoded as Python source ({error}); use the official file"
        ) from None


def encode_source(text: str, encoding: str, what: str) -> bytes:
    """``text`` in the module's own encoding (as :func:`decode_source` found it)."""
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as error:
        raise PatchError(
            f"{what}: the overlay's text cannot be written in the module's encoding "
            f"{encoding} ({error.reason} at {error.start}); keep the overlay ASCII"
        ) from None


def signature_from_ast(function: FunctionNode) -> inspect.Signature:
    """The signature of a function definition, read from its AST (defaults as ``...``)."""
    arguments, kind = function.args, inspect.Parameter
    positional = arguments.posonlyargs + arguments.args
    first_default = len(positional) - len(arguments.defaults)
    parameters = [
        kind(a.arg, kind.POSITIONAL_ONLY if i < len(arguments.posonlyargs) else
             kind.POSITIONAL_OR_KEYWORD, default=... if i >= first_default else kind.empty)
        for i, a in enumerate(positional)
    ]  # fmt: skip
    if arguments.vararg is not None:
        parameters.append(kind(arguments.vararg.arg, kind.VAR_POSITIONAL))
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        parameters.append(
            kind(argument.arg, kind.KEYWORD_ONLY, default=kind.empty if default is None else ...)
        )
    if arguments.kwarg is not None:
        parameters.append(kind(arguments.kwarg.arg, kind.VAR_KEYWORD))
    return inspect.Signature(parameters)


@functools.lru_cache(maxsize=256)
def _calls(source: bytes, path: str, names: FrozenSet[str]) -> Tuple[CallShape, ...]:
    """(line, name, positional arguments, keywords, spreads) of every call of ``names`` in
    one source; kept per source (the matrix's 75 wheels hold 6 releases' sources)."""
    text = decode_source(source, path)[0]
    calls = []
    for node in ast.walk(parse_source(text, f"upstream's {path}", compiled=False)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name in names:
            keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
            spreads = any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords
            )
            positional = len([a for a in node.args if not isinstance(a, ast.Starred)])
            calls.append((node.lineno, str(name), positional, keywords, spreads))
    return tuple(calls)


def check_call_sites(
    sources: Mapping[str, bytes], functions: Iterable[FunctionNode], *, wheel: str
) -> int:
    """Bind every call of the given overlay functions in ``sources`` (path -> bytes) to their
    signatures, as ``inspect.Signature.bind`` binds a real call: by name, directly or as an
    attribute; a call spreading ``*args``/``**kwargs`` is bound partially. Only sources that
    hold a name as bytes are parsed (a call writes its name out). Returns the calls found.

    Raises:
        PatchError: Naming every call that does not fit, with its file and line.
    """
    signatures = {function.name: signature_from_ast(function) for function in functions}
    names = frozenset(signatures)
    found, misfits = 0, []
    for path in sorted(sources):
        if not any(name.encode("ascii") in sources[path] for name in names):
            continue
        for line, name, positional, keywords, spreads in _calls(sources[path], path, names):
            found += 1
            try:
                bind = signatures[name].bind_partial if spreads else signatures[name].bind
                bind(*[object()] * positional, **{k: object() for k in keywords})
            except TypeError as error:
                misfits.append(
                    f"  {path}:{line}: {name}(...) does not fit {name}{signatures[name]}: {error}"
                )
    if misfits:
        raise PatchError(
            f"{wheel}: {len(misfits)} call(s) in upstream's package do not fit the overlay:\n"
            + "\n".join(misfits)
            + "\nChange the overlay's signature to accept these calls, or build from a "
            "supported base release"
        )
    return found


# The name the overlay is imported under by tests and benchmarks (not torch_tensorrt's).
OVERLAY_MODULE_NAME = "torchtrt_fork_overlay_utils"


def load_overlay(path: Optional[Path] = None) -> ModuleType:
    """Import the overlay on its own (it needs torch, not TensorRT), once per process."""
    loaded = sys.modules.get(OVERLAY_MODULE_NAME)
    if loaded is not None:
        return loaded
    path = path or Path(__file__).resolve().parents[2].joinpath(
        *"py/torch_tensorrt/dynamo/utils.py".split("/")
    )
    spec = importlib.util.spec_from_file_location(OVERLAY_MODULE_NAME, path)
    if spec is None or spec.loader is None:
        raise PatchError(f"cannot import the overlay {str(path)!r}; check that the file exists")
    module = importlib.util.module_from_spec(spec)
    sys.modules[OVERLAY_MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[OVERLAY_MODULE_NAME]
        raise
    return module
