"""Command line of the patched-wheel build: ``python tools/patched_wheel <command>``.

* ``build``: one patched wheel, from ``--base-wheel`` or a release to fetch (without any base
  option, from the same environment variables as ``pip wheel .``);
* ``matrix``: patched wheels for every supported release, platform and Python the index has;
* ``lock``: refresh the lock of the official wheels' sha256 from the index;
* ``verify``: show that a patched wheel is the official wheel plus the overlay, and no more;
* ``index``: write the PEP 503 simple index of a folder of wheels (``matrix`` writes it too);
* ``provenance``: print the provenance record inside a patched wheel;
* ``register-overlay``: release the overlay as it is now: give it the next number of the
  registry of overlays, so that the wheels built from it carry the label ``memfix1.<N>``.

Arguments are checked where they enter (argparse types, exit status 2); a refused base or
setting is one :class:`~patched_wheel.PatchError`, printed as ``error: ...`` with exit status 1.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Callable, List, Optional, Sequence

if __package__ in (None, ""):  # run as ``python tools/patched_wheel``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if importlib.util.find_spec("packaging") is None:  # the one package the tool needs
    sys.exit(
        "error: the build tool needs the 'packaging' package, which this Python lacks; "
        f"install it with: {Path(sys.executable).name} -m pip install 'packaging>=24'"
    )

from patched_wheel import PatchError  # noqa: E402
from patched_wheel.choice import (  # noqa: E402
    INSTALLED,
    BaseChoice,
    canonical_platform,
    choice_from_environment,
    release_or_installed,
    request_choice,
    unlocked_from_environment,
)
from patched_wheel.console import configure_logging, escaped, logging_configured  # noqa: E402
from patched_wheel.files import Interrupted, write_text_atomically  # noqa: E402
from patched_wheel.index import write_simple_index  # noqa: E402
from patched_wheel.labels import (  # noqa: E402
    register_overlay,
    release_label,
)
from patched_wheel.lock import load_lock  # noqa: E402
from patched_wheel.make import make_patched_wheel  # noqa: E402
from patched_wheel.matrix import (  # noqa: E402
    build_matrix,
    matrix_document,
    requests_for,
    summary,
    update_docs,
)
from patched_wheel.origin import read_patched_record  # noqa: E402
from patched_wheel.overlay import read_overlay  # noqa: E402
from patched_wheel.paths import (  # noqa: E402
    DEFAULT_CACHE_DIR,
    DEFAULT_OVERLAY,
    DOCS_MATRIX,
    LOCK_FILE,
    OVERLAY_RELEASES_FILE,
    README,
)
from patched_wheel.policy import (  # noqa: E402
    DEFAULT_RELEASE,
    PLATFORMS,
    PYTHONS,
    SUPPORTED_RELEASES,
    canonical_python,
    canonical_release,
)
from patched_wheel.provenance_record import format_record  # noqa: E402
from patched_wheel.refresh import refresh_lock  # noqa: E402
from patched_wheel.verify import (  # noqa: E402
    SHOWN_DIFF_LINES,
    SHOWN_DIFFERENCES,
    format_report,
    listing_refusal,
    verdict,
    verify_patched_wheel,
)
from patched_wheel.wheelfile import read_wheel, read_wheel_file  # noqa: E402

logger = logging.getLogger("patched_wheel")


def _argument_type(check: Callable[[str], str], name: str) -> Callable[[str], str]:
    """An argparse ``type=`` that reports ``check``'s own message."""

    def convert(value: str) -> str:
        try:
            return check(value)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = name
    return convert


RELEASE_OR_INSTALLED = _argument_type(release_or_installed, "release")
RELEASE = _argument_type(canonical_release, "release")
PLATFORM = _argument_type(canonical_platform, "platform")
PYTHON = _argument_type(canonical_python, "python")


def _build_choice(args: argparse.Namespace) -> BaseChoice:
    """The base the options ask for; without any base option, the environment's."""
    unlocked = args.unlocked or unlocked_from_environment(os.environ)
    if args.base_wheel is not None:
        return BaseChoice(wheel=args.base_wheel, wheel_source="--base-wheel", unlocked=unlocked)
    if args.release or args.platform or args.python:
        names = "--release installed with --platform or --python"
        return request_choice(args.release, args.platform, args.python, unlocked, names=names)
    choice = choice_from_environment(os.environ)
    return BaseChoice(
        choice.request, choice.wheel, choice.wheel_source, choice.unlocked or unlocked
    )


def _build(args: argparse.Namespace) -> int:
    patched = make_patched_wheel(
        _build_choice(args),
        out_dir=args.out,
        lock=load_lock(args.lock),
        cache_dir=args.cache,
        overlay=read_overlay(args.overlay),
    )
    print(patched)
    return 0


