"""A GGUF file's own quantized blocks, kept beside its converted folder so a target loads the file's
quantization as it is.

Converting a GGUF dequantizes it to bf16 (models/convert.py), and the GGUF itself is not kept.
A target quantized again from those bf16 weights is not the file's model: int4 by rounding to
nearest matched the original's first line on about half our quality cases. So conversion also
writes the raw blocks of each linear layer and of the embedding, in the types specd's kernels
read (Q4_K, Q6_K, Q8_0: decoding/qkernel.py), into one safetensors file here, each tensor's type
in its metadata. The `gguf` weights (models/blocks.py) use them all, byte for byte; the `int4`
weights (torch's kernel, models/quantize.py) decode the Q4_K ones.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

GROUPS = "specd-gguf-blocks.safetensors"
OLD_GROUPS = "specd-q4k-groups.safetensors"  # what older versions kept (Q4_K only): replaced
BLOCK_BYTES = 144   # Q4_K: d, dmin (fp16), 12 bytes of 6-bit scales and minimums, 128 of nibbles
KEPT = {"Q4_K": 12, "Q6_K": 14, "Q8_0": 8}  # GGML types the kernels read, by name and number

_LAYER = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj"}


def hf_name(gguf_name: str) -> str | None:
    """The transformers module of a GGUF weight (`blk.3.attn_q.weight` -> `model.layers.3.self_attn.q_proj`)."""
    if gguf_name == "output.weight":
        return "lm_head"
    if gguf_name == "token_embd.weight":
        return "model.embed_tokens"
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if match and match.group(2) in _LAYER:
        return f"model.layers.{match.group(1)}.{_LAYER[match.group(2)]}"
    return None


def write_groups(gguf: Path, folder: Path) -> int:
    """Copy the blocks of `gguf`'s linear layers and embedding that are in a kept type into
    `folder`/GROUPS; return how many tensors."""
    from gguf import GGUFReader
    from safetensors.torch import save_file

    blocks, types = {}, {}
    for tensor in GGUFReader(gguf).tensors:
        name = hf_name(tensor.name)
        if name is None or tensor.tensor_type.name not in KEPT:
            continue
        out_features = int(tensor.shape[1])  # GGUF lists the inner dimension first
        raw = np.ascontiguousarray(tensor.data).view(np.uint8).reshape(out_features, -1)
        blocks[name], types[name] = torch.from_numpy(raw.copy()), tensor.tensor_type.name
    if blocks:
        partial = folder / f"{GROUPS}.partial"
        save_file(blocks, str(partial), metadata=types)
        partial.replace(folder / GROUPS)
    (folder / OLD_GROUPS).unlink(missing_ok=True)
    return len(blocks)


def read_blocks(folder: Path) -> dict[str, tuple[int, torch.Tensor]]:
    """(GGML type, raw blocks [out_features, bytes per row]) per module name; empty if none."""
    path = folder / GROUPS
    if not path.is_file():
        return {}
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        types = f.metadata() or {}
        return {name: (KEPT[types[name]], f.get_tensor(name)) for name in f.keys() if types.get(name) in KEPT}


def read_groups(folder: Path) -> dict[str, torch.Tensor]:
    """The raw Q4_K blocks of the linear layers per module name, [out_features, bytes per row]."""
    return {name: raw for name, (kind, raw) in read_blocks(folder).items()
            if kind == KEPT["Q4_K"] and name != "model.embed_tokens"}


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
