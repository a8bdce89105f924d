"""Settings that make CUDA compute the same bits for the same pass every time: set once, before the
models load.

On a GPU, exactness needs more than fixed shapes (decoding/forward.py): some kernels sum in an
order that depends on timing (atomics, split reductions), cuBLAS may pick among algorithms per
call, SDPA picks a backend per shape, and reduced-precision reductions in bf16/fp16 matmuls and
TF32 change bits where they are allowed. So: deterministic algorithms (an op without a
deterministic kernel raises, which start-up would show), a fixed cuBLAS workspace (cuBLAS reads
CUBLAS_WORKSPACE_CONFIG when it creates its handle, so it must be set before the first matmul),
no TF32 and no reduced-precision reductions, cuDNN without autotuning, and one SDPA backend: the
memory-efficient kernel takes the static cache's explicit mask, is deterministic in the forward
pass and serves every width alike (flash takes no mask; cuDNN's is chosen per shape); the math
kernel stays allowed as the fallback for inputs the efficient one refuses, which depend on dtype
and head size, never on the pass's width. What remains is measured at start-up: the width probe
runs every width twice (decoding/widths.py) and refuses to start if a width disagrees with itself.

Each setting is guarded: the GPU machine may run another torch than our pin.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field

import torch

CUBLAS_WORKSPACE = ":4096:8"  # one of the two values cuBLAS documents as deterministic


@dataclass
class Applied:
    """What `make_deterministic` set, for the start-up log and the tests."""
    settings: dict[str, object] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # not in this torch

    def __str__(self) -> str:
        done = ", ".join(f"{k}={v}" for k, v in self.settings.items())
        return done + (f" (not in this torch: {', '.join(self.skipped)})" if self.skipped else "")


def make_deterministic(device: torch.device) -> Applied:
    """Apply the settings for `device`; on the CPU nothing changes (its kernels are chosen by
    shape alone, which the fixed widths handle)."""
    applied = Applied()
    if device.type != "cuda":
        return applied
    # An earlier, different value is the user's to keep only if it is also deterministic.
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG") not in (":4096:8", ":16:8"):
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    applied.settings["CUBLAS_WORKSPACE_CONFIG"] = os.environ["CUBLAS_WORKSPACE_CONFIG"]
    torch.use_deterministic_algorithms(True)
    applied.settings["use_deterministic_algorithms"] = True
    # Deterministic mode also fills every new tensor with NaN by default: no bits change in code
    # that writes before it reads, and it costs a kernel per allocation.
    _set(applied, "torch.utils.deterministic", "fill_uninitialized_memory", False)
    _set(applied, "torch.backends.cudnn", "deterministic", True)
    _set(applied, "torch.backends.cudnn", "benchmark", False)
    for module in ("torch.backends.cuda.matmul", "torch.backends.cudnn"):
        if hasattr(_resolve(module), "fp32_precision"):  # torch 2.9's API; it refuses a mix with the old one
            _set(applied, module, "fp32_precision", "ieee")
        else:
            _set(applied, module, "allow_tf32", False)
    _set(applied, "torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction", False)
    _set(applied, "torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction", False)
    if hasattr(torch.backends.cuda, "allow_fp16_bf16_reduction_math_sdp"):
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(False)
        applied.settings["torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp"] = False
    pin_sdpa_backend(applied)
    return applied


def pin_sdpa_backend(applied: Applied) -> None:
    """The memory-efficient kernel for every pass (math where it refuses the inputs)."""
    for name, on in (("enable_flash_sdp", False), ("enable_cudnn_sdp", False),
                     ("enable_mem_efficient_sdp", True), ("enable_math_sdp", True)):
        switch = getattr(torch.backends.cuda, name, None)
        if switch is None:
            applied.skipped.append(f"torch.backends.cuda.{name}")
            continue
        switch(on)
        applied.settings[f"torch.backends.cuda.{name}"] = on


def _set(applied: Applied, module: str, name: str, value: object) -> None:
    target = _resolve(module)
    if target is None or not hasattr(target, name):
        applied.skipped.append(f"{module}.{name}")
        return
    setattr(target, name, value)
    applied.settings[f"{module}.{name}"] = value


def _resolve(path: str) -> object | None:
    """A torch module or settings object by its dotted name, or None where this torch has none."""
    try:
        return importlib.import_module(path)
    except ImportError:  # `torch.backends.cuda.matmul` is an object, not a module
        pass
    target: object | None = torch
    for part in path.split(".")[1:]:
        target = getattr(target, part, None)
    return target