def _matrix(args: argparse.Namespace) -> int:
    requests = requests_for(args.release, args.platform, args.python)
    overlay = read_overlay(args.overlay)
    entries = build_matrix(
        requests,
        out_dir=args.out,
        cache_dir=args.cache,
        overlay=overlay,
        lock=load_lock(args.lock),
        jobs=args.jobs,
    )
    if not entries:
        raise PatchError(
            "the index has none of the requested wheels; check --release, "
            "--platform and --python"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    document = json.dumps(matrix_document(entries), indent=2) + "\n"
    write_text_atomically(args.out / "supported_matrix.json", document)
    print(summary(entries))
    print(f"wheels and supported_matrix.json in {args.out}")
    if any(entry.patched_wheel for entry in entries):
        check = functools.partial(
            listing_refusal, lock=load_lock(args.lock), overlay=overlay, cache_dir=args.cache
        )
        index_dir = write_simple_index(args.out, check=check)
        print(f"simple index in {index_dir}")
    if args.update_docs:
        update_docs(entries, docs_matrix=DOCS_MATRIX, readme=README)
        print(f"updated {DOCS_MATRIX.relative_to(README.parent)} and the table in README.md")
    failed = sum(entry.error is not None for entry in entries)
    if failed:
        raise PatchError(f"{failed} of {len(entries)} wheels failed; see the lines above")
    return 0


def _index(args: argparse.Namespace) -> int:
    check = functools.partial(
        listing_refusal,
        lock=load_lock(args.lock),
        overlay=None if args.overlay is None else read_overlay(args.overlay),
        cache_dir=args.cache,
    )
    index_dir = write_simple_index(args.dir, check=check)
    print(
        f"{index_dir}: pip install --extra-index-url {index_dir.resolve().as_uri()} torch_tensorrt"
    )
    return 0


def _provenance(args: argparse.Namespace) -> int:
    path: Path = args.wheel
    if not path.is_file():
        raise PatchError(f"{str(path)!r} is not a file; give the patched wheel's path")
    wheel = read_wheel(read_wheel_file(path, what="the patched wheel"), path.name)
    print(format_record(read_patched_record(wheel.members, path.name)))
    return 0


def _register_overlay(args: argparse.Namespace) -> int:
    sha256 = read_overlay(args.overlay).sha256  # an overlay the build can splice, or refused
    number, added = register_overlay(sha256, args.registry)
    state = "registered" if added else "already registered"
    print(f"{args.overlay}: sha256 {sha256} {state} as overlay {number}: +{release_label(number)}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    verification = verify_patched_wheel(
        args.patched_wheel,
        base_wheel=args.base_wheel,
        lock=load_lock(args.lock),
        overlay=None if args.overlay is None else read_overlay(args.overlay),
        cache_dir=args.cache,
        unlocked=args.unlocked or unlocked_from_environment(os.environ),
    )
    print(format_report(verification, full_diff=args.full_diff))
    if verification.verified:
        return 0
    raise PatchError(verdict(verification))


def _lock(args: argparse.Namespace) -> int:
    requests = requests_for(args.release, args.platform, args.python)
    lock = refresh_lock(requests, path=args.lock, jobs=args.jobs)
    print(f"{args.lock}: {len(lock.wheels)} official wheels")
    return 0


def _add_base_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--release",
        type=RELEASE_OR_INSTALLED,
        help=f"base release to fetch, or '{INSTALLED}' for the release, platform and Python "
        f"of the installed torch_tensorrt (default: {DEFAULT_RELEASE}, the newest supported)",
    )
    command.add_argument(
        "--platform", type=PLATFORM, help="platform tag, e.g. manylinux_2_28_aarch64"
    )
    command.add_argument("--python", type=PYTHON, help="Python version, e.g. 3.12")
    command.add_argument("--base-wheel", type=Path, help="an official wheel file (offline)")
    command.add_argument(
        "--unlocked",
        action="store_true",
        help="build a base the lock of official wheels does not know (with a warning) instead "
        "of refusing it; its bytes are then checked by nothing but its own RECORD",
    )
    command.add_argument(
        "--out", type=Path, default=Path("dist"), help="output folder (default: %(default)s)"
    )


def _add_matrix_options(command: argparse.ArgumentParser) -> None:
    supported = ", ".join(SUPPORTED_RELEASES)
    command.add_argument(
        "--release",
        type=RELEASE,
        action="append",
        help=f"a base release; repeat for more (default: all supported, {supported})",
    )
    command.add_argument(
        "--platform",
        type=PLATFORM,
        action="append",
        help=f"a platform tag; repeat for more (default: {', '.join(PLATFORMS)})",
    )
    command.add_argument(
        "--python",
        type=PYTHON,
        action="append",
        help=f"a Python version; repeat for more (default: {', '.join(PYTHONS)})",
    )
    command.add_argument(
        "--jobs", type=int, default=4, help="parallel downloads (default: %(default)s)"
    )


def _add_verify_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("patched_wheel", metavar="PATCHED_WHEEL", type=Path, help="the wheel")
    command.add_argument(
        "--base-wheel", type=Path, help="the official wheel file (default: fetch it)"
    )
    command.add_argument(
        "--unlocked",
        action="store_true",
        help="compare against an official wheel the lock does not know; its bytes are then "
        "checked by nothing but its own RECORD",
    )
    command.add_argument(
        "--full-diff",
        action="store_true",
        help="print the whole diff and every difference (by default the first "
        f"{SHOWN_DIFF_LINES} lines of the diff and the first {SHOWN_DIFFERENCES} differences)",
    )
    _add_recorded_overlay_option(command)
    command.set_defaults(run=_verify)


