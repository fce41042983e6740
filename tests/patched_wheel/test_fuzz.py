"""Fuzzing the build with bases derived from a real official wheel.

Bytes flipped, members dropped, added and renamed: whatever the input, the build either
refuses it with a :class:`~patched_wheel.PatchError` or writes a wheel that is the input,
member for member, except ``torch_tensorrt/dynamo/utils.py`` and the ``.dist-info``. Never a
traceback of another kind, never another difference.
"""

from __future__ import annotations

import warnings
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patched_wheel import PatchError
from patched_wheel.base import read_base
from patched_wheel.build import build_patched_wheel
from wheel_helpers import TARGET, Member, craft, lock_for, members, read_entries, write_entries

# Sources kept from the official wheel: the target and the modules that call into it.
KEPT = ("torch_tensorrt/__init__.py", TARGET, "torch_tensorrt/dynamo/_compiler.py")


@pytest.fixture(scope="module")
def small_real(base_wheels: Dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The official 2.14.0 wheel cut to a few sources and its .dist-info, RECORD rewritten."""

    def cut(entries: List[Member]) -> List[Member]:
        return [(i, d) for i, d in entries if i.filename in KEPT or ".dist-info/" in i.filename]

    return craft(base_wheels["2.14.0"], tmp_path_factory.mktemp("small"), cut)


flips = st.lists(st.tuples(st.integers(min_value=0), st.integers(1, 255)), min_size=1, max_size=6)
edits = st.one_of(
    st.tuples(st.just("flip"), flips),
    st.tuples(st.just("drop"), st.integers(min_value=0)),
    st.tuples(st.just("add"), st.text(min_size=1, max_size=40)),
    st.tuples(st.just("rename"), st.tuples(st.integers(min_value=0), st.text(max_size=40))),
)


def mutate(source: Path, target: Path, edit: tuple) -> Path:  # type: ignore[type-arg]
    """``source`` changed by one edit, RECORD left as it was."""
    kind, argument = edit
    if kind == "flip":
        data = bytearray(source.read_bytes())
        for position, mask in argument:
            data[position % len(data)] ^= mask
        target.write_bytes(bytes(data))
        return target
    entries = read_entries(source)
    if kind == "drop":
        del entries[argument % len(entries)]
    elif kind == "add":
        entries.append((zipfile.ZipInfo(argument), b"added\n"))
    else:
        index, name = argument
        info = entries[index % len(entries)][0]
        info.filename = name or info.filename
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return write_entries(target, entries)


def outside_patch(wheel_members: Dict[str, bytes]) -> Dict[str, bytes]:
    return {n: d for n, d in wheel_members.items() if n != TARGET and ".dist-info" not in n}


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(edit=edits)
def test_any_mutation_is_refused_or_changes_nothing_else(
    small_real: Path, tmp_path: Path, edit: tuple  # type: ignore[type-arg]
) -> None:
    base = mutate(small_real, tmp_path / small_real.name, edit)
    out_dir = tmp_path / "out"
    try:
        patched = build_patched_wheel(read_base(base, lock=lock_for(base)), out_dir=out_dir)
    except PatchError:
        assert not out_dir.exists() or list(out_dir.iterdir()) == []
        return
    finally:
        base.unlink()
    assert outside_patch(members(patched)) == outside_patch(members(small_real))
    patched.unlink()
