"""A GGUF file's Q4_K blocks, kept beside its converted folder so an int4 target can load them
almost as they are.

Converting a GGUF dequantizes it to bf16 (models/convert.py), and the GGUF itself is not kept.
An int4 target quantized again from those bf16 weights, by rounding to nearest, matches the
original's first line on about half our quality cases; one built from the file's own Q4_K
sub-blocks (32 weights, one scale and one minimum each) is the file's quantization, up to bf16
rounding of the scales. So conversion also writes the raw Q4_K blocks of each linear layer into
one safetensors file here, and models/quantize.py decodes them. Layers the file stores otherwise
(Q4_K_M keeps some in Q6_K) are not in it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

GROUPS = "specd-q4k-groups.safetensors"
BLOCK_BYTES = 144   # Q4_K: d, dmin (fp16), 12 bytes of 6-bit scales and minimums, 128 of nibbles

_LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj"}


def hf_name(gguf_name: str) -> str | None:
    """The transformers module of a GGUF weight (`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj`)."""
    if gguf_name == "output.weight":
        return "lm_head"
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if match and match.group(2) in _LAYER:
        return f"model.layers.{match.group(1)}.{_LAYER[match.group(2)]}"
    return None


def write_groups(gguf: Path, folder: Path) -> int:
    """Copy the Q4_K blocks of `gguf`'s linear layers into `folder`/GROUPS; return how many."""
    from gguf import GGMLQuantizationType, GGUFReader
    from safetensors.torch import save_file

    blocks = {}
    for tensor in GGUFReader(gguf).tensors:
        name = hf_name(tensor.name)
        if name is None or tensor.tensor_type != GGMLQuantizationType.Q4_K:
            continue
        out_features = int(tensor.shape[1])  # GGUF lists the inner dimension first
        raw = np.ascontiguousarray(tensor.data).view(np.uint8).reshape(out_features, -1)
        blocks[name] = torch.from_numpy(raw.copy())
    if blocks:
        partial = folder / f"{GROUPS}.partial"
        save_file(blocks, str(partial))
        partial.replace(folder / GROUPS)
    return len(blocks)


def read_groups(folder: Path) -> dict[str, torch.Tensor]:
    """The raw Q4_K blocks per module name, [out_features, bytes per row]; empty if none."""
    path = folder / GROUPS
    if not path.is_file():
        return {}
    from safetensors.torch import load_file

    return load_file(str(path))


def unpack(raw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Q4_K rows -> (q [N, K] 0..15, scale, offset [N, K / 32] float32), w = q * scale + offset,
    decoded as gguf's own Q4_K.dequantize_blocks decodes them."""
    from gguf.quants import Q4_K

    n = raw.shape[0]
    blocks = raw.numpy().reshape(-1, BLOCK_BYTES)
    d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)          # [B, 1]
    dmin = blocks[:, 2:4].copy().view(np.float16).astype(np.float32)
    sc, m = Q4_K.get_scale_min(blocks[:, 4:16])                           # [B, 8] each
    scale = d * sc.astype(np.float32)
    offset = -(dmin * m.astype(np.float32))
    qs = blocks[:, 16:].reshape(-1, 4, 1, 32) >> np.array([0, 4], dtype=np.uint8).reshape(1, 1, 2, 1)
    q = (qs & np.uint8(0x0F)).reshape(n, -1)
    return (torch.from_numpy(q.copy()), torch.from_numpy(scale.reshape(n, -1).copy()),
            torch.from_numpy(offset.reshape(n, -1).copy()))
