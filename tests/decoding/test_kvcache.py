"""The KV cache: its rollback works on any torch and transformers the engine may meet, and a full
cache says what to change."""

from __future__ import annotations

import re

import msgspec
import pytest
import torch

from specd.decoding.forward import prefill
from specd.decoding.kvcache import CacheFull, KVCache
from specd.decoding.settings import EngineSettings
from tests.conftest import tiny_loaded


def test_truncate_outside_inference_mode_on_lengths_made_inside_it(tiny_target):
    """On CUDA a static layer's length is moved to the device inside the first pass, in inference
    mode, and the engine rolls back outside it: that must work (here the same tensor is made the
    same way on the test device)."""
    model = tiny_loaded(tiny_target).model
    cache = KVCache(model, 64)
    prefill(model, cache, list(range(10)), 4, lambda: False)
    with torch.inference_mode():
        for layer in cache.past.layers:
            layer.cumulative_length = layer.cumulative_length.clone()
    assert torch.is_inference(cache.past.layers[0].cumulative_length)
    cache.truncate(6)
    assert cache.positions() == 6 and cache.tokens == list(range(6))
    assert all(int(layer.cumulative_length) == 6 for layer in cache.past.layers)


def test_a_full_cache_names_a_setting_that_exists(tiny_target):
    """CacheFull tells the user which config key to change: it must be a real one."""
    cache = KVCache(tiny_loaded(tiny_target).model, 8)
    with pytest.raises(CacheFull) as caught:
        cache.check_room(9)
    keys = re.findall(r"`engine\.(\w+)`", str(caught.value))
    assert keys and set(keys) <= {f.name for f in msgspec.structs.fields(EngineSettings)}, str(caught.value)
