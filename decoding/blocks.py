"""Linear layers and embeddings whose weights stay in GGUF's blocks (Q4_K, Q6_K, Q8_0), computed by
specd's kernels (decoding/qkernel.py): float32 in, float32 out.

A model loaded this way runs everything between the matmuls (norms, rotary, attention, the
residual stream, the KV cache) in float32, which every x86 CPU computes natively; bf16 is emulated
on CPUs without avx512_bf16, several times slower. The weights are the file's bytes: nothing dense
is kept beside them, the embedding included (a lookup decodes its few rows).
"""

from __future__ import annotations

import torch

from specd.decoding import qkernel


class BlockLinear(torch.nn.Module):
    """y = x @ W.T + bias, W [out, in] held as `blocks` [out, bytes per row] of GGML type `kind`."""

    def __init__(self, kind: int, blocks: torch.Tensor, in_features: int, bias: torch.Tensor | None = None):
        super().__init__()
        assert blocks.shape[1] == qkernel.row_bytes(kind, in_features), "blocks hold rows of in_features values"
        self.kind, self.in_features, self.out_features = kind, in_features, blocks.shape[0]
        self.register_buffer("blocks", blocks.contiguous())
        self.bias = None if bias is None else torch.nn.Parameter(bias.float().contiguous(), requires_grad=False)
        assert bias is None or bias.shape == (self.out_features,), "a bias of out_features values"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return qkernel.checked_matmul(self.kind, self.blocks, x, self.bias)

    def extra_repr(self) -> str:
        return (f"{qkernel.NAMES[self.kind]}, in={self.in_features}, out={self.out_features}, "
                f"bias={self.bias is not None}")


class BlockEmbedding(torch.nn.Module):
    """An embedding whose table is held as blocks: each lookup decodes only the rows it needs."""

    def __init__(self, kind: int, blocks: torch.Tensor, dim: int):
        super().__init__()
        assert blocks.shape[1] == qkernel.row_bytes(kind, dim), "blocks hold rows of dim values"
        self.kind, self.embedding_dim, self.num_embeddings = kind, dim, blocks.shape[0]
        self.register_buffer("blocks", blocks.contiguous())

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return qkernel.rows(self.kind, self.blocks, ids)

    def extra_repr(self) -> str:
        return f"{qkernel.NAMES[self.kind]}, {self.num_embeddings} x {self.embedding_dim}"


def has_blocks(model: torch.nn.Module) -> bool:
    """Whether any of `model`'s linear layers run on specd's kernels."""
    return any(isinstance(m, BlockLinear) for m in model.modules())


def q8_0(weight: torch.Tensor) -> torch.Tensor:
    """A dense weight [N, K] (K a multiple of 32) as Q8_0 blocks [N, K / 32 * 34]: per 32 values
    an fp16 scale (max |w| / 127) and 32 int8, rounded to nearest; for layers no GGUF file gave."""
    n, k = weight.shape
    assert k % 32 == 0, f"Q8_0 rows hold a multiple of 32 values, not {k}"
    groups = weight.float().reshape(n, k // 32, 32)
    scale = (groups.abs().amax(dim=-1) / 127).to(torch.float16)                     # [N, K / 32]
    inverse = torch.where(scale == 0, 0.0, 1.0 / scale.float())
    q = torch.round(groups * inverse[..., None]).clamp(-127, 127).to(torch.int8)     # [N, K / 32, 32]
    blocks = torch.cat([scale.view(torch.uint8).reshape(n, k // 32, 2), q.view(torch.uint8)], dim=-1)
    return blocks.reshape(n, k // 32 * 34).contiguous()
