"""The installed patched wheel offloads a real CUDA module through upstream's ``_compiler``.

Runs where CUDA is available (skipped with a reason elsewhere): for each release of
:func:`installed_helpers.releases_to_test`, a model of ``TORCHTRT_INSTALLED_GPU_BYTES`` bytes
(default 2 GiB) of fp16 weights, with the output layer tied to the embedding, is built on the
GPU and moved to the CPU by ``torch_tensorrt.dynamo._compiler.deallocate_module`` of the
installed package. The figures are printed (``pytest -s``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from tests.installed.installed_helpers import (
    DEFAULT_GPU_BYTES,
    GPU_BYTES_VARIABLE,
    probe,
    releases_to_test,
)

# Memory the CUDA caching allocator may keep reserved in rounding after the offload.
RESERVED_TOLERANCE = 2 * 1024 * 1024


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is required")
@pytest.mark.parametrize("release", releases_to_test())
def test_a_cuda_module_is_offloaded_through_the_installed_compiler(
    release: str, installed_release: Callable[[str], Any], tmp_path: Path
) -> None:
    target = installed_release(release).target
    size = int(os.environ.get(GPU_BYTES_VARIABLE, DEFAULT_GPU_BYTES))
    report = probe(target, tmp_path / "report.json", gpu_bytes=size)
    gpu = report["offload_gpu"]
    print(
        f"\n{release}: offloaded {gpu['model_bytes'] / 2**30:.2f} GiB in {gpu['seconds']:.2f} s "
        f"({gpu['gb_per_s']:.1f} GB/s); peak allocated over the model "
        f"{gpu['peak_allocated_over_model']} B; allocated after {gpu['allocated_after']} B; "
        f"reserved over baseline after {gpu['reserved_over_baseline_after']} B"
    )
    assert report["answered"] == [], "nothing is answered for CUDA where CUDA is there"
    assert gpu["model_bytes"] >= size * 0.9
    assert gpu["devices"] == ["cpu"]
    assert gpu["values_equal"] is True
    assert gpu["tied"] is True
    assert gpu["allocated_after"] == 0, f"{gpu['allocated_after']} bytes stay on the GPU"
    assert gpu["reserved_over_baseline_after"] <= RESERVED_TOLERANCE
    assert gpu["peak_allocated_over_model"] <= 0, "the offload allocated on the GPU"
