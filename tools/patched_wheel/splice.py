"""Splice the overlay's functions into upstream's module: a pure function on two sources.

The rules are the overlay docstring's (besides: a constant the base has with other source is
refused; the overlay's docstring and ``from __future__`` imports are not copied). Every other
byte of the base stays, so an empty overlay gives the base back and splicing twice equals once.
Every call of a replaced function in the base package is bound to the overlay's signature,
read from its AST (the build never imports the overlay: it needs torch)."""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import inspect
import io
import itertools
import re
import threading
import tokenize
from typing import Dict, FrozenSet, Iterable, List, Mapping, NamedTuple, Sequence, Set, Tuple, Union

from . import PatchError

# Ceilings on a Python source the build parses: the official modules are at most 133 KB
# (aten_ops_converters.py in 2.14; utils.py is 39 KB) and nest at most 24 levels. A hostile
# base costs at most a few hundred MB and seconds, never a RecursionError (raise them here).
MAX_SOURCE_BYTES = 512 << 10
MAX_NESTING = 100

# A line as the tokenizer ends it (not at a form feed, unlike ``str.splitlines``).
_LINE = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+\Z")

# A line that may start a top-level statement holding calls (a decorator's line is one).
_TOP_LEVEL = re.compile(r"(?:@|def\s|async\s+def\s|class\s)")

CallShape = Tuple[int, str, int, Tuple[str, ...], bool]
DefinitionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef]
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class OverlayParts(NamedTuple):
    """The overlay's top-level statements by what the splice does with them, and its sha256."""

    source: str
    definitions: Tuple[DefinitionNode, ...]
    imports: Tuple[Union[ast.Import, ast.ImportFrom], ...]
    constants: Tuple[Union[ast.Assign, ast.AnnAssign], ...]
    sha256: str


# CPython 3.11 before 3.11.8 can raise "AST constructor recursion depth mismatch" when two
# threads build ASTs at once (python/cpython#106905); ``matrix`` and the tests build wheels
# in threads, so every parse here takes this lock.
_AST_LOCK = threading.Lock()


def parse_source(
    source: str, what: str, *, compiled: bool = True, remedy: str = "use the official file"
) -> ast.Module:
    """``ast.parse`` with every failure (a null byte too) as a refusal, as is a source beyond
    :data:`MAX_SOURCE_BYTES` or, if it is to be compiled, :data:`MAX_NESTING`; each refusal
    ends in ``remedy``, what to do (an upstream module and the overlay differ in that)."""
    if len(source.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        raise PatchError(
            f"{what} is larger than {MAX_SOURCE_BYTES >> 10} KiB, which no official module "
            f"comes near; {remedy}"
        )
    try:
        with _AST_LOCK:
            module = ast.parse(source, "<unknown>")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as error:
        if isinstance(error, SyntaxError):
            reason = f"is not valid Python ({error.msg}, line {error.lineno})"
        else:
            reason = f"cannot be parsed as Python ({type(error).__name__}: {error})"
        raise PatchError(f"{what} {reason}; {remedy}") from None
    # The nesting bound, level by level without recursion (a module only searched needs none);
    # ast.iter_child_nodes written out, three times as fast.
    level: List[ast.AST] = [module] if compiled else []
    for _ in range(MAX_NESTING + 1):
        values = [getattr(node, field, None) for node in level for field in node._fields]
        children = [c for v in values for c in (v if isinstance(v, list) else [v])]
        level = [child for child in children if isinstance(child, ast.AST)]
    if level:
        line = next((getattr(n, "lineno") for n in level if hasattr(n, "lineno")), "?")
        raise PatchError(
            f"{what} nests deeper than {MAX_NESTING} levels (at line {line}), which no "
            f"official module does; {remedy}"
        )
    return module


def source_lines(source: str) -> List[str]:
    """``source``'s lines, ends kept, split where the tokenizer splits them (as ``ast`` counts)."""
    return _LINE.findall(source)


def source_segment(lines: Sequence[str], node: ast.stmt) -> str:
    """``ast.get_source_segment`` on lines split once: that function splits the whole source
    at every call, which made the splice quadratic in the number of assignments."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    text = "".join(lines[first : last + 1]).encode("utf-8")
    end = len(text) - len(lines[last].encode("utf-8")) + (node.end_col_offset or 0)
    return text[node.col_offset : end].decode("utf-8")


def _span(node: ast.AST) -> Tuple[int, int]:
    """A node's first line (its decorators', for a definition) and last line, 1-based."""
    lines = [decorator.lineno for decorator in getattr(node, "decorator_list", [])]
    return min(lines + [getattr(node, "lineno")]), getattr(node, "end_lineno")


def _lines(lines: Sequence[str], first: int, last: int, end: str = "") -> List[str]:
    """Lines ``first..last`` (1-based) of ``lines``, each ending in ``end`` instead."""
    return [line.rstrip("\r\n") + end for line in lines[first - 1 : last]]


def constant_name(node: ast.stmt) -> str | None:
    """The one name a plain top-level assignment binds, or ``None`` for other statements."""
    target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
    target = node.target if isinstance(node, ast.AnnAssign) else target
    return target.id if isinstance(target, ast.Name) else None


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(getattr(node.value, "value", None), str)


def overlay_from_bytes(data: bytes, what: str) -> OverlayParts:
    """The overlay whose file holds ``data``, sorted, any statement without a splice rule
    refused; line ends read as a text file reads them (a Windows checkout splices the same)."""
    try:
        source = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as error:
        raise PatchError(f"cannot read the overlay {what} ({error}); it must be UTF-8") from None
    definitions: List[DefinitionNode] = []
    imports: List[Union[ast.Import, ast.ImportFrom]] = []
    constants: List[Union[ast.Assign, ast.AnnAssign]] = []
    parsed = parse_source(source, f"the overlay {what}", remedy="fix the overlay")
    for index, node in enumerate(parsed.body):
        if (index == 0 and _is_docstring(node)) or getattr(node, "module", None) == "__future__":
            continue  # the docstring and ``from __future__`` imports are the overlay's own
        if isinstance(node, DEFINITIONS):
            definitions.append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and constant_name(node):
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
    sha256 = hashlib.sha256(data).hexdigest()
    return OverlayParts(source, tuple(definitions), tuple(imports), tuple(constants), sha256)


def top_level_definitions(module: ast.Module) -> Dict[str, DefinitionNode]:
    """The module's top-level functions and classes by name (the last one wins, as at run time)."""
    return {node.name: node for node in module.body if isinstance(node, DEFINITIONS)}


