"""specd's CPU kernels: what they compute (against gguf's own dequantization), that a row's bits do
not depend on the rows beside it or the thread count, and that the AVX2 code computes the portable
code's very bits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specd.decoding import qkernel
from specd.decoding.blocks import BlockEmbedding, BlockLinear, q8_0

pytestmark = pytest.mark.skipif(not qkernel.available(), reason="specd's kernels were not built here")


def random_blocks(kind: int, n: int, k: int, seed: int = 0) -> torch.Tensor:
    """Random blocks of `kind` for a [n, k] weight, with sane fp16 scales (not random bits)."""
    rng = np.random.default_rng(seed)
    values, size = qkernel.BLOCK[kind]
    blocks = rng.integers(0, 256, size=(n * k // values, size), dtype=np.uint8)
    half = lambda x: np.full((len(blocks), 1), x, np.float16).view(np.uint8)  # noqa: E731
    if kind == qkernel.Q4_K:
        blocks[:, 0:2], blocks[:, 2:4] = half(0.01), half(0.003)
    elif kind == qkernel.Q6_K:
        blocks[:, 208:210] = half(0.002)
    else:
        blocks[:, 0:2] = half(0.004)
    return torch.from_numpy(blocks.reshape(n, -1))


def dequantized(kind: int, blocks: torch.Tensor) -> torch.Tensor:
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    n = blocks.shape[0]
    return torch.from_numpy(dequantize(blocks.numpy(), GGMLQuantizationType(kind)).reshape(n, -1).astype(np.float32))


KINDS = [(qkernel.Q4_K, 512), (qkernel.Q6_K, 768), (qkernel.Q8_0, 96)]


@pytest.mark.parametrize("kind,k", KINDS)
def test_matmul_computes_the_dequantized_product(kind, k):
    blocks = random_blocks(kind, 40, k)
    x = torch.randn(5, k, generator=torch.Generator().manual_seed(1))
    expected = x.double() @ dequantized(kind, blocks).double().T
    got = qkernel.matmul(kind, blocks, x)
    assert got.dtype == torch.float32 and got.shape == (5, 40)
    # the activations are int8 in blocks: about 1/254 of each block's largest value per element
    assert float((got.double() - expected).abs().max()) < 0.02 * float(expected.abs().max())


@pytest.mark.parametrize("kind,k", KINDS)
def test_a_rows_bits_are_its_own(kind, k):
    blocks = random_blocks(kind, 70, k, seed=2)
    x = torch.randn(13, k, generator=torch.Generator().manual_seed(3))
    together = qkernel.matmul(kind, blocks, x)
    for i in (0, 4, 12):
        assert torch.equal(qkernel.matmul(kind, blocks, x[i:i + 1])[0], together[i]), f"row {i} alone"
    assert torch.equal(qkernel.matmul(kind, blocks, x[3:9]), together[3:9])
    before = qkernel.threads(1)
    try:
        assert torch.equal(qkernel.matmul(kind, blocks, x), together), "one thread computes the same"
    finally:
        qkernel.threads(before)


@pytest.mark.parametrize("kind,k", KINDS)
def test_the_kernels_bias_is_torchs_add(kind, k):
    blocks = random_blocks(kind, 24, k, seed=4)
    x = torch.randn(6, k, generator=torch.Generator().manual_seed(5))
    bias = torch.randn(24, generator=torch.Generator().manual_seed(6)) * 3
    assert torch.equal(qkernel.matmul(kind, blocks, x, bias), qkernel.matmul(kind, blocks, x) + bias)
    layer = BlockLinear(kind, blocks, k, bias)
    assert torch.equal(layer(x), qkernel.matmul(kind, blocks, x) + bias)


@pytest.mark.skipif(not qkernel.uses_avx2(), reason="this CPU has no AVX2")
@pytest.mark.parametrize("kind,k", KINDS)
def test_avx2_computes_the_portable_bits(kind, k):
    blocks = random_blocks(kind, 33, k, seed=4)
    x = torch.randn(6, k, generator=torch.Generator().manual_seed(5)) * 3
    fast = qkernel.matmul(kind, blocks, x)
    qkernel.uses_avx2(0)
    try:
        portable = qkernel.matmul(kind, blocks, x)
    finally:
        qkernel.uses_avx2(1)
    assert torch.equal(fast, portable)


@pytest.mark.parametrize("kind,k", KINDS)
def test_rows_are_the_dequantized_rows(kind, k):
    blocks = random_blocks(kind, 20, k, seed=6)
    ids = torch.tensor([[0, 19], [7, 7]])
    got = BlockEmbedding(kind, blocks, k)(ids)
    assert got.shape == (2, 2, k)
    assert torch.equal(got, dequantized(kind, blocks)[ids])


def test_q8_0_is_ggufs_q8_0():
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    w = torch.randn(16, 128, generator=torch.Generator().manual_seed(7))
    ours = q8_0(w)
    theirs = quantize(w.numpy(), GGMLQuantizationType.Q8_0).view(np.uint8).reshape(16, -1)
    # the same scales, and the same integers but where a value sits on a rounding tie
    assert (ours.numpy() != theirs).mean() < 0.01
    linear = BlockLinear(qkernel.Q8_0, ours, 128, bias=torch.ones(16))
    x = torch.randn(2, 128, generator=torch.Generator().manual_seed(8))
    expected = x @ w.T + 1
    assert float((linear(x) - expected).abs().max()) < 0.02 * float(expected.abs().max())


def test_shapes_the_blocks_cannot_hold_are_refused():
    with pytest.raises(AssertionError, match="multiple of 256"):
        qkernel.row_bytes(qkernel.Q4_K, 96)
    blocks = random_blocks(qkernel.Q8_0, 4, 64)
    with pytest.raises(AssertionError, match="blocks for rows of"):
        qkernel.matmul(qkernel.Q8_0, blocks, torch.randn(1, 96))
    with pytest.raises(AssertionError, match="within the vocabulary"):
        qkernel.rows(qkernel.Q8_0, blocks, torch.tensor([4]))
