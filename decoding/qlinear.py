"""Weight-only quantized linear layers on torch's own CPU kernels: int8 per channel and int4 in
groups of 32.

A decoding pass of a 1.5B target reads every weight once for a few rows, so it is bound by the
bytes of its weights: int4 reads a quarter of bf16's. Torch ships the kernels
(`_weight_int8pack_mm`, `_weight_int4pack_mm_for_cpu`); the activations stay bf16 and only the
weights are stored narrow. Both kernels compute each output row from its own input row alone
(tests/decoding/test_qlinear.py: a row's bits are the same in a pass of 1 row or of 33), which
a bf16 or float32 matmul does not promise; that is what lets a keystroke's edit share a
pass with a draft without changing a bit (decoding/forward.py).

The int4 layout is the one llama.cpp's Q4_K keeps for each run of 32 weights: w = q * scale +
offset with q in 0..15, so a Q4_K_M file's sub-blocks load almost as they are (models/quantize.py);
torch's kernel takes (q - 8) * scale + zero, hence zero = offset + 8 * scale.
"""

from __future__ import annotations

import torch

GROUP = 32          # weights per int4 scale: Q4_K's sub-block
INNER_K_TILES = 2   # the packing the CPU kernel reads


class Int8Linear(torch.nn.Module):
    """y = x @ (q * scale).T + bias, q int8 [N, K], one bf16 scale per output channel."""

    def __init__(self, q: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype):
        """`dtype`: the activations' (the kernel wants the scales in it)."""
        super().__init__()
        self.register_buffer("q", q.to(torch.int8).contiguous())
        self.register_buffer("scale", scale.to(dtype).contiguous())
        self.bias = None if bias is None else torch.nn.Parameter(bias.to(dtype), requires_grad=False)
        self.out_features, self.in_features = q.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = torch._weight_int8pack_mm(rows, self.q, self.scale)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


class Int4Linear(torch.nn.Module):
    """y = x @ (q * scale + offset).T + bias, q in 0..15 packed for the CPU kernel, one scale and
    one offset per 32 weights of a row."""

    def __init__(self, packed: torch.Tensor, pairs: torch.Tensor, bias: torch.Tensor | None, dtype: torch.dtype):
        """`packed` and `pairs` as `from_layout` makes them (packing is slow: about a second for
        a 1536 x 8960 matrix here, so models/quantize.py caches what it packed); `dtype`: the
        activations' (the kernel wants the scales in it)."""
        super().__init__()
        self.register_buffer("packed", packed)
        self.register_buffer("pairs", pairs.to(dtype))
        self.out_features, self.in_features = pairs.shape[1], pairs.shape[0] * GROUP
        self.bias = None if bias is None else torch.nn.Parameter(bias.to(dtype), requires_grad=False)

    @classmethod
    def from_layout(cls, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor,
                    bias: torch.Tensor | None, dtype: torch.dtype) -> Int4Linear:
        """q [N, K] integers 0..15; scale and offset [N, K / 32]."""
        n, k = q.shape
        assert k % GROUP == 0 and scale.shape == (n, k // GROUP), f"{tuple(q.shape)} / {tuple(scale.shape)}"
        packed = torch._convert_weight_to_int4pack_for_cpu(q.to(torch.int32).contiguous(), INNER_K_TILES)
        zero = offset.float() + 8 * scale.float()
        # [K / 32, N, 2]: the kernel's order, scale then zero for each group of each output
        pairs = torch.stack([scale.float(), zero], dim=-1).transpose(0, 1).contiguous()
        return cls(packed, pairs, bias, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        y = torch._weight_int4pack_mm_for_cpu(rows, self.packed, GROUP, self.pairs)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


def int8_weights(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel: (q [N, K] int8, scale [N])."""
    w = w.float()
    scale = (w.abs().amax(dim=1) / 127).clamp(min=1e-10)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def int4_weights(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Round to nearest, asymmetric, per 32 weights: (q [N, K] 0..15, scale, offset [N, K / 32]),
    for weights no Q4_K file gave."""
    n, k = w.shape
    groups = w.float().reshape(n, k // GROUP, GROUP)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale = ((high - low) / 15).clamp(min=1e-10)
    q = torch.round((groups - low[..., None]) / scale[..., None]).clamp(0, 15).to(torch.uint8)
    return q.reshape(n, k), scale, low


def dequantized(q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """The float weights an int4 layout stands for [N, K]."""
    n, k = q.shape
    groups = q.float().reshape(n, k // GROUP, GROUP)
    return (groups * scale[..., None].float() + offset[..., None].float()).reshape(n, k)
