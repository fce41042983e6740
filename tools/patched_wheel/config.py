"""Settings and places: what the build supports, what the user asks for, where files live.

Every statement of support (help, docs, errors) derives from the constants here. The environment
of ``pip wheel .``, checked as the CLI's options are: ``TORCHTRT_BASE_WHEEL`` (a wheel file), else
``TORCHTRT_BASE_VERSION`` (a release or ``installed``), ``_PLATFORM``, ``_PYTHON`` and
``_DISTRIBUTION``; ``TORCHTRT_BASE_UNLOCKED=1`` builds a base the lock does not know. Any other
``TORCHTRT_BASE_*`` (in any case, on POSIX) or a near miss is refused with the name it probably
meant: a misspelt variable would quietly patch another release.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import logging
import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Callable, Dict, FrozenSet, Iterator, List, Mapping, Optional, Sequence, Tuple

from packaging import tags
from packaging.version import InvalidVersion, Version

from . import PatchError as PatchError  # re-exported: the class one_line_errors catches

logger = logging.getLogger("patched_wheel")

# --- Places -----------------------------------------------------------------------------------
REPOSITORY = Path(__file__).resolve().parents[2]
OVERLAY_PATH = "py/torch_tensorrt/dynamo/utils.py"  # as git names it
DEFAULT_OVERLAY = REPOSITORY.joinpath(*OVERLAY_PATH.split("/"))
TOOL_PATH = "tools/patched_wheel"
OVERLAY_RELEASES_FILE = Path(__file__).resolve().with_name("overlay_releases.json")
LOCK_FILE = Path(__file__).resolve().with_name("official_wheels.lock.json")
# Official wheels downloaded once; only ever looked up by their exact official file name.
DEFAULT_CACHE_DIR = REPOSITORY / ".cache" / "base-wheels"
DOCS_MATRIX = REPOSITORY / "docsrc" / "_data" / "supported_matrix.json"
README = REPOSITORY / "README.md"

# --- What the build supports ------------------------------------------------------------------
# The distributions whose wheels install torch_tensorrt/; the first is the default.
DISTRIBUTIONS = ("torch-tensorrt", "torch-tensorrt-rtx")
PROJECT = DISTRIBUTIONS[0]
# Releases the lock holds wheels of and where at least one fix applies, per distribution
# (2.8 and 2.9: no host-trim hook there; their prepare_inputs is 2.10's, which copies).
SUPPORTED_RELEASES = ("2.8.0", "2.9.0", "2.10.0", "2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
RTX_RELEASES = ("2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0")
RELEASES = {PROJECT: SUPPORTED_RELEASES, DISTRIBUTIONS[1]: RTX_RELEASES}
DEFAULT_RELEASE = SUPPORTED_RELEASES[-1]
# The fixes the overlay may carry (patch.FIXES says what each is and where it applies).
FIX_NAMES = ("offload", "host-trim", "input-copy", "engine-bytes")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_28_aarch64", "win_amd64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13", "3.14")
# The module of the base that the overlay is spliced into, and the other module a fix reaches.
TARGET = "torch_tensorrt/dynamo/utils.py"
CONVERSION_TARGET = "torch_tensorrt/dynamo/conversion/_conversion.py"
# The first segment of every patched wheel's local label (see releases.py for the rest).
LABEL_NAME = "memfix1"
UNLOCKED_OPT_IN = "set TORCHTRT_BASE_UNLOCKED=1 (or pass build --unlocked)"
INSTALLED = "installed"
# The largest wheel the tool reads (the official ones are 4-5 MB): what a hostile file costs.
MiB = 1 << 20
MAX_WHEEL_BYTES = 1 << 30
InvalidValue = argparse.ArgumentTypeError  # a check's refusal, which argparse prints as it is


def supported_releases_text(distribution: str = PROJECT) -> str:
    return ", ".join(RELEASES.get(distribution, SUPPORTED_RELEASES))


def canonical_release(value: str) -> str:
    """``value`` if it is a canonical release such as ``2.14.0`` (or ``2.9.0+cu128``)."""
    version = Version("0")  # not a version: refused below, as one not of three numbers
    with contextlib.suppress(InvalidVersion):
        version = Version(value.strip())
    plain = not (version.epoch or version.pre or version.post or version.dev)
    if plain and len(version.release) == 3:
        if str(version) == value:
            return value
        raise InvalidValue(f"{value!r} is not a canonical release; write {str(version)!r}")
    raise InvalidValue(
        f"{value!r} is not a release such as {DEFAULT_RELEASE!r}; supported base releases "
        f"are {supported_releases_text()}"
    )


def release_or_installed(value: str) -> str:
    """A canonical release, or ``installed`` (``Installed``, ``INSTALLED ``: suggested)."""
    if value == INSTALLED:
        return value
    if value.strip().lower() == INSTALLED:
        raise InvalidValue(f"{value!r} is not a release; write {INSTALLED!r} for the installed one")
    return canonical_release(value)


def canonical_python(value: str) -> str:
    """``value`` if it is a Python version written ``3.N``."""
    if not re.fullmatch(r"3\.(0|[1-9][0-9]?)", value):
        raise InvalidValue(f"{value!r} is not a Python version such as '3.12'; give major.minor")
    return value


def canonical_platform(value: str) -> str:
    """``value`` if it looks like a platform tag (``manylinux_2_28_x86_64``, ``win_amd64``)."""
    if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)*", value):
        raise InvalidValue(
            f"{value!r} is not a platform tag such as 'manylinux_2_28_x86_64' or 'win_amd64'"
        )
    return value


def canonical_distribution(value: str) -> str:
    """The distribution ``value`` names (``torch_tensorrt_rtx`` is ``torch-tensorrt-rtx``)."""
    name = re.sub(r"[-_.]+", "-", value.strip()).lower()
    if name not in DISTRIBUTIONS:
        raise InvalidValue(f"{value!r} is not one of the distributions {', '.join(DISTRIBUTIONS)}")
    return name


@dataclass(frozen=True)
class BaseRequest:
    """An official wheel to fetch: a release, a platform and Python (``None``: running)."""

    release: str
    platform: Optional[str] = None
    python: Optional[str] = None
    distribution: str = PROJECT

    def describe(self) -> str:
        python = f"Python {self.python}" if self.python else "this Python"
        platform = self.platform or "this platform"
        return f"{self.distribution}=={self.release} for {python} on {platform}"

    def acceptable_tags(self) -> FrozenSet[tags.Tag]:
        """The tags a wheel may carry to serve this request (older manylinux included)."""
        version = sys.version_info[:2] if self.python is None else python_key(self.python)
        return frozenset(tags.cpython_tags(version, platforms=platforms_serving(self.platform)))


@dataclass(frozen=True)
class BaseChoice:
    """A wheel file (``wheel``, named in messages by ``wheel_source``), or a release to fetch."""

    request: BaseRequest = field(default_factory=lambda: BaseRequest(DEFAULT_RELEASE))
    wheel: Optional[Path] = None
    wheel_source: str = "--base-wheel"
    unlocked: bool = False


def platforms_serving(platform: Optional[str]) -> List[str]:
    """Platform tags a wheel may carry to serve ``platform`` (``None``: the running one)."""
    if platform is None:
        return list(tags.platform_tags())
    parts = platform.split("_")
    if platform.startswith("manylinux_") and len(parts) >= 4 and parts[2].isdigit():
        major, minor, arch = parts[1], int(parts[2]), "_".join(parts[3:])
        return [f"manylinux_{major}_{m}_{arch}" for m in range(minor, -1, -1)]
    return [platform]


# --- Settings from the environment and the command line ---------------------------------------
# Variable -> check; TORCHTRT_BASE_WHEEL and TORCHTRT_BASE_UNLOCKED are read apart.
REQUEST_VARIABLES: Mapping[str, Callable[[str], str]] = {
    "TORCHTRT_BASE_VERSION": release_or_installed,
    "TORCHTRT_BASE_PLATFORM": canonical_platform,
    "TORCHTRT_BASE_PYTHON": canonical_python,
    "TORCHTRT_BASE_DISTRIBUTION": canonical_distribution,
}
VARIABLES = ("TORCHTRT_BASE_WHEEL", *REQUEST_VARIABLES, "TORCHTRT_BASE_UNLOCKED")
# Names a user may guess from the CLI's options, and the variable each means.
ALIASES = {"TORCHTRT_BASE_RELEASE": "TORCHTRT_BASE_VERSION (the CLI's --release)"}


def unlocked_from_environment(environ: Mapping[str, str]) -> bool:
    """``TORCHTRT_BASE_UNLOCKED=1``; a misspelt ``TORCHTRT_BASE_*`` variable is refused here."""
    for name in sorted(environ):
        upper = name if os.name == "nt" else name.upper()  # Windows: names are case-insensitive
        near = difflib.get_close_matches(upper, VARIABLES, n=1, cutoff=0.85)
        if name not in VARIABLES and (upper.startswith("TORCHTRT_BASE_") or near):
            near = near or difflib.get_close_matches(upper, VARIABLES, n=1, cutoff=0.0)
            guess = ALIASES.get(upper, near[0])
            unread = "is not read: environment variables are case-sensitive"
            why = unread if upper != name else "is not a variable of the build"
            raise PatchError(f"{name} {why}; did you mean {guess}? Rename or unset it")
    value = environ.get("TORCHTRT_BASE_UNLOCKED", "")
    if value not in ("", "0", "1"):
        raise PatchError(f"TORCHTRT_BASE_UNLOCKED={value!r} is not 0 or 1; set 1 to opt in")
    return value == "1"


def choice_from_environment(
    environ: Mapping[str, str], given: Sequence[Optional[str]] = (), *, unlocked: bool = False
) -> BaseChoice:
    """The base that ``build``'s options ask for (``given``: release or ``installed``, platform,
    Python, distribution), else the environment (see the module docstring); or a refusal."""
    names = "--release installed with --platform or --python"
    if not any(given):
        unlocked = unlocked_from_environment(environ) or unlocked
        values: Dict[str, Optional[str]] = {}
        for name, check in REQUEST_VARIABLES.items():
            try:
                values[name] = check(environ[name]) if environ.get(name) else None
            except InvalidValue as error:
                raise PatchError(f"{name}={error}") from None
        if environ.get("TORCHTRT_BASE_WHEEL"):
            others = [name for name, value in values.items() if value]
            if others:
                raise PatchError(
                    f"TORCHTRT_BASE_WHEEL is set together with {', '.join(others)}; the wheel's "
                    "name already fixes release, platform and Python, so unset the others"
                )
            path = Path(environ["TORCHTRT_BASE_WHEEL"]).expanduser()
            return BaseChoice(wheel=path, wheel_source="TORCHTRT_BASE_WHEEL", unlocked=unlocked)
        given = list(values.values())
        names = "TORCHTRT_BASE_VERSION=installed with TORCHTRT_BASE_PLATFORM or _PYTHON"
    release, platform, python, distribution = given
    if release == INSTALLED and (platform or python):
        raise PatchError(
            f"{names}: 'installed' takes the platform and Python of the installed "
            "torch_tensorrt; leave the platform and Python out"
        )
    request = BaseRequest(release or DEFAULT_RELEASE, platform, python, distribution or PROJECT)
    return BaseChoice(request=request, unlocked=unlocked)


# --- Talking to a person ----------------------------------------------------------------------
def escaped(text: str) -> str:
    """``text`` with every character a terminal would act on written as a Python escape."""
    return "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in text)


class _Formatter(logging.Formatter):
    """Progress as plain lines, warnings as ``warning: ...``; every line escaped."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = f"{record.levelname.lower()}: " if record.levelno >= logging.WARNING else ""
        return prefix + escaped(super().format(record))


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """The tool's log lines on stderr for one command; a refusal ends as one ``error: ...`` line
    and exit status 1, an interruption (Ctrl-C, or SIGTERM) as one line and 128 + signal."""
    saved = (list(logger.handlers), logger.level, logger.propagate)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter("%(message)s"))
    logger.handlers[:], logger.level, logger.propagate = [handler], logging.INFO, False
    try:
        yield
    except PatchError as error:
        raise SystemExit(f"error: {escaped(str(error))}") from None
    except KeyboardInterrupt as error:  # Ctrl-C, or one that signals_unwind raises
        signum = signal.Signals(int(error.args[0]) if error.args else signal.SIGINT)
        print(f"error: interrupted by {signum.name}; nothing half-written is left", file=sys.stderr)
        raise SystemExit(128 + signum) from None
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved


