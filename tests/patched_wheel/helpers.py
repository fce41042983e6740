"""Helpers of the tool's tests: small synthetic wheels, a release repository, the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple

from patched_wheel.config import OVERLAY_PATH, OVERLAY_RELEASES_FILE, REPOSITORY, TARGET, TOOL_PATH
from patched_wheel.lock import Lock
from patched_wheel.patch import Origin, patch_wheel
from patched_wheel.provenance import SourceRevision
from patched_wheel.splice import overlay_from_bytes
from patched_wheel.verify import Verification, verify_bytes
from patched_wheel.wheel import BaseWheel

# An upstream utils.py in miniature: every hook of every fix is there.
UTILS = b"""import torch


def deallocate_module(module, delete_module=True):
    del module


def release_host_and_device_memory():
    pass


def prepare_inputs(example, check_format=False):
    if isinstance(example, (torch.Tensor, int)):
        return torch.tensor(example)  # the copy that the input-copy fix removes
    return example
"""
TAGS = "cp311-cp311-manylinux_2_28_x86_64"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(
    folder: Path,
    files: Optional[Mapping[str, bytes]] = None,
    *,
    version: str = "2.99.0",
    utils: bytes = UTILS,
    record: bool = True,
    tag: str = TAGS,
    name: str = "torch_tensorrt",
) -> Path:
    """A small torch_tensorrt wheel (of distribution ``name``): ``utils`` as the target,
    ``files`` added or replacing."""
    dist_info = f"{name}-{version}.dist-info"
    members: Dict[str, bytes] = {
        "torch_tensorrt/__init__.py": b"",
        TARGET: utils,
        "torch_tensorrt/bin/torchtrtc": b"#!/bin/sh\n",
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "Requires-Python: >=3.10\n\nbody\n".encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
    }
    members.update(files or {})
    rows = "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in members.items())
    if record:
        members[f"{dist_info}/RECORD"] = (rows + f"{dist_info}/RECORD,,\n").encode()
    path = folder / f"{name}-{version}-{tag}.whl"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, (2024, 1, 2, 3, 4, 6))
            info.external_attr = (0o755 if name.endswith("torchtrtc") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return path


def marked(data: bytes, member: str, *, encrypted: bool = False, method: int = -1) -> bytes:
    """The zip ``data`` with ``member``'s headers (local and central) saying it is encrypted,
    or compressed with ``method``; its bytes unchanged, as a crafted file would have them."""
    out, found = bytearray(data), 0
    for signature, flags, name_length, name in (
        (b"PK\x03\x04", 6, 26, 30),
        (b"PK\x01\x02", 8, 28, 46),
    ):
        at = out.find(signature)
        while at >= 0:
            length = struct.unpack_from("<H", out, at + name_length)[0]
            if out[at + name : at + name + length] == member.encode():
                out[at + flags] |= 1 if encrypted else 0
                if method >= 0:
                    struct.pack_into("<H", out, at + flags + 2, method)
                found += 1
            at = out.find(signature, at + 4)
    assert found == 2, f"{member} not found in both headers"
    return bytes(out)


def write_lock(path: Path, *wheels: Path) -> Path:
    lock = {"wheels": {w.name: hashlib.sha256(w.read_bytes()).hexdigest() for w in wheels}}
    path.write_text(json.dumps(lock))
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        GIT + ["-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def release_repo(folder: Path) -> Path:
    """A repository with the tool and the overlay committed on main, the overlay released."""
    repo = folder / "repo"
    shutil.copytree(
        REPOSITORY / TOOL_PATH, repo / TOOL_PATH, ignore=shutil.ignore_patterns("__pycache__")
    )
    overlay = repo / OVERLAY_PATH
    overlay.parent.mkdir(parents=True)
    shutil.copy(REPOSITORY / OVERLAY_PATH, overlay)
    git(folder, "init", "-q", "-b", "main", str(repo))
    run_tool(repo, "register-overlay")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "release")
    return repo


def pip_environment(**settings: str) -> Dict[str, str]:
    """The environment of a pip that a test runs: none of the caller's ``PIP_*`` variables or
    config files (``PIP_NO_INDEX``, an index, required hashes ...), only ``settings``."""
    environ = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    return {**environ, "PIP_CONFIG_FILE": os.devnull, **settings}


def run_tool(repo: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """``python tools/patched_wheel ARGS`` in ``repo``, its output as text; ``environ`` with a
    ``PIP_*`` setting replaces the caller's pip settings (see :func:`pip_environment`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHTRT_BASE_")}
    env.pop("SOURCE_DATE_EPOCH", None)
    if any(name.startswith("PIP_") for name in environ):  # the test says how pip runs
        env = {k: v for k, v in env.items() if not k.upper().startswith("PIP_")}
        env["PIP_CONFIG_FILE"] = os.devnull
    env.update(environ)
    command = [sys.executable, str(repo / TOOL_PATH), *args]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, check=False)


