"""Finding a GPU and deciding from it (models/gpu.py): which torch `make setup` installs, which
device `auto` means and why. The decisions are pure functions of what was found; the probe runs
for real on this machine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from specd.decoding.loaded import ModelError
from specd.models.devices import check_quantize
from specd.models.gpu import GpuProbe, TorchCuda, choose_device, parse_cuda_version, parse_names, probe_gpu, torch_plan

ROOT = Path(__file__).resolve().parents[2]
SMI = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.03             Driver Version: 580.159.03     CUDA Version: 13.0     |
|-----------------------------------------+------------------------+----------------------+
"""
H200 = GpuProbe(("/dev/nvidia0",), True, ("NVIDIA H200",), (13, 0))
NONE = GpuProbe()
CPU_TORCH = TorchCuda("2.13.0+cpu", None, False)
CUDA_TORCH = TorchCuda("2.13.0+cu130", "13.0", True, "NVIDIA H200")


def test_nvidia_smi_is_read_for_the_drivers_cuda_and_the_names():
    assert parse_cuda_version(SMI) == (13, 0)
    assert parse_cuda_version("no table here") is None
    assert parse_names("GPU 0: NVIDIA H200 (UUID: GPU-1234)\nGPU 1: NVIDIA A10G (UUID: GPU-5678)\n") == (
        "NVIDIA H200", "NVIDIA A10G")


@pytest.mark.parametrize("driver, build", [((13, 0), "cu130"), ((13, 2), "cu130"), ((12, 9), "cu128"),
                                           ((12, 6), "cu126")])
def test_a_gpu_gets_the_newest_cuda_build_its_driver_runs(driver, build):
    plan = torch_plan(GpuProbe((), True, ("NVIDIA L4",), driver))
    assert plan.args[0] == f"torch==2.13.0+{build}", "a requirement no CPU file satisfies"
    assert plan.args[1:3] == ("--index-url", f"https://download.pytorch.org/whl/{build}")
    assert build in plan.reason and "NVIDIA L4" in plan.reason


def test_no_gpu_keeps_the_cpu_pin():
    plan = torch_plan(NONE)
    assert plan.args == ("torch==2.13.0",) and "no NVIDIA GPU" in plan.reason


def test_device_nodes_without_nvidia_smi_keep_the_cpu_pin_and_say_why():
    plan = torch_plan(GpuProbe(("/dev/nvidia0",)))
    assert plan.args == ("torch==2.13.0",) and "nvidia-smi does not answer" in plan.reason


def test_a_driver_too_old_for_every_build_keeps_the_cpu_pin_and_says_so():
    plan = torch_plan(GpuProbe((), True, ("Tesla K80",), (11, 4)))
    assert plan.args == ("torch==2.13.0",) and "update the NVIDIA driver" in plan.reason


def test_the_choice_can_be_forced():
    assert torch_plan(H200, "cpu").args == ("torch==2.13.0",)
    assert torch_plan(NONE, "cu126").args[0] == "torch==2.13.0+cu126"


def test_auto_takes_cuda_where_torch_sees_it():
    choice = choose_device("auto", H200, CUDA_TORCH)
    assert choice.device == "cuda:0" and "NVIDIA H200" in choice.reason and choice.warning is None


def test_a_gpu_that_a_cpu_torch_cannot_use_is_said_in_one_line_with_the_fix():
    choice = choose_device("auto", H200, CPU_TORCH)
    assert choice.device == "cpu" and choice.error is None
    assert "\n" not in choice.warning
    assert "GPU is present (nvidia-smi: NVIDIA H200, driver CUDA 13.0)" in choice.warning
    assert "torch 2.13.0+cpu is a CPU build" in choice.warning
    assert "make setup" in choice.warning and "torch==2.13.0+cu130" in choice.warning


def test_a_cuda_torch_the_driver_cannot_run_is_said_too():
    choice = choose_device("auto", H200, TorchCuda("2.13.0+cu130", "13.0", False))
    assert choice.device == "cpu" and "cannot use it" in choice.warning and "driver" in choice.warning


def test_no_gpu_means_the_cpu_quietly():
    choice = choose_device("auto", NONE, CPU_TORCH)
    assert choice.device == "cpu" and choice.warning is None and "no NVIDIA GPU" in choice.reason


def test_asking_for_cuda_without_it_is_an_error_that_says_why():
    choice = choose_device("cuda", H200, CPU_TORCH)
    assert choice.device == "" and "models.device = 'cuda'" in choice.error and "CPU build" in choice.error
    assert choose_device("cuda:1", H200, CUDA_TORCH).device == "cuda:1"
    assert choose_device("cpu", H200, CUDA_TORCH).device == "cpu"
    assert "choose auto, cpu, cuda" in choose_device("tpu", NONE, CPU_TORCH).error


def test_int8_draft_weights_on_cuda_are_refused_clearly():
    check_quantize("int8", torch.device("cpu"))
    check_quantize("auto", torch.device("cuda"))
    with pytest.raises(ModelError, match="draft_quantize = \"int8\" runs on the CPU only, but the model is on cuda"):
        check_quantize("int8", torch.device("cuda"))


def test_the_probe_reads_this_machine(tmp_path):
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()  # not a GPU's node
    found = probe_gpu(tmp_path)
    assert found.device_nodes == (str(tmp_path / "nvidia0"),) and found.present
    assert found.smi_ok == (shutil.which("nvidia-smi") is not None and
                            subprocess.run(["nvidia-smi"], capture_output=True).returncode == 0)


def test_the_makefile_asks_the_script_with_no_package_installed():
    """`python models/gpu.py pip-args` runs on the standard library alone, before torch exists."""
    done = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "models" / "gpu.py"), "pip-args"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == list(torch_plan(probe_gpu()).args)
    assert done.stderr.startswith("torch: the ")