# --- Files: read once within a cap, written whole ---------------------------------------------
def _raise_interrupted(signum: int, frame: Optional[FrameType]) -> None:
    raise KeyboardInterrupt(signum)  # unwinds like Ctrl-C: ``finally`` clauses remove temporaries


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt(signal number)`` inside the block."""
    main_thread = threading.current_thread() is threading.main_thread()  # the only one for signals
    signals = (signal.SIGINT, signal.SIGTERM) if main_thread else ()
    previous = {signum: signal.signal(signum, _raise_interrupted) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def write_atomically(path: Path, data: bytes, *, mode: int = 0o644) -> None:
    """Write through a temporary file in the folder, then rename: the old file or the new one;
    a folder that cannot take it (a file of that name, a folder at ``path``) is one line."""
    with signals_unwind():
        temporary = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(data)
            os.chmod(temporary, mode)
            os.replace(temporary, path)
        except OSError as error:
            raise PatchError(
                f"cannot write {str(path)!r} ({error.strerror or error}); give an output "
                "folder that is a folder you can write, with no folder in the file's place"
            ) from None
        finally:
            if temporary:
                Path(temporary).unlink(missing_ok=True)


def output_folder(path: Path, option: str = "--out") -> Path:
    """``path`` if it is a folder or absent (made on the first write); one line otherwise."""
    if path.exists() and not path.is_dir():
        raise PatchError(f"{option} {str(path)!r} is a file, not a folder; give a folder")
    return path


def write_text_atomically(path: Path, text: str) -> None:
    """:func:`write_atomically` for text, UTF-8 with ``\\n`` line ends on every platform."""
    write_atomically(path, text.encode("utf-8"))


def read_regular_file(path: Path, cap: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap + 1`` of them; opened without
    blocking (a FIFO would wait for a writer forever) and checked through the descriptor, so a
    FIFO, a device or a symlink to one is an ``OSError``, never a read."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    descriptor = os.open(path, flags)
    with open(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise IsADirectoryError(errno.EINVAL, "not a regular file")
        return stream.read(cap + 1)


def read_file(path: Path, *, what: str, cap: int = MAX_WHEEL_BYTES) -> bytes:
    """:func:`read_regular_file`, refused in one line beyond ``cap`` or where it fails."""
    try:
        data = read_regular_file(path, cap)
    except OSError as error:
        raise PatchError(
            f"{what} {str(path)!r} cannot be read ({error.strerror or error}); give the path "
            "of a wheel file"
        ) from None
    if len(data) > cap:
        raise PatchError(f"{what} {str(path)!r} is larger than {cap // MiB} MiB; give a wheel")
    return data


def git_environment() -> Dict[str, str]:
    """The environment git runs in: none of the caller's ``GIT_*`` variables (``GIT_DIR``,
    ``GIT_OBJECT_DIRECTORY``, ``GIT_CONFIG_*`` ... would point git at other objects or
    settings), replace refs off, no graft file: git answers for the clone's own objects."""
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith("GIT_")}
    environ.update(GIT_NO_REPLACE_OBJECTS="1", GIT_GRAFT_FILE=os.devnull, LC_ALL="C")
    return environ


def git_bytes(repository: Path, *args: str) -> Optional[bytes]:
    """git's output in ``repository`` as its own objects say (see :func:`git_environment`),
    ``None`` on any failure but git refusing the folder, which is a PatchError (callers put
    values from a record after ``--end-of-options``)."""
    command = ["git", "--no-replace-objects", "-C", str(repository), *args]
    try:
        done = subprocess.run(command, capture_output=True, env=git_environment(), timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if b"safe.directory" in done.stderr:
        raise PatchError(
            f"git refuses to read {str(repository)!r}: the folder belongs to another user "
            "(git's safe.directory); run as its owner, or trust it with: git config --global "
            f"--add safe.directory {shlex.quote(str(repository))}"
        )
    return done.stdout if done.returncode == 0 else None


def git_text(repository: Path, *args: str) -> Optional[str]:
    output = git_bytes(repository, *args)
    return None if output is None else output.decode("utf-8", "replace")


def python_key(python: str) -> Tuple[int, ...]:
    return tuple(int(part) for part in python.split("."))
