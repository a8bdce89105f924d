"""specd's attention kernel (kernels/attend.c): what it computes (torch's attention over the same
keys and values, to float32's rounding), that a row's bits are its own (whatever shares its pass,
however long the cache), that the AVX2 body computes the portable body's very bits, and that the
cache's halves are rounded as torch rounds them (kernels/half.h)."""

from __future__ import annotations

import pytest
import torch

from specd.decoding import qkernel

pytestmark = pytest.mark.skipif(not qkernel.available(), reason="specd's kernels were not built here")

# heads, key/value heads, head size: the 1.5B, the 0.5B, plain, and a group wider than the heads swept at once (8)
SHAPES = [(12, 2, 128), (14, 2, 64), (4, 4, 16), (20, 1, 32)]


def tensors(heads: int, kv_heads: int, d: int, s: int, capacity: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(s, heads, d, generator=g) * 2       # peaked scores: the softmax's rescaling matters
    return q, *(qkernel.halves(torch.randn(kv_heads, capacity, d, generator=g)) for _ in range(2))


def reference(q, keys, values, start: int, scale: float) -> torch.Tensor:
    """torch's attention in float64: row r sees positions 0..start + r."""
    s, heads, d = q.shape
    seen = start + s
    visible = torch.arange(seen)[None, :] <= torch.arange(start, seen)[:, None]
    out = torch.nn.functional.scaled_dot_product_attention(
        q.double().transpose(0, 1)[None], keys[None, :, :seen].double(), values[None, :, :seen].double(),
        attn_mask=visible, scale=scale, enable_gqa=True)
    return out[0].transpose(0, 1).reshape(s, heads * d)


@pytest.mark.parametrize("heads,kv_heads,d", SHAPES)
@pytest.mark.parametrize("start,s", [(0, 1), (0, 37), (70, 5), (1000, 8)])
def test_attend_computes_causal_grouped_attention(heads, kv_heads, d, start, s):
    q, keys, values = tensors(heads, kv_heads, d, s, 1100)
    got = qkernel.attend(q, keys, values, start, d ** -0.5)
    assert got.shape == (s, heads * d) and got.dtype == torch.float32
    assert float((got.double() - reference(q, keys, values, start, d ** -0.5)).abs().max()) < 1e-5


@pytest.mark.parametrize("heads,kv_heads,d", SHAPES[:2])
def test_a_rows_bits_are_its_own(heads, kv_heads, d):
    """Rows in one pass, one by one, in other chunks, and over a longer cache holding the same keys."""
    q, keys, values = tensors(heads, kv_heads, d, 40, 300, seed=1)
    start, scale = 200, d ** -0.5
    whole = qkernel.attend(q, keys, values, start, scale)
    alone = torch.cat([qkernel.attend(q[r:r + 1].contiguous(), keys, values, start + r, scale) for r in range(40)])
    chunks = torch.cat([qkernel.attend(q[r:r + 13].contiguous(), keys, values, start + r, scale)
                        for r in range(0, 40, 13)])
    longer_k, longer_v = (torch.cat([t, torch.randn(kv_heads, 500, d).half()], dim=1).contiguous()
                          for t in (keys, values))
    longer = qkernel.attend(q, longer_k, longer_v, start, scale)
    assert torch.equal(whole, alone) and torch.equal(whole, chunks) and torch.equal(whole, longer)


def test_one_thread_or_two_give_the_same_bits():
    q, keys, values = tensors(12, 2, 128, 9, 600, seed=2)
    used = qkernel.threads(2)
    try:
        two = qkernel.attend(q, keys, values, 500, 0.09)
        qkernel.threads(1)
        one = qkernel.attend(q, keys, values, 500, 0.09)
    finally:
        qkernel.threads(used)
    assert torch.equal(one, two)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_heads_bits_do_not_depend_on_the_heads_swept_beside_it(threads):
    """The heads of a group share each block of keys (in units of up to 8, as many as keep the
    threads busy): each head alone, as a group of one, gives the grouped call's bits."""
    q, keys, values = tensors(20, 1, 32, 3, 200, seed=4)
    used = qkernel.threads(threads)
    try:
        whole = qkernel.attend(q, keys, values, 150, 0.2)
        alone = torch.cat([qkernel.attend(q[:, h:h + 1].contiguous(), keys, values, 150, 0.2) for h in range(20)],
                          dim=1)
    finally:
        qkernel.threads(used)
    assert torch.equal(whole, alone)


@pytest.mark.skipif(qkernel.best_level() == "portable", reason="this CPU has no AVX2")
@pytest.mark.parametrize("heads,kv_heads,d", SHAPES)
def test_the_avx2_body_computes_the_portable_bits(heads, kv_heads, d):
    """Positions that end a softmax block and a group of eight keys anywhere (not just whole ones)."""
    q, keys, values = tensors(heads, kv_heads, d, 45, 400, seed=3)
    best = qkernel.level()
    try:
        qkernel.level("avx2")
        fast = qkernel.attend(q, keys, values, 300, d ** -0.5)
        qkernel.level("portable")
        portable = qkernel.attend(q, keys, values, 300, d ** -0.5)
    finally:
        qkernel.level(best)
    assert torch.equal(fast, portable)


@pytest.mark.parametrize("change,message", [
    (lambda q, k, v: (q, k, v, 1095), "within"),                          # positions past the cache
    (lambda q, k, v: (q[:, :5].contiguous(), k, v, 0), "heads on"),       # heads not a multiple of kv heads
    (lambda q, k, v: (q.double(), k, v, 0), "float32"),
    (lambda q, k, v: (q, k.float(), v.float(), 0), "keys and values"),    # a cache of float32
    (lambda q, k, v: (q.transpose(0, 1), k, v, 0), "contiguous"),
    (lambda q, k, v: (q, k, v[:, :, :64].contiguous(), 0), "keys and values"),
])
def test_shapes_it_cannot_take_are_refused(change, message):
    q, keys, values = tensors(12, 2, 128, 8, 1100)
    q2, k2, v2, start = change(q, keys, values)
    with pytest.raises(AssertionError, match=message):
        qkernel.attend(q2, k2, v2, start, 0.1)


def test_the_cache_is_rounded_to_halves_as_torch_rounds_them():
    """To nearest, ties to even, through subnormals and overflow: the bits torch's .half() gives, so
    the torch ops' passes and a layer's one call write the same cache."""
    edges = torch.tensor([0.0, -0.0, 65504.0, 65519.99, 65520.0, -65520.0, 1e9, float("inf"), -float("inf"),
                          2 ** -24, 2 ** -25, 2 ** -25 * 1.0001, 3 * 2 ** -25, 2 ** -14, 2 ** -14 * (1 - 2 ** -11),
                          1e-10, 1 + 2 ** -11, 1 + 3 * 2 ** -11])
    g = torch.Generator().manual_seed(5)
    x = torch.cat([edges, torch.randn(50_000, generator=g) * 300, torch.randn(50_000, generator=g) * 1e-5])
    assert torch.equal(qkernel.halves(x).view(torch.int16), x.half().view(torch.int16))
    assert qkernel.halves(torch.tensor([float("nan")])).isnan().all()