def refusal(done: subprocess.CompletedProcess[str], *named: str) -> str:
    """The refusal of a command that ``done`` ran, checked as the tool promises one: exit status
    1, no traceback, and stderr's last line its one ``error:`` line, naming each of ``named``
    (what the test gave the tool); that line."""
    lines = done.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert done.returncode == 1 and errors == lines[-1:], done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return names(errors[0], *named)


def names(message: object, *named: str) -> str:
    """``message`` (a refusal's text, or an exception's), checked to be one line that names each
    of ``named``; the text."""
    text = str(message)
    unnamed = [thing for thing in named if thing not in text]
    assert "\n" not in text and not unnamed, f"{text!r} does not name {unnamed}"
    return text


# What a release build of the overlay at a made-up revision and tool would record.
ORIGIN = Origin("memfix1.2", SourceRevision("0" * 40, False), "1" * 64)
# (release repo, synthetic base, its lock file, the cache holding it): the ``released`` fixture.
Released = Tuple[Path, Path, Path, Path]
# The newest release in the registry that a release repository copies, and its label.
NEWEST = max(map(int, json.loads(OVERLAY_RELEASES_FILE.read_text(encoding="utf-8"))["overlays"]))
RELEASED = f"memfix1.{NEWEST}"


def build(repo: Path, base: Path, lock: Path, *options: str) -> Path:
    out = repo.parent / "dist"
    done = run_tool(
        repo, "build", "--base-wheel", str(base), "--lock", str(lock), "--out", str(out), *options
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def verify(repo: Path, wheel: Path, lock: Path, cache: Path, *options: str) -> Tuple[int, str]:
    done = run_tool(
        repo, "verify", str(wheel), "--lock", str(lock), "--cache", str(cache), *options
    )
    return done.returncode, done.stdout + done.stderr


def judge(released: Released, data: bytes, name: str) -> Verification:
    """verify's judgement of the wheel ``data`` named ``name``, in the release repository."""
    repo, _, lock, cache = released
    wheels = json.loads(lock.read_text())["wheels"]
    return verify_bytes(data, name, lock=Lock(wheels), cache_dir=cache, repository=repo)


def crafted(
    base: Path, label: str, revision: str, tool: str = "0" * 64, epoch: Optional[str] = None
) -> Tuple[str, bytes]:
    """A wheel with the record a build of ``label`` at ``revision`` by ``tool`` would write."""
    data = base.read_bytes()
    origin = Origin(label, SourceRevision(revision, False), tool, epoch)
    patched = patch_wheel(
        BaseWheel(data, base.name),
        overlay_from_bytes((REPOSITORY / OVERLAY_PATH).read_bytes(), "o"),
        origin=origin,
    )
    return patched.filename, patched.data


RTX = "torch_tensorrt_rtx"


def source_build(
    folder: Path,
    utils: bytes,
    name: str = "torch_tensorrt",
    version: str = "2.10.0a0+abc1234",
    tag: str = "cp311-cp311-linux_x86_64",
) -> Path:
    """A fake install (by default of a source build, ``2.10.0a0+abc1234``, no official wheel of
    it): the package, a dist-info with METADATA, WHEEL and RECORD, as pip leaves them."""
    dist_info = f"{name}-{version}.dist-info"
    files = {
        "torch_tensorrt/__init__.py": b"",
        "torch_tensorrt/dynamo/__init__.py": b"",
        TARGET: utils,
        f"{dist_info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        "\n".encode(),
        f"{dist_info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        f"{dist_info}/INSTALLER": b"pip\n",
    }
    rows = [f"{path},{record_hash(data)},{len(data)}" for path, data in files.items()]
    rows += ["torch_tensorrt/__pycache__/__init__.cpython-311.pyc,,", f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    return folder


# A synthetic overlay written here. Its prepare_inputs takes the parameter name upstream's
# callers pass by keyword (backends.py: disable_memory_format_check=True), as the call-site
# check demands where test_distributions splices it into the official 2.8-2.11 wheels.
OVERLAY = b"""import gc


def deallocate_module(module, delete_module=True):
    gc.collect()


def release_host_and_device_memory():
    gc.collect()


def prepare_inputs(inputs, disable_memory_format_check=False):
    return inputs


def _helper():
    return 1
"""
