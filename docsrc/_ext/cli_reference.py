"""Sphinx extension: the build tool's reference pages, read from its argument parser.

* ``.. cli-usage:: build``: the usage line of ``python tools/patched_wheel build``, wrapped
  between option groups to fit a phone's width;
* ``.. cli-options:: build``: its options as a definition list, each help text expanded as
  ``--help`` prints it (``%(default)s`` becomes the default), so that the pages never drift
  from the tool.
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import Any, Dict, List

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

REPOSITORY = Path(__file__).resolve().parents[2]
USAGE_WIDTH = 48


def command_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one command of ``python tools/patched_wheel``."""
    from patched_wheel.__main__ import argument_parser

    for action in argument_parser()._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser: argparse.ArgumentParser = action.choices[command]
            # The same wrapping whatever the terminal of the build.
            parser.formatter_class = functools.partial(argparse.HelpFormatter, width=88)
            return parser
    raise ValueError(f"python tools/patched_wheel has no command {command!r}")


def portable(text: str) -> str:
    """A help text with the repository's folder left out of the paths it shows."""
    return text.replace(str(REPOSITORY) + os.sep, "").replace(str(REPOSITORY), ".")


def _usage_groups(usage: str) -> List[str]:
    """The words of a usage line, each ``[...]`` or ``{...}`` group kept as one word."""
    groups: List[str] = []
    depth = 0
    for word in usage.split():
        if depth:
            groups[-1] += " " + word
        else:
            groups.append(word)
        depth += word.count("[") + word.count("{") - word.count("]") - word.count("}")
    return groups


def wrap_usage(usage: str, width: int = USAGE_WIDTH) -> str:
    """A usage line wrapped between its option groups, continuation lines indented by four.

    argparse aligns continuation lines under the first option, after the long program name,
    which pushes them past the edge of a page; this wraps narrower and never inside a group.
    """
    lines: List[str] = []
    for group in _usage_groups(usage):
        if lines and len(lines[-1]) + 1 + len(group) <= width:
            lines[-1] += " " + group
        else:
            lines.append(("    " if lines else "") + group)
    return "\n".join(lines)


class CliDirective(SphinxDirective):
    """``cli-usage`` or ``cli-options`` of one command of the build tool (module docstring)."""

    required_arguments = 1

    def run(self) -> List[nodes.Node]:
        parser = command_parser(self.arguments[0])
        if self.name == "cli-usage":
            usage = wrap_usage(parser.format_usage().strip().removeprefix("usage: "))
            return [nodes.literal_block(text=usage, language="none", classes=["cli-usage"])]
        items = nodes.definition_list(classes=["cli-options"])
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
            term = nodes.term()
            term += nodes.literal(text=", ".join(action.option_strings) + metavar)
            # argparse's own formatter fills in %(default)s and the other fields.
            text = portable(parser._get_formatter()._expand_help(action)) if action.help else ""
            if isinstance(action, argparse._AppendAction):
                text = (text + "; " if text else "") + "repeat for several"
            if action.default not in (None, False, []) and "default" not in text:
                text += f" (default: {portable(str(action.default))})"
            definition = nodes.definition()
            definition += nodes.paragraph(text=text[:1].upper() + text[1:] + ".")
            items += nodes.definition_list_item("", term, definition)
        return [items]


def setup(app: Sphinx) -> Dict[str, Any]:
    app.add_directive("cli-usage", CliDirective)
    app.add_directive("cli-options", CliDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
