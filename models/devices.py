"""Which device and dtype a model loads on: `auto` probes the machine (CUDA, the CPU's bf16)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from specd.decoding.loaded import ModelError

_DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
           "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError(f"device {name!r} asked for, but torch sees no CUDA device")
    return torch.device(name)


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
