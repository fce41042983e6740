"""The wheel format (wheel.py): names, members, times and RECORD, as the tool reads them."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from patched_wheel import PatchError
from patched_wheel.wheel import zip_date_time

from tests.patched_wheel.helpers import Released, build, names, refusal, run_tool, verify


def test_a_build_tag_is_refused_by_verify_and_index(released: Released) -> None:
    repo, base, lock, cache = released
    wheel = build(repo, base, lock)
    version, tags = wheel.name.split("-", 2)[1:]
    tagged = wheel.with_name(f"torch_tensorrt-{version}-999-{tags}")
    wheel.rename(tagged)
    status, report = verify(repo, tagged, lock, cache)
    assert status == 1
    names(report.splitlines()[-1], "NOT verified", "'999'")
    done = run_tool(repo, "index", str(tagged.parent), "--lock", str(lock), "--cache", str(cache))
    refusal(done, tagged.name, "'999'")
    assert not (tagged.parent / "simple").exists()


def test_a_wheel_of_many_tiny_members_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    import tracemalloc

    from patched_wheel.verify import read_provenance

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for number in range(70000):
            archive.writestr(f"{number}", b"")
    data = out.getvalue()
    name = "torch_tensorrt-2.99.0+memfix1.3-cp311-cp311-linux_x86_64.whl"
    tracemalloc.start()
    with pytest.raises(PatchError) as refused:
        read_provenance(data, name)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(data), (peak, len(data))
    names(refused.value, name)


@pytest.mark.parametrize(
    "epoch, expected",
    [
        pytest.param("0", (1980, 1, 1, 0, 0, 0), id="floor"),
        pytest.param("1700000000", (2023, 11, 14, 22, 13, 20), id="2023"),
    ],
)
def test_source_date_epoch_sets_the_new_members_time(epoch: str, expected: tuple) -> None:
    assert zip_date_time(epoch) == expected