def _import_bindings(node: Union[ast.Import, ast.ImportFrom]) -> List[Tuple[str, str]]:
    """(bound name, one-name import statement) for each name the import binds."""
    prefix = "" if isinstance(node, ast.Import) else f"from {'.' * node.level}{node.module or ''} "
    return [
        (alias.asname or alias.name.split(".")[0], f"{prefix}import {ast.unparse(alias)}")
        for alias in node.names
    ]


def splice_overlay(base_source: str, overlay: OverlayParts, base: ast.Module) -> str:
    """``base_source`` (parsed: ``base``) with the parsed overlay spliced in; the new lines end
    as the base's first line does (``\\r\\n`` or ``\\n``)."""
    base_lines, overlay_lines = source_lines(base_source), source_lines(overlay.source)
    newline = "\r\n" if base_lines and base_lines[0].endswith("\r\n") else "\n"

    # 1. Each definition replaces the base's of its name in place, or is appended.
    edits: List[Tuple[int, int, List[str]]] = []  # (first index, index after the last, lines)
    appended: List[str] = []
    base_definitions = top_level_definitions(base)
    for definition in overlay.definitions:
        new_lines = _lines(overlay_lines, *_span(definition), newline)
        if definition.name in base_definitions:
            first, last = _span(base_definitions[definition.name])
            edits.append((first - 1, last, new_lines))
        else:
            appended.extend([newline, newline] + new_lines)

    # 2. What the base binds: by imports (inside top-level if/try too), and otherwise.
    bound_by_imports: Set[str] = set()
    pending: List[ast.stmt] = list(base.body)
    for node in pending:  # grows as it is read
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound_by_imports.update(bound for bound, _ in _import_bindings(node))
        elif isinstance(node, (ast.If, ast.Try)):
            handlers = [statement for h in getattr(node, "handlers", []) for statement in h.body]
            pending += node.body + node.orelse + getattr(node, "finalbody", []) + handlers
    bound_otherwise = set(base_definitions)
    for node in base.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            walked = [n for target in targets for n in ast.walk(target)]
            bound_otherwise.update(n.id for n in walked if isinstance(n, ast.Name))
    taken = bound_otherwise | bound_by_imports

    # 3. The imports the base lacks, one statement per name.
    inserted: List[str] = []
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
            inserted.append(statement + newline)

    # 4. The constants the base lacks, with the comment lines directly above them.
    base_constants = {
        name: source_segment(base_lines, node)
        for node in base.body
        if (name := constant_name(node)) is not None
    }
    for node in overlay.constants:
        name, source = constant_name(node), source_segment(overlay_lines, node)
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
        first, last = _span(node)
        while first > 1 and overlay_lines[first - 2].lstrip().startswith("#"):
            first -= 1
        inserted += [newline] + _lines(overlay_lines, first, last, newline)

    # 5. Insertions after the base's last top-level import (or its docstring); edits last first.
    if inserted:
        imports = [node for node in base.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        docstring = [node for node in base.body[:1] if _is_docstring(node)]
        heads: List[ast.stmt] = [*imports[-1:], *docstring]
        at = _span(heads[0])[1] if heads else 0
        edits.append((at, at, inserted))
    if not edits and not appended:
        return base_source
    result = list(base_lines)
    if appended and result and not result[-1].endswith(("\n", "\r")):
        result[-1] += newline
    result.extend(appended)
    for first, after_last, new_lines in sorted(edits, key=lambda edit: edit[0], reverse=True):
        result[first:after_last] = new_lines
    return "".join(result)


def check_splice(spliced: bytes, overlay: OverlayParts, *, filename: str) -> None:
    """Check that the spliced module, as the bytes written (encoding included), compiles and
    holds each overlay definition unchanged; refuse it otherwise."""
    try:
        with _AST_LOCK:
            module = ast.parse(spliced, filename)
            compile(module, filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as error:
        raise PatchError(
            f"{filename}: the spliced module does not compile ({type(error).__name__}: "
            f"{error}); the overlay does not fit this base release"
        ) from None
    # Each definition's lines where the parser places them, against the overlay's: the same
    # text is the same syntax tree (a tenth of the time of comparing ast.dump's).
    found = top_level_definitions(module)
    spliced_lines = source_lines(decode_source(spliced, filename)[0])
    overlay_lines = source_lines(overlay.source)
    for definition in overlay.definitions:
        placed = found.get(definition.name)
        wanted = _lines(overlay_lines, *_span(definition))
        if placed is None or _lines(spliced_lines, *_span(placed)) != wanted:
            raise PatchError(
                f"{filename}: after the splice, {definition.name} differs from the overlay's; "
                "the splice went wrong for this base release, please report it"
            )


def decode_source(data: bytes, what: str) -> Tuple[str, str]:
    """(text, encoding) of a module's bytes, decoded as Python would (BOM, coding cookie)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding), encoding
    except (SyntaxError, LookupError, UnicodeDecodeError) as error:
        raise PatchError(
            f"{what} cannot be decoded as Python source ({error}); use the official file"
        ) from None


def signature_from_ast(function: ast.FunctionDef | ast.AsyncFunctionDef) -> inspect.Signature:
    """The signature of a function definition, read from its AST (defaults as ``...``)."""
    arguments, kind = function.args, inspect.Parameter
    positional = arguments.posonlyargs + arguments.args
    only = len(arguments.posonlyargs)  # the positional-only ones come first
    first_default = len(positional) - len(arguments.defaults)
    parameters = [
        kind(
            argument.arg,
            kind.POSITIONAL_ONLY if i < only else kind.POSITIONAL_OR_KEYWORD,
            default=... if i >= first_default else kind.empty,
        )
        for i, argument in enumerate(positional)
    ]
    if arguments.vararg is not None:
        parameters.append(kind(arguments.vararg.arg, kind.VAR_POSITIONAL))
    for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        parameters.append(
            kind(argument.arg, kind.KEYWORD_ONLY, default=kind.empty if default is None else ...)
        )
    if arguments.kwarg is not None:
        parameters.append(kind(arguments.kwarg.arg, kind.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _statements_around(text: str, lines: Sequence[int], what: str) -> List[Tuple[ast.stmt, int]]:
    """(statement, line offset) of the top-level statements of ``text`` around ``lines`` (in
    order): only the runs from the closest top-level ``def``, ``class`` or decorator line above
    each line to the next are parsed (in a third of the time of the whole); where a run does not
    parse (such a line in a string) the whole source is, so the statements are the whole
    parse's either way. Each run is found by bisection and parsed once: linear in the source."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        return [(node, 0) for node in parse_source(text, what, compiled=False).body]  # refused
    source = source_lines(text)
    starts = sorted(
        {1}
        | {
            number
            for number, line in enumerate(source, 1)
            if _TOP_LEVEL.match(line) and not (number > 1 and source[number - 2].startswith("@"))
        }
    )
    statements: List[Tuple[ast.stmt, int]] = []
    for run in sorted({bisect.bisect_right(starts, line) - 1 for line in lines}):
        first = starts[run]
        after = starts[run + 1] if run + 1 < len(starts) else len(source) + 1
        try:
            with _AST_LOCK:
                parsed = ast.parse("".join(source[first - 1 : after - 1]))
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return [(node, 0) for node in parse_source(text, what, compiled=False).body]
        statements += [(node, first - 1) for node in parsed.body]
    return statements


def _call_lines(text: str, names: FrozenSet[str]) -> List[int]:
    """The lines (sorted) where one of ``names`` may be called: the name's line wherever it is
    followed, through spaces, line ends and ``)``, by ``(``, ``#`` or ``\\`` (a comment or a line
    continuation may stand before the ``(``), not as a ``def`` or ``class`` name. A superset of
    the lines of calls, which the AST then decides; one pass, linear in the source: the one
    quantifier is over characters that cannot start a name, so no two tries overlap (a tail
    of nested quantifiers backtracked: 67 bytes of comment hung the build), and lines are
    counted from one match to the next, not from the start each time."""
    if not names:
        return []
    alternatives = "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
    found, line, counted = set(), 1, 0
    for match in re.finditer(rf"(?:{alternatives})[\s)]*[(#\\]", text):
        at = match.start()
        if text[max(0, at - 64) : at].rstrip(" \t").endswith(("def", "class")):
            continue
        line += text.count("\n", counted, at) + text.count("\r", counted, at)
        line -= text.count("\r\n", counted, at)
        counted = at
        found.add(line)
    return sorted(found)


@functools.lru_cache(maxsize=256)
def _calls(source: bytes, path: str, names: FrozenSet[str]) -> Tuple[CallShape, ...]:
    """(line, name, positional arguments, keywords, spreads) of each call of ``names`` in one
    source, in ``ast.walk``'s order, kept per source (the matrix's 75 wheels hold 6 releases').
    Only a line of :func:`_call_lines` can hold a call: a source with none is not parsed, and
    the search enters only nodes spanning such a line (as every node enclosing a call does;
    a count of those lines up to each line answers in constant time); the AST decides the
    rest. Every step is linear in the source, whatever it holds."""
    text = decode_source(source, path)[0]
    lines = _call_lines(text, names)
    if not lines:
        return ()
    # up_to[n]: how many of the lines are at most n (lines first..last hold one if it grows).
    marked = set(lines)
    up_to = list(itertools.accumulate(number in marked for number in range(lines[-1] + 1)))

    def spans_a_line(node: ast.AST, offset: int) -> bool:
        first, last = _span(node)
        first, last = first + offset, min(last + offset, lines[-1])
        return first <= last and up_to[last] > up_to[first - 1]

    calls = []
    statements = _statements_around(text, lines, f"upstream's {path}")
    # Read as it grows: ast.walk's order. prune: skip children off those lines (not inside
    # f-strings, whose positions have been off).
    todo: List[Tuple[ast.AST, bool, int]] = [
        (node, True, offset) for node, offset in statements if spans_a_line(node, offset)
    ]
    for node, prune, offset in todo:
        prune = prune and not isinstance(node, ast.JoinedStr)
        for child in ast.iter_child_nodes(node):
            if not (prune and hasattr(child, "end_lineno")) or spans_a_line(child, offset):
                todo.append((child, prune, offset))
        if not isinstance(node, ast.Call):
            continue
        called = getattr(node.func, "id", getattr(node.func, "attr", None))  # a name, a method
        if called in names:
            keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
            starred = [a for a in node.args if isinstance(a, ast.Starred)]
            spreads = bool(starred) or len(keywords) < len(node.keywords)  # *args or **kwargs
            line, positional = node.lineno + offset, len(node.args) - len(starred)
            calls.append((line, str(called), positional, keywords, spreads))
    return tuple(calls)


def check_call_sites(
    sources: Mapping[str, bytes], definitions: Iterable[DefinitionNode], *, wheel: str
) -> int:
    """Bind every call of the overlay's functions (not classes) in ``sources`` (path -> bytes)
    to their signatures, as ``inspect.Signature.bind`` binds a real call (partially where it
    spreads ``*args``/``**kwargs``); return the number of calls, or refuse naming each misfit."""
    functions = [d for d in definitions if not isinstance(d, ast.ClassDef)]
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
