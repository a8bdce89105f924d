"""A forward pass that fails part-way leaves no half-written cache behind.

Out of memory after a model's first layer (or a device error there) comes once that layer has
written its keys and values for the pass: the cache would hold some layers' KV for tokens it does
not list. An exception raised as the first layer returns stands in for that, since an allocation
cannot be made to fail at one chosen layer; the daemon's tests run a real out-of-memory
(tests/daemon/test_faults.py).
"""

from __future__ import annotations

import pytest

from specd.decoding.engine import CompletionRequest
from tests.conftest import tiny_engine

PREFIX = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(12))


class DeviceFault(RuntimeError):
    pass


def fail_after_first_layer(module, args, output):
    raise DeviceFault("out of memory after layer 0")


def layer_lengths(engine) -> list[tuple[int, list[int]]]:
    """Per cached document and model: the tokens the cache lists, and what each layer holds."""
    slots = engine._pool.slots.values()     # the engine's caches, looked at from inside
    caches = [c for slot in slots for c in (slot.target, slot.draft) if c is not None]
    return [(len(c.tokens), [int(layer.cumulative_length) for layer in c.past.layers if layer.is_initialized])
            for c in caches]


@pytest.mark.parametrize("drafter", ["none", "draft"])
def test_a_pass_that_fails_part_way_is_not_reused(tiny_target, tiny_draft, drafter):
    engine = tiny_engine(tiny_target, tiny_draft)
    fresh = tiny_engine(tiny_target, tiny_draft)
    request = CompletionRequest(prefix=PREFIX, document="doc", drafter=drafter, max_tokens=16)
    edited = CompletionRequest(prefix=PREFIX + "def g(y):\n    ", document="doc", drafter=drafter, max_tokens=16)
    engine.complete(request)                       # the document is cached
    model = (engine.draft if drafter == "draft" else engine.target).model
    hook = model.model.layers[0].register_forward_hook(fail_after_first_layer)
    with pytest.raises(DeviceFault):
        engine.complete(edited)
    hook.remove()
    for listed, layers in layer_lengths(engine):
        assert all(n == listed for n in layers), f"a cache lists {listed} tokens, its layers hold {layers}"
    again = engine.complete(edited)
    assert again.text == fresh.complete(edited).text, "the next call computes what a fresh engine does"
