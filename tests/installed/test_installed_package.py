"""The patched wheel, installed: upstream's package imports it and calls the fork's functions.

Each supported release in :data:`installed_helpers.INSTALLED_RELEASES` (two where input-copy
applies, and the default) is built for the running Python and platform, installed with
``pip install --no-deps --target``, and imported in a subprocess of its own by ``probe.py``,
with the stand-in ``tensorrt`` on ``sys.path`` and upstream's C++ libraries removed.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path
from typing import Any, Callable, Dict

import pytest
from patched_wheel import config
from patched_wheel.patch import FIXES

from tests.installed.installed_helpers import releases_to_test

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the tests install the official wheels' Linux builds"
)

releases = pytest.mark.parametrize("release", releases_to_test())
Report = Callable[[str], Dict[str, Any]]

# The upstream modules that call the fork's functions, and the functions each one binds.
EXPECTED_BINDINGS = {
    "torch_tensorrt.dynamo._compiler": ["deallocate_module", "prepare_inputs"],
    "torch_tensorrt.dynamo.conversion._TRTInterpreter": ["deallocate_module"],
    "torch_tensorrt.dynamo.runtime._MutableTorchTensorRTModule": ["deallocate_module"],
    "torch_tensorrt.dynamo.conversion._conversion": ["release_host_and_device_memory"],
}
FORK_CHECKS = {"module": "torch_tensorrt.dynamo.utils", "same_source": True, "same_bytecode": True}
# The fork's definitions spliced into another module than utils: the engine-bytes fix's, only
# where upstream's convert_module creates the runtime module as the fork's does (2.11).
ELSEWHERE = {
    name: fix.target[: -len(".py")].replace("/", ".")
    for fix in FIXES
    if fix.target != config.TARGET
    for name in fix.functions
}
ENGINE_BYTES_RELEASES = ("2.11.0",)
# The releases whose own prepare_inputs copies its inputs: only there is the fork's spliced in
# (the input-copy fix); later releases keep upstream's function, fixed upstream in 2.12.
INPUT_COPY_RELEASES = ("2.10.0", "2.11.0")


@releases
def test_installed_package_imports_from_its_folder(
    release: str, installed_release: Callable[[str], Any]
) -> None:
    installed = installed_release(release)
    report = installed.report
    assert report["torch_tensorrt_version"] == release
    utils = installed.target / "torch_tensorrt" / "dynamo" / "utils.py"
    assert Path(report["utils_file"]) == utils.resolve()
    assert {"libtorchtrt.so", "libtorchtrt_runtime.so"} <= set(installed.hidden)


@releases
def test_every_fork_definition_is_installed_as_written(release: str, probe_report: Report) -> None:
    definitions = probe_report(release)["definitions"]
    assert {"deallocate_module", "trim_host_heap", "release_host_and_device_memory"} <= set(
        definitions
    )
    kept = set() if release in INPUT_COPY_RELEASES else {"prepare_inputs"}
    kept |= set() if release in ENGINE_BYTES_RELEASES else set(ELSEWHERE)
    forks = {
        name
        for name, checks in definitions.items()
        if checks == dict(FORK_CHECKS, module=ELSEWHERE.get(name, FORK_CHECKS["module"]))
    }
    assert forks == set(definitions) - kept


@releases
def test_every_global_name_of_the_fork_resolves(release: str, probe_report: Report) -> None:
    found = probe_report(release)["globals"]
    assert found["checked"] > 20
    assert found["unresolved"] == {}
    assert found["different"] == {}


@releases
def test_upstream_callers_bind_the_fork_functions(release: str, probe_report: Report) -> None:
    bindings = probe_report(release)["bindings"]
    assert {module: sorted(names) for module, names in bindings.items()} == EXPECTED_BINDINGS
    for module, names in bindings.items():
        for name, checks in names.items():
            if name == "prepare_inputs" and release not in INPUT_COPY_RELEASES:
                assert not checks["same_source"], (module, name)  # upstream's own, kept
            else:
                assert checks == dict(FORK_CHECKS, is_utils_attribute=True), (module, name)


@releases
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc is required")
def test_trimming_is_on_by_default_and_off_with_the_variable(
    release: str, probe_report: Report
) -> None:
    trim = probe_report(release)["trim"]
    assert trim == {"lookup": "malloc_trim", "unset": [0], "0": [], "1": [0]}


@releases
def test_a_cpu_module_is_offloaded_with_its_ties(release: str, probe_report: Report) -> None:
    assert probe_report(release)["offload_cpu"] == {
        "devices": ["cpu"],
        "values_equal": True,
        "tied": True,
        "parameters_are_parameters": True,
    }


@releases
def test_upstream_functions_of_the_module_still_work(release: str, probe_report: Report) -> None:
    assert probe_report(release)["upstream"] == {
        "get_model_device": "cpu",
        "input_is_dynamic": False,
        "unwrap_tensor_dtype_half": "torch.float16",
        "unwrap_tensor_dtype_int": "torch.int64",
        "check_output_equal_same": True,
        "check_output_equal_other": False,
    }
