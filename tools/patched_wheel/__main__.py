"""Command line of the patched-wheel build: ``python tools/patched_wheel <command>``.

* ``build``: one patched wheel, from ``--base-wheel`` or a release to download (by default
  the same environment variables as ``pip wheel .``);
* ``matrix``: patched wheels for every supported release, platform and Python PyPI has;
* ``lock``: refresh the lock of the official wheels' sha256;
* ``verify``: show that a patched wheel is the official wheel plus the overlay, and no more;
* ``index``: write the PEP 503 simple index of a folder of wheels (``matrix`` writes it too).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

if __package__ in (None, ""):  # run as ``python tools/patched_wheel``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from patched_wheel import PatchError  # noqa: E402
from patched_wheel.base import (  # noqa: E402
    DEFAULT_CACHE_DIR,
    PLATFORMS,
    PYTHONS,
    SUPPORTED_RELEASES,
    BaseRequest,
    base_from_environment,
    download_base,
)
from patched_wheel.build import DEFAULT_OVERLAY, build_patched_wheel  # noqa: E402
from patched_wheel.index import write_simple_index  # noqa: E402
from patched_wheel.lock import LOCK_FILE, load_lock, refresh_lock  # noqa: E402
from patched_wheel.matrix import (  # noqa: E402
    DOCS_MATRIX,
    README,
    build_matrix,
    matrix_document,
    requests_for,
    summary,
    update_docs,
)
from patched_wheel.verify import format_report, verify_patched_wheel  # noqa: E402


def _progress(line: str) -> None:
    print(line, flush=True)


def _build(args: argparse.Namespace) -> int:
    environ: Dict[str, str] = dict(os.environ)
    if args.base_wheel:
        environ = {"TORCHTRT_BASE_WHEEL": args.base_wheel}
    elif args.version or args.platform or args.python:
        environ = {
            "TORCHTRT_BASE_VERSION": args.version or "",
            "TORCHTRT_BASE_PLATFORM": args.platform or "",
            "TORCHTRT_BASE_PYTHON": args.python or "",
        }
    base = base_from_environment(environ)
    if isinstance(base, BaseRequest):
        found = download_base(base, Path(args.cache))
        assert found is not None
        base = found
    lock = None if args.no_lock else load_lock(Path(args.lock))
    patched = build_patched_wheel(base, Path(args.overlay), dest_dir=Path(args.dest), lock=lock)
    print(patched)
    return 0


def _matrix(args: argparse.Namespace) -> int:
    out_dir = Path(args.out)
    requests = requests_for(args.release, args.platform_list, args.python_list)
    entries = build_matrix(
        requests,
        out_dir=out_dir,
        cache_dir=Path(args.cache),
        overlay=Path(args.overlay),
        lock=load_lock(Path(args.lock)),
        jobs=args.jobs,
        progress=_progress,
    )
    if not entries:
        raise PatchError(
            "PyPI has none of the requested wheels; check --release, --platform and --python"
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    document = json.dumps(matrix_document(entries), indent=2) + "\n"
    (out_dir / "supported_matrix.json").write_text(document, encoding="utf-8")
    print()
    print(summary(entries))
    print(f"wheels and supported_matrix.json in {out_dir}")
    if any(entry.patched_wheel for entry in entries):
        print(f"simple index in {write_simple_index(out_dir)}")
    if args.update_docs:
        update_docs(entries, docs_matrix=DOCS_MATRIX, readme=README)
        print(f"updated {DOCS_MATRIX.relative_to(README.parent)} and the table in README.md")
    return 1 if any(entry.error for entry in entries) else 0


def _index(args: argparse.Namespace) -> int:
    index_dir = write_simple_index(Path(args.dir))
    print(f"{index_dir}: pip install --index-url {index_dir.resolve().as_uri()} torch_tensorrt")
    return 0


def _verify(args: argparse.Namespace) -> int:
    verification = verify_patched_wheel(
        Path(args.patched_wheel),
        base_wheel=Path(args.base_wheel) if args.base_wheel else None,
        lock=load_lock(Path(args.lock)),
        overlay=Path(args.overlay),
        cache_dir=Path(args.cache),
    )
    print(format_report(verification))
    if verification.verified:
        return 0
    count = len(verification.differences)
    print(
        f"error: {verification.patched_wheel} differs from the official wheel plus this "
        f"repository's overlay in {count} {'file' if count == 1 else 'files'} (listed above); "
        "do not install it",
        file=sys.stderr,
    )
    return 1


def _lock(args: argparse.Namespace) -> int:
    requests = requests_for(args.release, args.platform_list, args.python_list)
    wheels = refresh_lock(
        requests, Path(args.cache), path=Path(args.lock), jobs=args.jobs, progress=_progress
    )
    print(f"{args.lock}: {len(wheels)} official wheels")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python tools/patched_wheel",
        description="Build patched torch_tensorrt wheels from the official releases.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    build = commands.add_parser("build", help="build one patched wheel")
    build.add_argument("--base-wheel", help="an official wheel file (offline)")
    build.add_argument("--version", help="base release to download (default 2.14.0)")
    build.add_argument("--platform", help="platform tag, e.g. manylinux_2_28_aarch64")
    build.add_argument("--python", help="Python version, e.g. 3.12")
    build.add_argument("--dest", default="dist", help="output folder (default: dist)")
    build.add_argument("--no-lock", action="store_true", help="skip the sha256 lock check")
    build.set_defaults(run=_build)

    matrix = commands.add_parser("matrix", help="build every supported release x platform x Python")
    matrix.add_argument("--out", default="dist/matrix", help="output folder (default: dist/matrix)")
    matrix.add_argument(
        "--update-docs",
        action="store_true",
        help="also rewrite docsrc/_data/supported_matrix.json and the README's table",
    )
    matrix.set_defaults(run=_matrix)

    index = commands.add_parser("index", help="write the simple index of a folder of wheels")
    index.add_argument("dir", metavar="DIR", help="folder of patched wheels (writes DIR/simple)")
    index.set_defaults(run=_index)

    verify = commands.add_parser(
        "verify", help="show that a patched wheel is the official one plus the overlay"
    )
    verify.add_argument("patched_wheel", metavar="PATCHED_WHEEL", help="the wheel to check")
    verify.add_argument("--base-wheel", help="the official wheel (default: download it)")
    verify.set_defaults(run=_verify)

    lock = commands.add_parser("lock", help="refresh the lock of the official wheels' sha256")
    lock.set_defaults(run=_lock)

    for command in (build, matrix, lock, verify):
        command.add_argument("--cache", default=str(DEFAULT_CACHE_DIR), help="base wheel cache")
        command.add_argument("--lock", default=str(LOCK_FILE), help="the lock file")
    for command in (build, matrix, verify):
        command.add_argument("--overlay", default=str(DEFAULT_OVERLAY), help="the overlay")
    for command in (matrix, lock):
        command.add_argument(
            "--release", action="append", help="a base release (repeatable; default: supported)"
        )
        command.add_argument("--platform", dest="platform_list", action="append")
        command.add_argument("--python", dest="python_list", action="append")
        command.add_argument("--jobs", type=int, default=4, help="parallel downloads")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run a command; a :class:`PatchError` is printed and gives exit status 1."""
    args = _parser().parse_args(argv)
    defaults: Dict[str, Sequence[str]] = {
        "release": SUPPORTED_RELEASES,
        "platform_list": PLATFORMS,
        "python_list": PYTHONS,
    }
    for name, default in defaults.items():
        if hasattr(args, name) and not getattr(args, name):
            setattr(args, name, list(default))
    try:
        status: int = args.run(args)
    except PatchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
