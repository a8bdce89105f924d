"""The engine's attention (grouped key/value heads read in place) computes what transformers' own
SDPA computes, with and without the static cache's mask; the anchors run on the stock one."""

from __future__ import annotations

import pytest
import torch

from specd.decoding import attention
from specd.decoding.bench import stock_attention
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
