"""The engine's attention (grouped key/value heads read in place) computes what transformers' own
SDPA computes, with and without the static cache's mask; the anchors run on the stock one."""

from __future__ import annotations

import pytest
import torch

from specd.bench.modes import stock_attention
from specd.decoding import attention
from specd.decoding.kvcache import KVCache
from tests.conftest import tiny_loaded


@pytest.fixture(scope="module")
def loaded(tiny_target):
    return tiny_loaded(tiny_target, dtype="float32")


def _logits(model, ids: list[int], cached: int) -> torch.Tensor:
    """Logits of `ids`, the first `cached` read into a static cache first (a masked pass after)."""
    with torch.inference_mode():
        if cached == 0:
            return model(input_ids=torch.tensor([ids], device=model.device)).logits[0]
        cache = KVCache(model, 64)
        model(input_ids=torch.tensor([ids[:cached]], device=model.device), **cache.argument(model), use_cache=True)
        rest = ids[cached:]
        return model(input_ids=torch.tensor([rest], device=model.device), **cache.argument(model), use_cache=True,
                     cache_position=torch.arange(cached, len(ids), device=model.device)).logits[0]


@pytest.mark.parametrize("cached", [0, 9])
def test_grouped_attention_computes_what_stock_sdpa_computes(loaded, cached):
    model = loaded.model
    assert model.config.num_key_value_heads < model.config.num_attention_heads, "the test needs grouped heads"
    assert model.config._attn_implementation == attention.NAME, "load() installs it"
    ids = torch.randint(0, model.config.vocab_size, (16,), generator=torch.Generator().manual_seed(3)).tolist()
    ours = _logits(model, ids, cached)
    with stock_attention(model):
        assert model.config._attn_implementation == "sdpa"
        stock = _logits(model, ids, cached)
    assert model.config._attn_implementation == attention.NAME, "the anchors' switch is undone"
    torch.testing.assert_close(ours, stock, rtol=1e-5, atol=1e-5)
    assert torch.equal(ours.argmax(-1), stock.argmax(-1))


@pytest.mark.parametrize("rows", [1, 6, 37, 128])
@pytest.mark.parametrize("end", [5, 512, 600, 1024])
def test_attending_over_the_blocks_up_to_the_last_query_gives_the_whole_caches_bits(rows, end):
    """The lean forward gives the kernel only the key blocks that hold a visible key
    (attention.keys_needed); the cache beyond holds other documents' finite leftovers."""
    capacity, heads, groups, dim = 1336, 2, 6, 64
    g = torch.Generator().manual_seed(rows * 10000 + end)
    rows = min(rows, end)
    query = torch.randn(1, heads * groups, rows, dim, generator=g)
    key, value = (torch.randn(1, heads, capacity, dim, generator=g) for _ in range(2))
    positions = torch.arange(end - rows, end)
    mask = (torch.arange(capacity)[None, :] <= positions[:, None])[None, None]
    keys = attention.keys_needed(end, capacity)
    assert keys == min(capacity, -(-end // 512) * 512) and keys >= end
    whole = attention.folded(query, key, value, mask, dim ** -0.5, groups)
    some = attention.folded(query, key[:, :, :keys], value[:, :, :keys], mask[..., :keys], dim ** -0.5, groups)
    assert torch.equal(some, whole)


def test_a_different_key_length_within_the_visible_blocks_changes_bits():
    """What the test above relies on, checked the other way: cutting inside a block (not at its
    end) is a different shape, and here it shows in the bits, so the equality above is not trivial."""
    capacity, dim = 1336, 64
    g = torch.Generator().manual_seed(7)
    query = torch.randn(1, 12, 6, dim, generator=g)
    key, value = (torch.randn(1, 2, capacity, dim, generator=g) for _ in range(2))
    positions = torch.arange(294, 300)
    mask = (torch.arange(capacity)[None, :] <= positions[:, None])[None, None]
    whole = attention.folded(query, key, value, mask, dim ** -0.5, 6)
    cut = attention.folded(query, key[:, :, :300], value[:, :, :300], mask[..., :300], dim ** -0.5, 6)
    assert not torch.equal(cut, whole)
