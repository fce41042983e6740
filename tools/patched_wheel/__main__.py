"""Command line of the patched-wheel tool: ``python tools/patched_wheel <command>``.

Arguments are checked where they enter (exit status 2); a refusal is one PatchError, printed as
``error: ...`` with exit status 1.

The command line starts the tool in a Python of its own, isolated (``-I``): Python
runs a folder with the folder first on ``sys.path``, so a module there named like one of the
standard library's could run in place of it, as could one on ``PYTHONPATH``, a
``sitecustomize`` there, or one in the user's site folder. The isolated Python imports only the
installed libraries and, by the package's name, the tool's own files; the first one refuses a
module it already imported from the tool's folder (while starting, before this file ran)."""

from __future__ import annotations

import os
import sys


def _folders_of(module: object) -> set[str]:
    """The folder of a module's file, and the one above (a package's path entry)."""
    where = os.path.dirname(os.path.abspath(getattr(module, "__file__", None) or os.sep))
    return {where, os.path.dirname(where)}


def _start_isolated(folder: str) -> None:
    """Run this file again in an isolated Python, with the same arguments; never returns.
    Refused where this Python already imported a module from the tool's folder or from
    ``PYTHONPATH`` (a ``sitecustomize`` there runs before any file). Only ``os`` and ``sys``
    are used before the folder is off the path: every Python imports them before a file."""
    installed = sys.modules["site"].getsitepackages() if "site" in sys.modules else []
    pythonpath = [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    folders = {folder, *pythonpath} - set(installed)
    ran = [
        f"{module.__file__} (as {name})"
        for name, module in list(sys.modules.items())
        if name != "__main__" and _folders_of(module) & folders
    ]
    if ran:
        sys.exit(
            f"error: the tool cannot start isolated: Python imported {ran[0]} from the tool's "
            "folder or PYTHONPATH before the tool ran; remove that file, or unset PYTHONPATH"
        )
    if not sys.executable:
        sys.exit(
            "error: the tool cannot start isolated: this Python does not say where its "
            "executable is (sys.executable); run the tool with a python executable"
        )
    command = [sys.executable, "-I", "-B", os.path.join(folder, "__main__.py"), *sys.argv[1:]]
    if os.name != "nt":
        os.execv(sys.executable, command)
    del sys.path[0]  # Windows has no exec: a child, imported from nothing of the folder
    import subprocess

    sys.exit(subprocess.run(command).returncode)


if __package__ in (None, ""):
    _folder = os.path.dirname(os.path.abspath(__file__))
    on_path = {os.path.abspath(entry or os.curdir) for entry in sys.path}
    if not sys.flags.isolated or _folder in on_path:
        _start_isolated(_folder)
    # The isolated Python: the folder's parent first on sys.path makes the package import as
    # itself (and the package refuses any module there but its own).
    sys.path.insert(0, os.path.dirname(_folder))
    from patched_wheel.__main__ import main as _main

    sys.exit(_main())

import argparse  # noqa: E402 (below the start-up, which imports nothing before it)
import json  # noqa: E402
import shlex  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple  # noqa: E402

from . import (
    PatchError,
    config,
    console,
    files,
    index,
    lock,
    matrix,
    patch,
    provenance,
    releases,
    settings,
    site,
    verify,
)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped between words only: a path or a tag is never split."""

    def _split_lines(self, text: str, width: int) -> List[str]:
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)


class _VersionAction(argparse.Action):
    """``--version``: the label a build here gives, worked out (from git) only when asked."""

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        with console.one_line_errors():
            label, sha256 = patch.current_label(), patch.read_overlay()[0].sha256
        overlay = f"overlay sha256 {sha256[:8]}"
        print(f"patched_wheel {label} ({overlay}), default base release {config.DEFAULT_RELEASE}")
        parser.exit()


def _shown(path: Path) -> str:
    """A default path as the help shows it: relative to the repository."""
    return path.relative_to(config.REPOSITORY).as_posix()


def _build(args: argparse.Namespace) -> None:
    unlocked = args.unlocked or settings.unlocked_from_environment(os.environ)
    if args.base_wheel is not None:
        choice = settings.BaseChoice(wheel=args.base_wheel, unlocked=unlocked)
    else:  # the options, else the environment of ``pip wheel .``
        given = (args.release, args.platform, args.python, args.distribution)
        choice = settings.choice_from_environment(os.environ, given, unlocked=unlocked)
    out = files.output_folder(args.out)
    base = lock.open_base(choice, lock=lock.load_lock(args.lock), cache_dir=args.cache)
    print(patch.build_patched_wheel(base, out_dir=out, overlay_path=args.overlay))


def _listing_check(args: argparse.Namespace) -> Callable[[bytes, str], Optional[str]]:
    """The check ``index`` and ``matrix`` list a wheel by: ``verify``'s verdict on its bytes
    (with ``index --overlay``, as ``verify --overlay`` gives it)."""
    official = lock.load_lock(args.lock)
    overlay = args.overlay if args.command == "index" else None

    def check(data: bytes, filename: str) -> Optional[str]:
        verification = verify.verify_bytes(
            data, filename, lock=official, cache_dir=args.cache, overlay=overlay
        )
        return None if verification.verified else f"{filename}: {verification.verdict}"

    return check


def _matrix(args: argparse.Namespace) -> None:
    files.output_folder(args.out)
    requests = matrix.requests_for(args.release, args.platform, args.python, args.distribution)
    entries = matrix.build_matrix(
        requests,
        out_dir=args.out,
        cache_dir=args.cache,
        lock=lock.load_lock(args.lock),
        overlay_path=args.overlay,
        jobs=args.jobs,
    )
    if not entries:
        raise PatchError(
            "the lock has none of the requested wheels; check --release, --platform and --python"
        )
    document = matrix.matrix_document(entries, command=args.command_line)
    text = json.dumps(document, indent=2) + "\n"
    files.write_text_atomically(args.out / "supported_matrix.json", text)
    print(matrix.summary(entries))
    label = document["local_label"]
    built = sum(bool(entry.patched_wheel) for entry in entries)
    written = f"{built} wheels and supported_matrix.json in {args.out}"
    try:  # the simple index, of a released overlay's wheels only
        if isinstance(label, str) and releases.label_parts(label)[1] is not None:
            raise PatchError(f"+{label} is a development build, which no index lists")
        if built:
            index_dir = index.write_simple_index(args.out, check=_listing_check(args))
            written = f"{built} wheels, supported_matrix.json and the simple index in {args.out} "
            written += f"({_install_line(index_dir)})"
    except PatchError as error:
        print(f"no simple index: {console.escaped(str(error))}", file=sys.stderr)
    print(written)
    if args.update_docs:
        matrix.update_docs(entries, docs_matrix=config.DOCS_MATRIX)
        docs_matrix = config.DOCS_MATRIX.relative_to(config.REPOSITORY)
        print(f"updated {docs_matrix}; refresh the README's table: {matrix.README_COMMAND}")
    failed = sum(entry.error is not None for entry in entries)
    if failed:
        raise PatchError(f"{failed} of {len(entries)} wheels failed; see the lines above")


def _install_line(index_dir: Path) -> str:
    """The pip line for the index's projects (``torch_tensorrt``, or the RTX one it holds), each
    pinned to its newest patched version: a bare name is met by the official wheel too, which
    pip then installs where the index has no wheel for the Python or platform."""
    pinned = [
        f'"{name.replace("-", "_")}=={versions[0]}"'
        for name, versions in site.read_projects(index_dir).items()
    ]
    others = f" (or {', '.join(pinned[1:])})" if pinned[1:] else ""
    line = f"pip install --extra-index-url {index_dir.resolve().as_uri()} {pinned[0]}{others}"
    return console.escaped(line)


def _index(args: argparse.Namespace) -> None:
    index_dir = index.write_simple_index(args.dir, check=_listing_check(args))
    print(f"{console.escaped(str(index_dir))}: {_install_line(index_dir)}")


def _verify(args: argparse.Namespace) -> None:
    # --base-wheel, else TORCHTRT_BASE_WHEEL (which pip's refusals advise), as for build.
    base_wheel, source = args.base_wheel, "--base-wheel"
    if base_wheel is None and os.environ.get("TORCHTRT_BASE_WHEEL"):
        base_wheel = Path(os.environ["TORCHTRT_BASE_WHEEL"]).expanduser()
        source = "TORCHTRT_BASE_WHEEL"
    verification = verify.verify_file(
        args.patched_wheel,
        lock=lock.load_lock(args.lock),
        cache_dir=args.cache,
        base_wheel=base_wheel,
        base_wheel_source=source,
        unlocked=args.unlocked or settings.unlocked_from_environment(os.environ),
        overlay=args.overlay,
    )
    print(verification.report(full_diff=args.full_diff))
    if not verification.verified:
        raise PatchError(verification.verdict)


def _provenance(args: argparse.Namespace) -> None:
    data = files.read_file(args.wheel, what="the patched wheel")
    print(provenance.format_provenance(verify.read_provenance(data, args.wheel.name)))


def _register_overlay(args: argparse.Namespace) -> None:
    # Only an overlay the build can splice is registered.
    sha256 = patch.read_overlay(args.overlay)[0].sha256
    number, added = releases.register_overlay(sha256, args.registry)
    state = "registered" if added else "already registered"
    label = releases.release_label(number)
    print(f"{args.overlay}: sha256 {sha256} {state} as overlay {number}: +{label}")


def _site(args: argparse.Namespace) -> None:
    """Build the site: the patched wheels with their index, the docs, and a landing page with the
    install lines, in one static folder. Other options go to 'matrix' (python tools/patched_wheel
    matrix --help): --release, --platform and --python build a part of the matrix; the default is
    all of it."""
    site.build_site(args.out, matrix_options=args.extras, docs=args.docs)


def _lock(args: argparse.Namespace) -> None:
    requests = matrix.requests_for(args.release, args.platform, args.python, args.distribution)
    refreshed = lock.refresh_lock(requests, path=args.lock, jobs=args.jobs)
    print(f"{args.lock}: {len(refreshed.wheels)} official wheels")


# Each command's help and the function that runs it (whose docstring, if any, describes it).
COMMANDS: Dict[str, Tuple[str, Callable[[argparse.Namespace], None]]] = {
    "build": ("build one patched wheel", _build),
    "matrix": ("build every supported release x platform x Python", _matrix),
    "lock": ("refresh the lock of the official wheels' sha256", _lock),
    "index": ("write the simple index of a folder of verified wheels", _index),
    "verify": ("rebuild a patched wheel from its released overlay and compare", _verify),
    "provenance": ("print a patched wheel's record", _provenance),
    "register-overlay": (
        "(maintainers) release the overlay: give it the registry's next number",
        _register_overlay,
    ),
    "site": ("write the wheels, their index and the docs into one folder", _site),
}


def argument_parser() -> argparse.ArgumentParser:
    """The command line's parser; the docs render its help from this same object."""
    parser = argparse.ArgumentParser(
        prog="python tools/patched_wheel",
        description="Build patched torch_tensorrt wheels from the official releases.",
        formatter_class=_HelpFormatter,
    )
    version_help = "print the label a build here gives and the default base release"
    parser.add_argument("--version", action=_VersionAction, nargs=0, help=version_help)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    sub = {}
    for name, (doc, run) in COMMANDS.items():
        sub[name] = commands.add_parser(
            name, help=doc, description=run.__doc__ or doc, formatter_class=_HelpFormatter
        )
        sub[name].set_defaults(run=run)
    release, platform = settings.canonical_release, settings.canonical_platform
    python, distribution = settings.canonical_python, settings.canonical_distribution
    serving = settings.platforms_serving(None)  # the running platform's tags, a generic one first
    here = next((tag for tag in serving if not tag.startswith("linux_")), serving[0])
    running = f"{sys.version_info[0]}.{sys.version_info[1]}"
    unchecked = "; its bytes are then checked by nothing but its own RECORD"

    def add(names: str, flag: str, text: str, **keywords: Any) -> None:
        """The option ``flag`` of each command in ``names``, with the help ``text``; the help
        lists the options in the order they are added."""
        for name in names.split():
            sub[name].add_argument(flag, help=text, **keywords)

    # build: which base, and where from.
    release_help = (
        f"base release to fetch, or '{config.INSTALLED}' for the release, platform and Python of "
        "the installed torch_tensorrt (default: TORCHTRT_BASE_VERSION, else "
        f"{config.DEFAULT_RELEASE}, the newest supported)"
    )
    add("build", "--release", release_help, type=settings.release_or_installed)
    platform_help = (
        f"platform tag, e.g. manylinux_2_28_aarch64 (default: this machine's, {here} here)"
    )
    add("build", "--platform", platform_help, type=platform)
    python_help = f"Python version, e.g. 3.12 (default: the running Python, {running} here)"
    add("build", "--python", python_help, type=python)
    distribution_help = (
        "the official distribution to patch (default: TORCHTRT_BASE_DISTRIBUTION, else "
        f"{config.DISTRIBUTIONS[0]})"
    )
    add("build", "--distribution", distribution_help, type=distribution)
    add("build", "--base-wheel", "an official wheel file (offline)", type=Path)
    unlocked_help = "build a base the lock of official wheels does not know (with a warning)"
    unlocked_help += f" instead of refusing it{unchecked}"
    add("build", "--unlocked", unlocked_help, action="store_true")
    add("build", "--out", "output folder (default: %(default)s)", type=Path, default=Path("dist"))

    # matrix and lock: the output, and each option repeated for more (default: all supported).
    out = Path("dist/matrix")
    add("matrix", "--out", "output folder (default: %(default)s)", type=Path, default=out)
    update_help = f"also rewrite {_shown(config.DOCS_MATRIX)}, which the docs' and the README's "
    update_help += "tables are made from (only when every wheel was built)"
    add("matrix", "--update-docs", update_help, action="store_true")
    for flag, kind, what, every in (
        ("--distribution", distribution, "a distribution", ", ".join(config.DISTRIBUTIONS)),
        ("--release", release, "a base release", "each distribution's supported ones"),
        ("--platform", platform, "a platform tag", ", ".join(config.PLATFORMS)),
        ("--python", python, "a Python version", ", ".join(config.PYTHONS)),
    ):
        text = f"{what}; repeat for more (default: {every})"
        add("matrix lock", flag, text, type=kind, action="append")
    add("matrix lock", "--jobs", "parallel downloads (default: %(default)s)", type=int, default=4)

    # index, verify and provenance: the wheels they read.
    add("index", "dir", "folder of wheels (writes DIR/simple)", metavar="DIR", type=Path)
    add("verify", "patched_wheel", "the wheel", metavar="PATCHED_WHEEL", type=Path)
    add("verify", "--base-wheel", "the official wheel file (default: fetch it)", type=Path)
    unlocked_help = f"compare against an official wheel the lock does not know{unchecked}"
    add("verify", "--unlocked", unlocked_help, action="store_true")
    full_diff_help = (
        f"print every difference (by default the first {verify.SHOWN_DIFFERENCES} lines)"
    )
    add("verify", "--full-diff", full_diff_help, action="store_true")
    overlay_help = (
        "check that the wheel's record names this overlay (default: the overlay of the record's "
        "revision, from git history)"
    )
    add("index verify", "--overlay", overlay_help, type=Path)
    add("provenance", "wheel", "the wheel", metavar="PATCHED_WHEEL", type=Path)

    # The repository's files, by default.
    downloads = "folder of downloaded official wheels"
    for names, flag, path, what in (
        ("register-overlay", "--overlay", config.DEFAULT_OVERLAY, "the overlay"),
        ("register-overlay", "--registry", config.OVERLAY_RELEASES_FILE, "the registry file"),
        ("build matrix lock verify index", "--lock", config.LOCK_FILE, "the lock file"),
        ("build matrix verify index", "--cache", config.DEFAULT_CACHE_DIR, downloads),
        ("build matrix", "--overlay", config.DEFAULT_OVERLAY, "the overlay"),
    ):
        add(names, flag, f"{what} (default: {_shown(path)})", type=Path, default=path)

    # site: its folder, and the docs when built apart.
    site_help = "the site's folder (must not exist, or be empty)"
    add("site", "--out", site_help, type=Path, required=True)
    docs_help = (
        "the docs already built into this folder (python -m sphinx -b html docsrc DIR), copied "
        "in instead of built here"
    )
    add("site", "--docs", docs_help, type=Path, default=None)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run a command; a :class:`PatchError` ends as one line and exit status 1."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = argument_parser()
    args, extras = parser.parse_known_args(arguments)
    if extras and args.command != "site":  # only 'site' hands the options it does not know on
        parser.error(f"unrecognized arguments: {' '.join(extras)}")
    args.extras = extras
    args.command_line = shlex.join(["python", "tools/patched_wheel", *arguments])
    if args.command in ("matrix", "lock"):
        args.distribution = args.distribution or list(config.DISTRIBUTIONS)
        args.platform = args.platform or list(config.PLATFORMS)
        args.python = args.python or list(config.PYTHONS)
    fixed = args.command == "build" and any((args.release, args.platform, args.python))
    if fixed and args.base_wheel:
        parser.error("--base-wheel fixes release, platform and Python; leave those options out")
    with console.one_line_errors(), console.signals_unwind():  # SIGTERM anywhere: one line too
        args.run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
