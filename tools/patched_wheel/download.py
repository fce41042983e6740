"""The network: the index's list of files, exact-file downloads, and pip for unlocked bases.

The index is the one pip uses (:func:`index_url`: ``PIP_INDEX_URL``, else pip's own
configuration, else PyPI). Its list of ``torch-tensorrt`` files, with their URLs and sha256,
comes from the index itself, as PEP 691 JSON or a PEP 503 HTML page (``file://`` folders
included). A wheel the lock knows is fetched by its exact file name from that list and must
have the lock's sha256: never by a version, which an index offering ``2.14.0+cu999`` beside
``2.14.0`` would win. Only a base the lock does not know (the user's opt-in) goes through
``pip download ==<release>``, so that pip's choice of a CUDA variant applies to it.

The certificate authorities are those of pip's ``cert`` setting where it names a file, else
the system's. An index URL may carry a user name and password
(``https://user:token@host/simple``), as pip allows: they are sent as an HTTP basic
``Authorization`` header to that host only, and never shown (:func:`shown_url`). Two failures are kept apart: :class:`IndexUnreachable` (the network
or the index failed; nothing is known) and :class:`NoSuchWheel` (the index answered, and has
no such wheel).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import logging
import os
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from patched_wheel import PatchError
from patched_wheel.policy import PROJECT
from patched_wheel.request import BaseRequest
from patched_wheel.wheelfile import MAX_WHEEL_BYTES, is_wheel_filename, read_wheel_file

__all__ = [
    "DEFAULT_INDEX",
    "IndexFile",
    "IndexUnreachable",
    "NoSuchWheel",
    "fetch_locked",
    "index_files",
    "index_url",
    "pip_download",
    "shown_url",
]

logger = logging.getLogger(__name__)

DEFAULT_INDEX = "https://pypi.org/simple"

# How long one request to the index may take before it counts as unreachable.
INDEX_TIMEOUT_S = 60

# What the build asks the index for: the JSON list (PEP 691), else the HTML page (PEP 503).
_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"

# Words of pip's output that mean the network failed, not that the index lacks the file.
_NETWORK_WORDS = (
    "Retrying (",
    "NewConnectionError",
    "Could not fetch URL",
    "ConnectTimeout",
    "ReadTimeout",
    "ProxyError",
    "SSLError",
    "Name or service not known",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "Connection refused",
)

# Keys of ``pip config list`` naming the index ``pip download`` uses, and the certificate
# authorities pip trusts, strongest first.
_INDEX_KEYS = (":env:.index-url", "download.index-url", "global.index-url")
_CERT_KEYS = (":env:.cert", "download.cert", "global.cert")


class IndexUnreachable(PatchError):
    """The package index could not be reached: nothing is known about the wheel."""


class NoSuchWheel(PatchError):
    """The package index answered, and has no wheel for the request."""


@dataclass(frozen=True)
class IndexFile:
    """One file the index lists: its name, its absolute URL, its sha256 where listed."""

    filename: str
    url: str
    sha256: Optional[str]


@functools.lru_cache(maxsize=8)
def _pip_config_for(pip_environment: Tuple[Tuple[str, str], ...]) -> Tuple[Tuple[str, str], ...]:
    """``pip config list`` as (key, value) pairs, for one set of ``PIP_*`` variables."""
    command = [sys.executable, "-m", "pip", "config", "list"]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ()
    pairs = (line.partition("=") for line in completed.stdout.splitlines())
    return tuple((key.strip(), value.strip().strip("'\"")) for key, _, value in pairs)


def _pip_setting(keys: Tuple[str, ...]) -> Optional[str]:
    """The first of ``keys`` that pip's configuration (files and ``PIP_*``) sets, asked of pip
    itself once per set of ``PIP_*`` variables."""
    pip_environment = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("PIP_")))
    found = dict(_pip_config_for(pip_environment))
    return next((found[key] for key in keys if found.get(key)), None)


def index_url() -> str:
    """The index pip uses: ``PIP_INDEX_URL``, else pip's configuration, else PyPI."""
    return os.environ.get("PIP_INDEX_URL", "").strip() or _pip_setting(_INDEX_KEYS) or DEFAULT_INDEX


def _ssl_context() -> Optional[ssl.SSLContext]:
    """The certificate authorities pip trusts where its ``cert`` setting names a file (a
    private index's own authority); ``None``: the system's, as urllib takes them."""
    cert = _pip_setting(_CERT_KEYS)
    if cert is None:
        return None
    try:
        return ssl.create_default_context(cafile=cert)
    except (OSError, ssl.SSLError) as error:
        raise PatchError(
            f"pip's cert setting {cert!r} cannot be read as certificate authorities ({error}); "
            "fix it in pip's configuration or PIP_CERT"
        ) from None


