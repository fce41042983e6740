"""``python -m benchmarks run own-compile``: its arguments, and its whole path on this machine,
which has no GPU and no TensorRT. A stand-in ``torch_tensorrt`` (written below, put on
``PYTHONPATH``) stands for what this machine lacks: its ``compile`` holds two copies of the
model's weights on the host for a moment, as a build holds host copies, records the keywords
it was given and returns the model; it also makes ``torch.cuda.synchronize`` a no-op, since a
CPU build of torch has no CUDA to synchronize. Everything else is the command's own code and
the compile benchmark's: the case process, the sampler process, the phase marks, the figures,
the printed table and the result file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from benchmarks import harness
from benchmarks.own_compile import run
from evidence import result as results

REPOSITORY = Path(__file__).resolve().parents[2]

STAND_IN = """
import json, os, time
import torch

torch.cuda.synchronize = lambda *args, **kwargs: None  # no CUDA on this machine
__version__ = "0.0.0+stand-in"


def compile(module, **keywords):
    copies = [p.detach().clone() for p in module.parameters() for _ in range(2)]
    time.sleep(0.3)
    keywords["inputs"] = len(keywords["inputs"])
    keywords["trim"] = os.environ.get("TORCHTRT_ENABLE_BUILDER_MALLOC_TRIM")
    with open(os.environ["STAND_IN_RECORD"], "w") as record:
        json.dump(keywords, record)
    del copies
    return module
"""
MODEL = """
import torch


def build():
    layers = [torch.nn.Linear(1024, 1024) for _ in range(16)]  # 64 MiB of fp32 weights
    return torch.nn.Sequential(*layers).eval(), [torch.randn(4, 1024)]
"""


@pytest.fixture()
def user_code(tmp_path: Path) -> Path:
    """A folder with the user's model, and the stand-ins for torch_tensorrt and TensorRT."""
    (tmp_path / "torch_tensorrt").mkdir()
    (tmp_path / "torch_tensorrt" / "__init__.py").write_text(STAND_IN, encoding="utf-8")
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "__init__.py").write_text('__version__ = "0.0"\n', encoding="utf-8")
    (tmp_path / "my_model.py").write_text(MODEL, encoding="utf-8")
    return tmp_path


def _own_compile(folder: Path, *arguments: str) -> "subprocess.CompletedProcess[str]":
    env = {**os.environ, "PYTHONPATH": str(folder), "STAND_IN_RECORD": str(folder / "kw.json")}
    command = [sys.executable, "-m", "benchmarks", "run", "own-compile", *arguments]
    return subprocess.run(
        command, cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_compile_is_measured_printed_and_written(user_code: Path) -> None:
    out = user_code / "mine.json"
    done = _own_compile(
        user_code,
        "my_model:build",
        "--offload=on",
        "--runtime=python",
        "--trim=off",
        "--option",
        "workspace_size=0",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    keywords = json.loads((user_code / "kw.json").read_text(encoding="utf-8"))
    assert keywords == {
        "ir": "dynamo",
        "inputs": 1,
        "min_block_size": 1,
        "offload_module_to_cpu": True,
        "use_python_runtime": True,
        "workspace_size": 0,
        "trim": "0",
    }
    document = results.load(out)  # the shape every benchmark writes
    (case,) = document["cases"]
    figures = case["figures"]
    assert figures["model_gib"] == pytest.approx(16 * (1024 * 1024 + 1024) * 4 / 1024**3, abs=1e-3)
    # the stand-in held two copies of the weights at once: the sampler saw about 2 W
    assert 1.5 < figures["host_peak_w"] < 3, figures
    assert case["parameters"]["runtime"] == "python" and case["parameters"]["trim"] == "off"
    assert f"host + GPU peak {figures['sum_peak_w']:.2f} W" in done.stdout
    assert f"host + GPU {figures['sum_kept_w']:.2f} W" in done.stdout
    for phase in case["series"]["phases"]:
        assert any(line.startswith(phase["name"]) for line in done.stdout.splitlines())


def test_a_failed_compile_writes_nothing(user_code: Path) -> None:
    out = user_code / "mine.json"
    done = _own_compile(user_code, "my_model:missing", "--out", str(out))
    assert done.returncode == 1 and not out.exists()
    assert done.stderr.startswith("error: the compile failed, nothing written")
    assert "AttributeError" in done.stderr


@pytest.mark.parametrize(
    "arguments, message",
    [
        pytest.param(["my_model"], "must be MODULE:FUNCTION", id="no-function"),
        pytest.param(["my_model:2x"], "must be MODULE:FUNCTION", id="not-a-name"),
        pytest.param(["m:f", "--option", "fp16"], "--option takes NAME=VALUE", id="option"),
        pytest.param(["m:f", "--offload", "yes"], "invalid choice", id="offload"),
        pytest.param(["m:f", "--option", "min_block_size=3"], "the command sets it", id="set"),
    ],
)
def test_bad_arguments_are_one_error(
    arguments: list, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        run.run(arguments)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_a_module_not_found_is_named_before_any_compile(tmp_path: Path) -> None:
    with pytest.raises(harness.BenchmarkError, match="no module 'not_there'"):
        run.run(["not_there:build", "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_option_values_are_json_or_text() -> None:
    parsed: Dict[str, object] = {
        text: run._parse_option(text) for text in ("0", "true", '"fp16"', "fp16")
    }
    assert parsed == {"0": 0, "true": True, '"fp16"': "fp16", "fp16": "fp16"}


def test_the_example_builds_a_transformers_model() -> None:
    """The documented example returns a model and inputs the model accepts (on the CPU here;
    the command builds it on the GPU)."""
    pytest.importorskip("transformers", reason="transformers is not a test requirement")
    from benchmarks.own_compile.example import small_llama

    model, inputs = small_llama(device="cpu")
    assert model(*inputs).shape == (1, 64, 32000)
