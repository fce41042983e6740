"""A package index served on localhost for the tests: PEP 691 JSON and PEP 503 HTML, optionally
behind HTTP basic authentication, serving the wheel files it lists.

The build asks for JSON; pip asks for HTML (its ``User-Agent`` starts with ``pip/``). What the
JSON list says (``listed_sha256``) can be made to differ from the bytes served, and extra
names (malformed ones, say) can be listed without a file behind them.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

PROJECT_PATH = "/simple/torch-tensorrt/"


@dataclass
class ServedIndex:
    """The index's state: files by name, the sha256 its list gives, who may read it."""

    files: Dict[str, bytes]
    listed_sha256: Dict[str, str] = field(default_factory=dict)
    extra_names: List[str] = field(default_factory=list)
    credentials: Optional[Tuple[str, str]] = None
    requests: List[str] = field(default_factory=list)
    url: str = ""

    @classmethod
    def of(cls, *wheels: Path, **options: object) -> "ServedIndex":
        return cls({w.name: w.read_bytes() for w in wheels}, **options)  # type: ignore[arg-type]

    def sha256_of(self, name: str) -> str:
        return self.listed_sha256.get(name) or hashlib.sha256(self.files[name]).hexdigest()

    def json_list(self) -> bytes:
        files = [
            {"filename": n, "url": f"/files/{n}", "hashes": {"sha256": self.sha256_of(n)}}
            for n in self.files
        ]
        files += [{"filename": n, "url": f"/files/{n}", "hashes": {}} for n in self.extra_names]
        return json.dumps({"meta": {"api-version": "1.0"}, "files": files}).encode()

    def html_page(self) -> bytes:
        links = "".join(
            f'<a href="/files/{n}#sha256={hashlib.sha256(d).hexdigest()}">{n}</a>'
            for n, d in self.files.items()
        )
        return f"<html><body>{links}</body></html>".encode()


def _authorised(index: ServedIndex, header: Optional[str]) -> bool:
    if index.credentials is None:
        return True
    expected = base64.b64encode(":".join(index.credentials).encode()).decode()
    return header == f"Basic {expected}"


def _handler(index: ServedIndex) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
            index.requests.append(self.path)
            if not _authorised(index, self.headers.get("Authorization")):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="index"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            name = self.path[len("/files/") :] if self.path.startswith("/files/") else None
            if name is not None and name in index.files:
                self._answer("application/octet-stream", index.files[name])
            elif self.path.rstrip("/") + "/" != PROJECT_PATH:
                self._answer("text/plain", b"not found", status=404)
            elif self.headers.get("User-Agent", "").startswith("pip/"):
                self._answer("text/html", index.html_page())
            else:
                self._answer("application/vnd.pypi.simple.v1+json", index.json_list())

        def _answer(self, content_type: str, body: bytes, status: int = 200) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serving(index: ServedIndex, tls: Optional[Tuple[Path, Path]] = None) -> Iterator[ServedIndex]:
    """Serve ``index`` on a free port of localhost; ``index.url`` is its ``/simple`` URL.

    ``tls``: (certificate, key) files to serve HTTPS with.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(index))
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*tls)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    index.url = f"{scheme}://127.0.0.1:{server.server_address[1]}/simple"
    try:
        yield index
    finally:
        server.shutdown()
        server.server_close()