def _add_recorded_overlay_option(command: argparse.ArgumentParser) -> None:
    """``--overlay`` of the commands that check wheels: by default the one each record names."""
    command.add_argument(
        "--overlay",
        type=Path,
        help="the overlay the wheel's record names (default: found in this repository's "
        "working tree or git history by its sha256)",
    )


def _add_provenance_commands(
    commands: "argparse._SubParsersAction[argparse.ArgumentParser]",
) -> None:
    provenance = commands.add_parser("provenance", help="print a patched wheel's record")
    provenance.add_argument("wheel", metavar="PATCHED_WHEEL", type=Path, help="the wheel")
    provenance.set_defaults(run=_provenance)
    register = commands.add_parser(
        "register-overlay", help="release the overlay: give it the registry's next number"
    )
    register.add_argument("--overlay", type=Path, default=DEFAULT_OVERLAY, help="the overlay")
    register.add_argument(
        "--registry", type=Path, default=OVERLAY_RELEASES_FILE, help="the registry file"
    )
    register.set_defaults(run=_register_overlay)


def _add_file_options(
    command: argparse.ArgumentParser, *, with_cache: bool, with_overlay: bool
) -> None:
    """``--lock``; ``--cache`` for the commands that read bases; ``--overlay`` for those that
    build (``verify`` has its own: by default the overlay the wheel's record names)."""
    command.add_argument(
        "--lock", type=Path, default=LOCK_FILE, help="the lock file (default: %(default)s)"
    )
    if with_cache:
        command.add_argument(
            "--cache",
            type=Path,
            default=DEFAULT_CACHE_DIR,
            help="folder of downloaded official wheels (default: %(default)s)",
        )
    if with_overlay:
        command.add_argument(
            "--overlay",
            type=Path,
            default=DEFAULT_OVERLAY,
            help="the overlay (default: %(default)s)",
        )


def argument_parser() -> argparse.ArgumentParser:
    """The command line's parser; the docs render its help from this same object."""
    parser = argparse.ArgumentParser(
        prog="python tools/patched_wheel",
        description="Build patched torch_tensorrt wheels from the official releases.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build one patched wheel")
    _add_base_options(build)
    build.set_defaults(run=_build)
    matrix = commands.add_parser("matrix", help="build every supported release x platform x Python")
    matrix.add_argument(
        "--out", type=Path, default=Path("dist/matrix"), help="output folder (default: %(default)s)"
    )
    matrix.add_argument(
        "--update-docs",
        action="store_true",
        help="also rewrite docsrc/_data/supported_matrix.json and the README's table (only "
        "when every wheel was built)",
    )
    matrix.set_defaults(run=_matrix)
    lock = commands.add_parser("lock", help="refresh the lock of the official wheels' sha256")
    lock.set_defaults(run=_lock)
    for command in (matrix, lock):
        _add_matrix_options(command)
    index = commands.add_parser("index", help="write the simple index of a folder of wheels")
    index.add_argument("dir", metavar="DIR", type=Path, help="folder of wheels (writes DIR/simple)")
    index.set_defaults(run=_index)
    verify = commands.add_parser(
        "verify", help="show that a patched wheel is the official one plus the overlay"
    )
    _add_verify_options(verify)
    _add_provenance_commands(commands)
    _add_recorded_overlay_option(index)
    for command in (build, matrix, lock, verify, index):
        _add_file_options(
            command, with_cache=command is not lock, with_overlay=command in (build, matrix)
        )
    return parser


def _with_defaults(args: argparse.Namespace) -> argparse.Namespace:
    if args.command in ("matrix", "lock"):
        args.release = args.release or list(SUPPORTED_RELEASES)
        args.platform = args.platform or list(PLATFORMS)
        args.python = args.python or list(PYTHONS)
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run a command; a :class:`PatchError` is printed and gives exit status 1."""
    parser = argument_parser()
    args = _with_defaults(parser.parse_args(argv))
    if (
        args.command == "build"
        and args.base_wheel
        and (args.release or args.platform or args.python)
    ):
        parser.error("--base-wheel fixes release, platform and Python; leave those options out")
    with logging_configured():
        try:
            status: int = args.run(args)
        except PatchError as error:
            print(f"error: {escaped(str(error))}", file=sys.stderr)
            return 1
        except KeyboardInterrupt as error:  # Ctrl-C anywhere; SIGTERM while writing
            interrupted = error if isinstance(error, Interrupted) else Interrupted(signal.SIGINT)
            print(f"error: {interrupted.describe()}", file=sys.stderr)
            return interrupted.exit_status
    return status


__all__: List[str] = ["argument_parser", "configure_logging", "main"]

if __name__ == "__main__":
    sys.exit(main())
