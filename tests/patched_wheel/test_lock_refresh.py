"""``lock`` against a package index served here: each sha256 from a fresh download that the
index's own list of files vouches for, and the lock left unchanged when one does not match.

The index (``index_server``) serves one real official wheel on localhost, so the test needs
no network.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, Iterator

import pytest
from index_server import ServedIndex, serving
from patched_wheel import PatchError
from patched_wheel.lock import load_lock, write_lock
from patched_wheel.refresh import refresh_lock
from patched_wheel.request import BaseRequest

OTHER = {"torch_tensorrt-2.10.0-cp310-cp310-win_amd64.whl": "ab" * 32}


@pytest.fixture
def served(base_wheels: Dict[str, Path]) -> Iterator[ServedIndex]:
    """The index, serving the official 2.13.0 wheel."""
    with serving(ServedIndex.of(base_wheels["2.13.0"])) as index:
        yield index


REQUEST = BaseRequest("2.13.0", "manylinux_2_28_x86_64", "3.11")


def test_lock_records_the_sha256_the_index_vouches_for(served: ServedIndex, tmp_path: Path) -> None:
    (name,) = served.files
    lock_file = tmp_path / "lock.json"
    write_lock(OTHER, lock_file)
    refresh_lock([REQUEST], path=lock_file, index=served.url)
    assert load_lock(lock_file).wheels == {**OTHER, name: load_lock().wheels[name]}


def test_a_download_the_index_does_not_vouch_for_leaves_the_lock_unchanged(
    served: ServedIndex, tmp_path: Path
) -> None:
    (name,) = served.files
    served.listed_sha256[name] = "0" * 64
    lock_file = tmp_path / "lock.json"
    write_lock(OTHER, lock_file)
    before = lock_file.read_bytes()
    with pytest.raises(PatchError) as error:
        refresh_lock([REQUEST], path=lock_file, index=served.url)
    assert re.fullmatch(
        re.escape("1 wheel(s) could not be checked, so the lock is left unchanged:\n  ")
        + re.escape(f"{REQUEST.describe()}: {name} from {served.url}: its bytes have sha256 ")
        + "[0-9a-f]{64}"
        + re.escape(f", not the {'0' * 64} expected; it is not the official file, try again ")
        + "or use another index",
        str(error.value),
    ), str(error.value)
    assert lock_file.read_bytes() == before
