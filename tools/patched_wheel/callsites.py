"""Every call of a replaced function in the base package, bound to the overlay's signature.

The overlay is not imported by the build (it needs torch), so its signatures are built from
its AST: the parameters' kinds, names and whether they have defaults. A call
``deallocate_module(gm, delete_module=False)`` in upstream's sources is then bound to that
signature with ``inspect.Signature.bind``, which checks the number of positional arguments
and the keyword names exactly as a real call would.

A call is found by the function's name, called directly (``deallocate_module(...)``) or as an
attribute (``utils.deallocate_module(...)``). A call that spreads ``*args`` or ``**kwargs``
is checked as far as it can be: the keywords it names, and positional arguments given before
the spread.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from patched_wheel import PatchError
from patched_wheel.sources import decode_source
from patched_wheel.splice import FunctionNode, parse_source

__all__ = ["CallSite", "check_call_sites", "find_call_sites", "signature_from_ast"]


class _Default:
    """Stands for a parameter's default value, which the check never evaluates."""

    def __repr__(self) -> str:
        return "..."


_DEFAULT = _Default()


@dataclass(frozen=True)
class CallSite:
    """One call of a function by name in the base package's sources."""

    path: str
    lineno: int
    name: str
    positional: int
    keywords: Tuple[str, ...]
    spreads: bool
    text: str


def signature_from_ast(function: FunctionNode) -> inspect.Signature:
    """The signature of a function definition, read from its AST (defaults as ``...``)."""
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    first_default = len(positional) - len(arguments.defaults)
    parameters: List[inspect.Parameter] = []
    for index, argument in enumerate(positional):
        kind = (
            inspect.Parameter.POSITIONAL_ONLY
            if index < len(arguments.posonlyargs)
            else inspect.Parameter.POSITIONAL_OR_KEYWORD
        )
        default = _DEFAULT if index >= first_default else inspect.Parameter.empty
        parameters.append(inspect.Parameter(argument.arg, kind, default=default))
    if arguments.vararg is not None:
        parameters.append(inspect.Parameter(arguments.vararg.arg, inspect.Parameter.VAR_POSITIONAL))
    for argument, kw_default in zip(arguments.kwonlyargs, arguments.kw_defaults):
        default = inspect.Parameter.empty if kw_default is None else _DEFAULT
        parameters.append(
            inspect.Parameter(argument.arg, inspect.Parameter.KEYWORD_ONLY, default=default)
        )
    if arguments.kwarg is not None:
        parameters.append(inspect.Parameter(arguments.kwarg.arg, inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(parameters)


def _called_name(call: ast.Call) -> Optional[str]:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _segment(lines: List[str], node: ast.Call) -> str:
    """The call's source text (``ast.get_source_segment`` splits the whole file each time)."""
    end_lineno = node.end_lineno or node.lineno
    chosen = [line.encode("utf-8") for line in lines[node.lineno - 1 : end_lineno]]
    if not chosen:
        return ""
    chosen[-1] = chosen[-1][: node.end_col_offset]
    chosen[0] = chosen[0][node.col_offset :]
    return b" ".join(chosen).decode("utf-8", errors="replace")


def _site(path: str, lines: List[str], node: ast.Call, name: str) -> CallSite:
    keywords = tuple(k.arg for k in node.keywords if k.arg is not None)
    spreads = any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    )
    positional = len([a for a in node.args if not isinstance(a, ast.Starred)])
    segment = _segment(lines, node) or name
    return CallSite(
        path, node.lineno, name, positional, keywords, spreads, " ".join(segment.split())
    )


def find_call_sites(sources: Mapping[str, bytes], names: Iterable[str]) -> List[CallSite]:
    """Every call of one of ``names`` in ``sources`` (path -> Python source), in path order.

    Only the sources that hold one of the names as bytes are parsed: a call needs its name
    written out, and parsing every module of the package is most of a build's time.

    Raises:
        PatchError: If a source that holds a name cannot be decoded or parsed.
    """
    wanted = set(names)
    needles = [name.encode("ascii") for name in wanted]
    sites: List[CallSite] = []
    for path in sorted(sources):
        if not any(needle in sources[path] for needle in needles):
            continue
        text = decode_source(sources[path], path).text
        module = parse_source(text, f"upstream's {path}")
        lines = text.splitlines()
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and _called_name(node) in wanted:
                sites.append(_site(path, lines, node, str(_called_name(node))))
    return sites


def _bind_error(signature: inspect.Signature, site: CallSite) -> Optional[str]:
    """Why ``site`` does not fit ``signature``, or ``None`` when it does."""
    arguments = [object()] * site.positional
    keywords = {name: object() for name in site.keywords}
    try:
        if site.spreads:
            signature.bind_partial(*arguments, **keywords)
        else:
            signature.bind(*arguments, **keywords)
    except TypeError as error:
        return str(error)
    return None


def check_call_sites(
    sources: Mapping[str, bytes], functions: Mapping[str, FunctionNode], *, wheel: str
) -> List[CallSite]:
    """Bind every call of the given overlay functions in ``sources`` to their signatures.

    Returns:
        The call sites found, all of which fit.

    Raises:
        PatchError: Naming every call that does not fit, with its file and line.
    """
    signatures: Dict[str, inspect.Signature] = {
        name: signature_from_ast(function) for name, function in functions.items()
    }
    sites = find_call_sites(sources, signatures)
    misfits = []
    for site in sites:
        error = _bind_error(signatures[site.name], site)
        if error is not None:
            misfits.append(
                f"  {site.path}:{site.lineno}: {site.text} does not fit "
                f"{site.name}{signatures[site.name]}: {error}"
            )
    if misfits:
        raise PatchError(
            f"{wheel}: {len(misfits)} call(s) in upstream's package do not fit the overlay:\n"
            + "\n".join(misfits)
            + "\nChange the overlay's signature to accept these calls, or build from a "
            "supported base release"
        )
    return sites
