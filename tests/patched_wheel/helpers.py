"""Helpers of the tool's tests: small synthetic wheels, a release repository, the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Mapping, Optional

from patched_wheel.config import OVERLAY_PATH, REPOSITORY, TARGET, TOOL_PATH

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