def shown_url(url: str) -> str:
    """``url`` without any user name or password in it, for messages."""
    parts = urllib.parse.urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _credentials(url: str) -> Tuple[str, Dict[str, str]]:
    """(``url`` without its user info, the ``Authorization`` header that user info makes)."""
    parts = urllib.parse.urlsplit(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, {}
    user, _, password = userinfo.partition(":")
    pair = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
    header = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), {"Authorization": header}


def _unreachable(url: str, reason: object) -> IndexUnreachable:
    return IndexUnreachable(
        f"could not reach the package index {shown_url(url)} ({reason}); check the network and "
        "the proxy, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
    )


def _read_local(url: str) -> Optional[bytes]:
    """The file a ``file://`` URL names (a folder: its ``index.html``); ``None`` if missing."""
    path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
    if path.is_dir():
        path = path / "index.html"
    if not path.is_file():
        return None
    try:
        return path.read_bytes()
    except OSError as error:
        raise _unreachable(url, error.strerror or error) from None


def _get(url: str, accept: str, headers: Optional[Dict[str, str]] = None) -> Optional[bytes]:
    """The body at ``url``; ``None`` when the index answers 404 (no such project or file).

    User info in ``url`` becomes an ``Authorization`` header; ``headers`` adds others.
    """
    if urllib.parse.urlsplit(url).scheme == "file":
        return _read_local(url)
    plain, auth = _credentials(url)
    request = urllib.request.Request(plain, headers={"Accept": accept, **auth, **(headers or {})})
    context = _ssl_context() if plain.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=INDEX_TIMEOUT_S, context=context) as response:
            body: bytes = response.read(MAX_WHEEL_BYTES + 1)
            return body
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise IndexUnreachable(
            f"the package index {shown_url(url)} answered HTTP {error.code}; check the index's "
            "address and credentials, or try again later"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise _unreachable(url, getattr(error, "reason", error)) from None


class _Links(HTMLParser):
    """The ``<a href>`` targets of a PEP 503 page, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _html_files(body: bytes, page: str) -> List[IndexFile]:
    parser = _Links()
    parser.feed(body.decode("utf-8", errors="replace"))
    files = []
    for href in parser.hrefs:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        name = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rpartition("/")[2])
        digest = dict(urllib.parse.parse_qsl(fragment)).get("sha256")
        files.append(IndexFile(name, url, digest))
    return files


def _json_files(body: bytes, page: str) -> List[IndexFile]:
    files = json.loads(body)["files"]
    return [
        IndexFile(
            str(f["filename"]),
            urllib.parse.urljoin(page, str(f.get("url", f["filename"]))),
            f.get("hashes", {}).get("sha256"),
        )
        for f in files
    ]


def _listed(files: List[IndexFile], page: str) -> Dict[str, IndexFile]:
    """The wheels of a list by name; a malformed wheel name is skipped with a warning."""
    wheels: Dict[str, IndexFile] = {}
    for file in files:
        if not file.filename.endswith(".whl"):
            continue
        if not is_wheel_filename(file.filename):
            logger.warning(
                "the package index %s lists %r, which is not a wheel file name; skipped",
                shown_url(page),
                file.filename,
            )
            continue
        wheels[file.filename] = file
    return wheels


def index_files(index: str) -> Dict[str, IndexFile]:
    """File name -> :class:`IndexFile` of every ``torch-tensorrt`` wheel on the index.

    Raises:
        IndexUnreachable: If the index cannot be reached or answers nonsense.
        NoSuchWheel: If the index has no such project.
    """
    page = f"{index.rstrip('/')}/{PROJECT}/"
    body = _get(page, _ACCEPT)
    if body is None:
        raise NoSuchWheel(f"the package index {shown_url(index)} has no project {PROJECT}")
    try:
        is_json = body.lstrip()[:1] == b"{"
        files = _json_files(body, page) if is_json else _html_files(body, page)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise IndexUnreachable(
            f"the package index {shown_url(page)} gave no list of files ({type(error).__name__}"
            f": {error}); check the index's address"
        ) from None
    return _listed(files, page)


def _same_host(url: str, index: str) -> bool:
    ours, theirs = urllib.parse.urlsplit(url), urllib.parse.urlsplit(index)
    return (ours.scheme, ours.netloc.rpartition("@")[2]) == (
        theirs.scheme,
        theirs.netloc.rpartition("@")[2],
    )


def _with_index_credentials(url: str, index: str) -> str:
    """``url`` with the index's user info where it is on the index's host (as pip does)."""
    if "@" in urllib.parse.urlsplit(url).netloc or not _same_host(url, index):
        return url
    userinfo = urllib.parse.urlsplit(index).netloc.rpartition("@")[0]
    if not userinfo:
        return url
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo}@{parts.netloc}"))


def fetch_locked(
    filename: str,
    sha256: str,
    *,
    index: Optional[str] = None,
    files: Optional[Mapping[str, IndexFile]] = None,
) -> bytes:
    """The bytes of the file ``filename`` from the index's list, which must hash to ``sha256``.

    ``files`` is the index's list where the caller already has it (one request for many
    files); otherwise it is asked for.

    Raises:
        NoSuchWheel: If the index does not list that exact file.
        IndexUnreachable: If the index cannot be reached.
        PatchError: If the index lists it with another sha256, or serves other bytes.
    """
    index = index or index_url()
    listed = (index_files(index) if files is None else files).get(filename)
    if listed is None:
        raise NoSuchWheel(
            f"the package index {shown_url(index)} does not offer {filename}, the official file "
            "the lock names; use an index that mirrors PyPI's files (or PyPI itself)"
        )
    if listed.sha256 is not None and listed.sha256 != sha256:
        raise PatchError(
            f"the package index {shown_url(index)} lists {filename} with sha256 {listed.sha256}, "
            f"not the lock's {sha256}; it is not the official file, use another index"
        )
    data = _get(_with_index_credentials(listed.url, index), "application/octet-stream")
    if data is None:
        raise NoSuchWheel(f"the package index {shown_url(index)} lists {filename} but lacks it")
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha256:
        raise PatchError(
            f"{filename} from {shown_url(index)}: its bytes have sha256 {actual}, not the "
            f"{sha256} expected; it is not the official file, try again or use another index"
        )
    logger.debug("fetched %s", filename)
    return data


def _pip_command(request: BaseRequest, dest: Path) -> List[str]:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", "--no-cache-dir"]
    command += ["--dest", str(dest)]
    if request.platform:
        command += ["--platform", request.platform]
    if request.python:
        command += ["--python-version", request.python, "--implementation", "cp"]
    return command + [f"{PROJECT}=={request.release}"]


def _run_pip(request: BaseRequest, dest: Path) -> Tuple[int, str]:
    try:
        completed = subprocess.run(
            _pip_command(request, dest), capture_output=True, text=True, check=False
        )
    except OSError as error:
        raise PatchError(f"cannot run pip ({error}); install pip") from None
    return completed.returncode, completed.stdout + completed.stderr


def _pip_failure(request: BaseRequest, output: str) -> PatchError:
    """What a failed ``pip download`` means: no pip, no network, no such wheel, or other."""
    if "No module named pip" in output:
        return PatchError(
            "pip is not available to download the base wheel; install pip, or set "
            "TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    network = any(word in output for word in _NETWORK_WORDS)
    if network or "No matching distribution" in output:
        _get(f"{index_url().rstrip('/')}/{PROJECT}/", "text/html")  # raises if unreachable
    if network:
        return IndexUnreachable(
            f"could not reach the package index to download {request.describe()}; check the "
            "network and the proxy, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
        )
    if "No matching distribution" in output:
        return NoSuchWheel(
            f"the package index has no official wheel of {request.describe()}; pick another "
            "with TORCHTRT_BASE_VERSION, TORCHTRT_BASE_PLATFORM and TORCHTRT_BASE_PYTHON "
            "(or --release, --platform and --python)"
        )
    last_lines = "\n".join(output.strip().splitlines()[-5:])
    return PatchError(
        f"pip could not download {request.describe()}:\n{last_lines}\nCheck the index "
        "settings, or set TORCHTRT_BASE_WHEEL to a downloaded official wheel"
    )


def pip_download(request: BaseRequest, temporary_parent: Path) -> Tuple[bytes, str]:
    """The bytes and file name of the wheel pip downloads for ``request``, read once.

    For bases the lock does not know (a locked one is fetched by :func:`fetch_locked`). pip
    downloads into a new empty folder under ``temporary_parent`` (removed afterwards), never
    from pip's own cache, so what is read is what the index served.

    Raises:
        IndexUnreachable, NoSuchWheel, PatchError: As :func:`_pip_failure` tells them apart.
    """
    with tempfile.TemporaryDirectory(dir=temporary_parent, prefix=".download-") as folder:
        status, output = _run_pip(request, Path(folder))
        if status != 0:
            raise _pip_failure(request, output)
        wheels = sorted(Path(folder).glob("*.whl"))
        if len(wheels) != 1:
            raise PatchError(
                f"pip download of {request.describe()} gave {len(wheels)} wheels, expected "
                "one; report this with the pip version"
            )
        logger.debug("downloaded %s", wheels[0].name)
        return read_wheel_file(wheels[0], what="the downloaded wheel"), wheels[0].name
