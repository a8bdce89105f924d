"""specd's CPU kernels: what they compute (against gguf's own dequantization), that a row's bits do
not depend on the rows beside it or the thread count, that the AVX2, AVX-VNNI and AVX-512 code
compute the portable code's very bits, and that the paired layout AVX2 reads holds the same
weights."""

from __future__ import annotations

import os
import subprocess
import sys

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


ROWS = (1, 2, 3, 4, 5, 7, 8, 11)


def runs_here(level: str) -> bool:
    """Whether this CPU runs `level`'s kernels, read from /proc/cpuinfo's flags (the library reads
    cpuid: the two must agree)."""
    from specd.models.cpu import all_flags

    flags = all_flags()
    avx2 = {"avx2", "fma", "f16c"} <= flags
    return {"portable": True, "avx2": avx2, "avxvnni": avx2 and "avx_vnni" in flags,
            "avx512": avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"} <= flags}[level]


def highest_at_or_below(level: str) -> str:
    return next(name for name in reversed(qkernel.LEVELS[:qkernel.LEVELS.index(level) + 1]) if runs_here(name))


FAST = [name for name in qkernel.LEVELS[1:] if runs_here(name)]


FILE_TYPE = {qkernel.Q4_K_PAIRED: qkernel.Q4_K, qkernel.Q6_K_PAIRED: qkernel.Q6_K}
PAIRED = [(qkernel.Q4_K_PAIRED, 1536), (qkernel.Q6_K_PAIRED, 1536)]


def laid_out(kind: int, blocks: torch.Tensor) -> torch.Tensor:
    """The file's `blocks` as `kind` holds them (a copy, paired where `kind` is)."""
    return qkernel.relayout(FILE_TYPE[kind], blocks.clone(), kind) if kind in FILE_TYPE else blocks


@pytest.mark.skipif(not FAST, reason="this CPU has no AVX2")
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("kind,k", KINDS + [(qkernel.Q4_K, 1536), (qkernel.Q6_K, 1536)] + PAIRED)
def test_each_simd_body_computes_the_portable_bits(fast, kind, k):
    """Every row count a kernel call takes (1..8 rows at once, then more), with activations large
    enough that the integer sums and the float lanes carry real weight; paired blocks against the
    portable code on the file's own."""
    blocks = random_blocks(FILE_TYPE.get(kind, kind), 33, k, seed=4)
    x = torch.randn(max(ROWS), k, generator=torch.Generator().manual_seed(5)) * 3
    best = qkernel.level()
    try:
        assert qkernel.level(fast) == fast, "a level this CPU runs is the one forced"
        got = [qkernel.matmul(kind, laid_out(kind, blocks), x[:m]) for m in ROWS]
        assert qkernel.level("portable") == "portable"
        portable = [qkernel.matmul(FILE_TYPE.get(kind, kind), blocks, x[:m]) for m in ROWS]
    finally:
        qkernel.level(best)
    for m, a, b in zip(ROWS, got, portable):
        assert torch.equal(a, b), f"{fast} differs from the portable code with {m} rows"


def extreme_blocks(kind: int, n: int, k: int) -> torch.Tensor:
    """Blocks whose every weight and scale is the largest its bits hold: the integer sums a SIMD
    body keeps in 16 bits reach their bound (AVX2's paired runs: 2 x 2 x 63 x 127 for Q6_K)."""
    blocks = random_blocks(kind, n, k, seed=9).numpy().reshape(-1, qkernel.BLOCK[kind][1]).copy()
    if kind == qkernel.Q4_K:
        blocks[:, 4:] = 0xFF  # six-bit scales and minimums 63, every weight 15
    else:
        blocks[:, :192] = 0xFF  # every weight 63
        blocks[:, 192:208] = np.array([127, -128] * 8, np.int8).view(np.uint8)
    return torch.from_numpy(blocks.reshape(n, -1))


@pytest.mark.skipif(not FAST, reason="this CPU has no AVX2")
@pytest.mark.parametrize("fast", FAST)
@pytest.mark.parametrize("kind", [qkernel.Q4_K, qkernel.Q6_K, qkernel.Q4_K_PAIRED, qkernel.Q6_K_PAIRED])
def test_each_simd_body_holds_the_largest_sums(fast, kind):
    """Every activation at its int8 extreme (one sign per row, then mixed) against the largest
    weights: a 16-bit sum that overflowed in a fast body would change its bits."""
    k = 512
    blocks = extreme_blocks(FILE_TYPE.get(kind, kind), 8, k)
    signs = torch.tensor([1.0, -1.0]).repeat_interleave(k // 2)
    x = torch.stack([torch.full((k,), 5.0), torch.full((k,), -5.0), 5 * signs, -5 * signs])
    best = qkernel.level()
    try:
        qkernel.level(fast)
        got = qkernel.matmul(kind, laid_out(kind, blocks), x)
        qkernel.level("portable")
        portable = qkernel.matmul(FILE_TYPE.get(kind, kind), blocks, x)
    finally:
        qkernel.level(best)
    assert torch.equal(got, portable), (got, portable)
    expected = x.double() @ dequantized(FILE_TYPE.get(kind, kind), blocks).double().T
    assert torch.allclose(portable.double(), expected, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("paired", [qkernel.Q4_K_PAIRED, qkernel.Q6_K_PAIRED])
def test_the_paired_layout_holds_the_same_weights(paired):
    """Laid out and back is the file's bytes; the paired bytes differ (the quants moved) but decode
    to the same rows and products, and every kernel level lays them out alike (AVX2's vectors, the
    portable code's loops)."""
    kind = FILE_TYPE[paired]
    blocks = random_blocks(kind, 6, 512, seed=11)
    best = qkernel.level()
    try:
        by_level = {name: laid_out(paired, blocks) for name in ["portable", *FAST] if qkernel.level(name) == name}
    finally:
        qkernel.level(best)
    pairs = list(by_level.values())
    assert all(torch.equal(pairs[0], other) for other in pairs[1:]), "every level lays them out alike"
    assert not torch.equal(pairs[0], blocks), "the quants moved"
    assert torch.equal(qkernel.relayout(paired, pairs[0].clone(), kind), blocks), "and back: the file's bytes"
    ids = torch.tensor([0, 3, 5])
    assert torch.equal(qkernel.rows(paired, pairs[0], ids), qkernel.rows(kind, blocks, ids))
    x = torch.randn(3, 512, generator=torch.Generator().manual_seed(12))
    try:
        qkernel.level("portable")  # which reads paired blocks by putting a copy back
        assert torch.equal(qkernel.matmul(paired, pairs[0], x), qkernel.matmul(kind, blocks, x))
    finally:
        qkernel.level(best)
    with pytest.raises(AssertionError, match="no layout from"):
        qkernel.relayout(kind, blocks.clone(), qkernel.Q8_0)


def test_the_layout_follows_the_kernels_in_use():
    """AVX2's body reads K-quants paired; every other level (and Q8_0 everywhere) the file's own."""
    best = qkernel.level()
    try:
        for name in qkernel.LEVELS:
            if qkernel.level(name) != name:
                continue
            pairs = name == "avx2"
            assert qkernel.layout(qkernel.Q4_K) == (qkernel.Q4_K_PAIRED if pairs else qkernel.Q4_K), name
            assert qkernel.layout(qkernel.Q6_K) == (qkernel.Q6_K_PAIRED if pairs else qkernel.Q6_K), name
            assert qkernel.layout(qkernel.Q8_0) == qkernel.Q8_0
    finally:
        qkernel.level(best)


def test_the_best_level_follows_the_cpus_flags():
    from specd.models.cpu import all_flags

    if not all_flags():
        pytest.skip("no /proc/cpuinfo here")
    assert qkernel.best_level() == highest_at_or_below("avx512")
    assert qkernel.level() == highest_at_or_below(os.environ.get("SPECD_KERNELS") or "avx512"), \
        "the best unless $SPECD_KERNELS lowers it"


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


@pytest.mark.parametrize("wanted", ["portable", "avx2", "avxvnni", "bogus"])
def test_specd_kernels_chooses_lower_kernels_and_names_a_bad_value(wanted):
    env = {**os.environ, "SPECD_KERNELS": wanted}
    run = subprocess.run([sys.executable, "-c", "from specd.decoding import qkernel; print(qkernel.level())"],
                         env=env, capture_output=True, text=True, timeout=120)
    if wanted == "bogus":
        assert run.returncode != 0
        assert "SPECD_KERNELS='bogus': expected one of portable, avx2, avxvnni, avx512" in run.stderr
    else:
        assert run.returncode == 0 and run.stdout.strip() == highest_at_or_below(wanted), run.stderr
