"""``lock`` against a package index served here: each sha256 from a fresh download that the
index's own list of files vouches for, and the lock left unchanged when one does not match.

The index is a small PEP 503 / PEP 691 server on localhost serving one real official wheel;
pip downloads from it as from PyPI (``PIP_INDEX_URL``), so the test needs no network.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest
from patched_wheel import PatchError
from patched_wheel.download import BaseRequest
from patched_wheel.lock import load_lock, write_lock
from patched_wheel.refresh import refresh_lock
from wheel_helpers import sha256

OTHER = {"torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32}


class Index:
    """What the served index says: the wheel's bytes, and the sha256 its JSON list gives.

    pip gets the HTML page (with the file's true sha256, which pip checks); the build's own
    request gets the JSON list, so that the two can be made to disagree.
    """

    def __init__(self, wheel: Path) -> None:
        self.wheel = wheel
        self.listed_sha256 = sha256(wheel)


def _handler(index: Index) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            name = index.wheel.name
            if self.path.startswith("/files/"):
                self._answer("application/octet-stream", index.wheel.read_bytes())
            elif self.headers.get("User-Agent", "").startswith("pip/"):
                # What pip sees: the page with the link and the file's true sha256.
                link = f'<a href="/files/{name}#sha256={sha256(index.wheel)}">{name}</a>'
                self._answer("text/html", f"<html><body>{link}</body></html>".encode())
            else:
                # The JSON list the build asks for, with the sha256 the test chooses.
                files = [{"filename": name, "hashes": {"sha256": index.listed_sha256}}]
                body = json.dumps({"meta": {"api-version": "1.0"}, "files": files})
                self._answer("application/vnd.pypi.simple.v1+json", body.encode())

        def _answer(self, content_type: str, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def served(
    base_wheels: Dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> Iterator[Tuple[Index, str]]:
    """(the index's state, its URL), with pip pointed at it."""
    index = Index(base_wheels["2.13.0"])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    try:
        yield index, url
    finally:
        server.shutdown()
        server.server_close()


REQUEST = BaseRequest("2.13.0", "manylinux_2_28_x86_64", "3.11")


def test_lock_records_the_sha256_the_index_vouches_for(
    served: Tuple[Index, str], tmp_path: Path
) -> None:
    index, url = served
    lock_file = tmp_path / "lock.json"
    write_lock(OTHER, lock_file)
    refresh_lock([REQUEST], path=lock_file, index=url)
    assert load_lock(lock_file).wheels == {
        **OTHER,
        index.wheel.name: load_lock().wheels[index.wheel.name],
    }


def test_a_download_the_index_does_not_vouch_for_leaves_the_lock_unchanged(
    served: Tuple[Index, str], tmp_path: Path
) -> None:
    index, url = served
    index.listed_sha256 = "0" * 64
    lock_file = tmp_path / "lock.json"
    write_lock(OTHER, lock_file)
    before = lock_file.read_bytes()
    with pytest.raises(PatchError) as error:
        refresh_lock([REQUEST], path=lock_file, index=url)
    assert re.fullmatch(
        re.escape("1 wheel(s) could not be checked, so the lock is left unchanged:\n  ")
        + re.escape(f"{REQUEST.describe()}: {index.wheel.name}: the download (sha256 ")
        + "[0-9a-f]{64}"
        + re.escape(f") is not the index's {index.wheel.name} (sha256 {'0' * 64}); the lock ")
        + "is left unchanged, try again",
        str(error.value),
    ), str(error.value)
    assert lock_file.read_bytes() == before
