"""Which device and dtype a model loads on: `auto` probes the machine (CUDA, the CPU's bf16). The
device's decision and its reason in words are models/gpu.py's."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import torch

from specd.decoding.loaded import ModelError
from specd.models.gpu import DeviceChoice, TorchCuda, choose_device, probe_gpu

_DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
           "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}


def pick_device(name: str = "auto") -> torch.device:
    return torch.device(decide_device(name).device)


@functools.cache  # the same answer for the target and the draft, and nvidia-smi asked once
def decide_device(name: str = "auto") -> DeviceChoice:
    """The device `name` means here and why; a device that cannot be had is a ModelError."""
    choice = choose_device(name, probe_gpu(), TorchCuda.read())
    if choice.error:
        raise ModelError(choice.error)
    return choice


def check_quantize(mode: str, device: torch.device, key: str = "draft_quantize") -> None:
    """The quantized kernels are the CPU's (specd's block kernels, torch's weight-only ones,
    torch.ao's dynamic ones); gguf needs specd's kernels built."""
    if mode == "gguf" and device.type == "cpu":
        from specd.decoding.qkernel import available

        if not available():
            raise ModelError(f"models.{key} = \"gguf\" needs specd's CPU kernels, which were not built here "
                             f"(no C compiler when specd was installed): reinstall with gcc present, or set "
                             f"{key} = \"int4\"" + ("" if key == "quantize" else " or \"int8\""))
    if mode in ("int8", "int4", "gguf") and device.type != "cpu":
        raise ModelError(f"models.{key} = \"{mode}\" runs on the CPU only, but the model is on {device}: "
                         f"set {key} = \"auto\" (no quantizing there) or \"none\"")


def pick_quantize(mode: str, device: torch.device, fallback: str = "int4") -> str:
    """`auto`: on the CPU, where a pass is bound by reading the weights, the GGUF's own blocks on
    specd's kernels (the README's tables), or `fallback` on torch's where they were not built;
    none elsewhere."""
    if mode != "auto":
        return mode
    if device.type != "cpu":
        return "none"
    from specd.decoding.qkernel import available

    return "gguf" if available() else fallback


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """`auto`: bf16 where the device computes it natively, else float32 (float16 on old GPUs)."""
    if name != "auto":
        if name not in _DTYPES:
            raise ModelError(f"unknown dtype {name!r}; choose auto, {', '.join(_DTYPES)}")
        return _DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if _cpu_has_bf16() else torch.float32


def _cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return sys.platform == "darwin"  # Apple silicon computes bf16 natively
    return any(flag in flags for flag in ("avx512_bf16", "amx_bf16"))
