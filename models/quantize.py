"""Quantize a loaded model's linear layers to int8 or int4 weights, once, and cache the result.

The plan, per linear layer (decoding/qlinear.py has the kernels):
- int4: the layer's Q4_K blocks where the converted GGUF left them (models/groups.py), so the
  built-in target keeps its own quantization; int8 for the layers that file stored at a higher
  precision (Q6_K: the output layer and some value and down projections), since rounding them to
  int4 would lose what the file kept; with no GGUF behind the folder, int4 by rounding to nearest,
  except the output layer (int8: its errors land straight on the logits).
- int8: every layer, per channel.
The embedding stays bf16 (a lookup, not a matmul). The packed tensors are saved under
<cache>/quantized/, keyed by the folder's weight files, torch's version and the CPU's
instructions (the packed layout is the kernel's), so a restart loads them in seconds: packing
alone takes over a minute for the 1.5B here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

import torch

from specd.decoding.qlinear import Int4Linear, Int8Linear, dequantized, int4_weights, int8_weights
from specd.models.groups import read_groups, unpack

log = logging.getLogger("specd.models")

KINDS = ("none", "int8", "int4", "gguf")  # gguf: models/blocks.py
VERSION = 1  # of the cached layout: raise it when what is saved changes
ALIGN = 64   # bytes: what the CPU kernels may assume of a tensor's start


def quantize(model: torch.nn.Module, folder: Path, kind: str, cache_dir: Path,
             say: Callable[[str], None] = log.info) -> dict[str, int]:
    """Replace `model`'s linear layers in place; return how many layers got each weight kind."""
    assert kind in ("int8", "int4"), kind
    path = cache_dir / "quantized" / f"{folder.name}-{weight_key(folder)}-{kind}.safetensors"
    tensors = read_cached(path)
    if tensors is None:
        say(f"quantizing {folder.name} to {kind}; this happens once")
        tensors = _plan(model, folder, kind)
        write_cached(path, tensors)
    counts = {"int8": 0, "int4": 0}
    for name, linear in _linears(model):
        if f"{name}.packed" in tensors:
            layer = Int4Linear(tensors[f"{name}.packed"], tensors[f"{name}.pairs"], linear.bias, linear.weight.dtype)
            counts["int4"] += 1
        else:
            layer = Int8Linear(tensors[f"{name}.q8"], tensors[f"{name}.scale"], linear.bias, linear.weight.dtype)
            counts["int8"] += 1
        model.set_submodule(name, layer)
    return counts


def _linears(model: torch.nn.Module) -> list[tuple[str, torch.nn.Linear]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)]


def _plan(model: torch.nn.Module, folder: Path, kind: str) -> dict[str, torch.Tensor]:
    """Each layer's buffers, as the layer classes hold them."""
    groups = read_groups(folder) if kind == "int4" else {}
    out: dict[str, torch.Tensor] = {}
    for name, linear in _linears(model):
        weight = linear.weight.detach()
        layout = _from_groups(name, groups, weight) if name in groups else None
        if layout is None and kind == "int4" and not groups and name != "lm_head":
            layout = int4_weights(weight)
        if layout is not None:
            layer = Int4Linear.from_layout(*layout, bias=None, dtype=torch.float32)  # saved at full precision
            out[f"{name}.packed"], out[f"{name}.pairs"] = layer.packed, layer.pairs
        else:
            out[f"{name}.q8"], out[f"{name}.scale"] = int8_weights(weight)
    return out


def _from_groups(name: str, groups: dict[str, torch.Tensor], weight: torch.Tensor):
    """The file's Q4_K layout for `name`, if it is the weight the folder holds: the converted bf16
    weight is this layout dequantized, so anything else (a name mapped wrongly, rows permuted by
    the conversion) would show as a difference."""
    q, scale, offset = unpack(groups[name])
    if q.shape != weight.shape or not torch.equal(dequantized(q, scale, offset).to(weight.dtype), weight):
        log.warning("%s: its Q4_K blocks do not give the converted weights; rounding it to int4 instead", name)
        return int4_weights(weight)
    return q, scale, offset


def weight_key(folder: Path) -> str:
    """Names, sizes and times of the folder's weights and groups: a changed folder is quantized again."""
    # the packed int4 layout is the kernel's, which may change with torch or the CPU's instructions
    stamps = [VERSION, torch.__version__, torch.backends.cpu.get_cpu_capability()]
    for f in sorted([*folder.glob("*.safetensors")]):
        stat = f.stat()
        stamps.append((f.name, stat.st_size, stat.st_mtime_ns))
    return hashlib.sha256(json.dumps(stamps).encode()).hexdigest()[:16]


def read_cached(path: Path) -> dict[str, torch.Tensor] | None:
    if not path.is_file():
        return None
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (SafetensorError, OSError) as error:  # half-written or damaged: quantize again
        log.warning("%s is unreadable (%s); quantizing again", path, error)
        return None
    # A safetensors file's tensors lie at 8-byte offsets; torch's AVX-512 int4 kernel reads its
    # packed weights with aligned loads and crashes on them (seen on an AVX-512 CPU, not on AVX2).
    # A copy is in memory from torch's allocator, which aligns to 64 bytes.
    return {name: tensor.clone() if tensor.data_ptr() % ALIGN else tensor for name, tensor in tensors.items()}


def write_cached(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Write `tensors` (and string `metadata`) to `path` whole or not at all; a write that fails
    leaves no partial file behind."""
    from safetensors.torch import save_file

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.partial-{os.getpid()}")
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(partial), metadata=metadata)
        os.replace(partial, path)  # a quantization killed halfway leaves no file that is read
    except OSError:
        partial.unlink(missing_ok=True)
        raise
