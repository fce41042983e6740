"""What tests outside this folder import: the label a build of the current overlay gets here
(tests/docs compares the README's), and the one way to an official wheel (lock-checked)."""

from pathlib import Path

from patched_wheel.config import DEFAULT_CACHE_DIR, BaseRequest
from patched_wheel.fetch import cached_base
from patched_wheel.lock import load_lock
from patched_wheel.patch import current_label

LABEL = current_label()


def fetch(
    release: str,
    python: str = "3.11",
    platform: str = "manylinux_2_28_x86_64",
    distribution: str = "torch-tensorrt",
) -> Path:
    """The official wheel of ``release``, from the cache or downloaded (tests using it are
    marked ``network``)."""
    request = BaseRequest(release, platform, python, distribution)
    lock = load_lock()
    name = lock.official_name(request)
    assert name is not None
    return cached_base(request, name, lock.wheels[name], DEFAULT_CACHE_DIR)
