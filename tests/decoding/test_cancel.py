"""A cancelled call returns within one forward pass, marked cancelled, and its work stays cached."""

from __future__ import annotations

import pytest

from specd.decoding.request import CompletionRequest
from tests.conftest import tiny_engine


class PassCounter:
    """Counts forward passes of the models; cancels once `after` passes have run."""

    def __init__(self, engine, after: int):
        self.passes, self.after, self.at_cancel = 0, after, None
        engine.on_forward(self.count)

    def count(self, module, args) -> None:
        self.passes += 1

    def cancelled(self) -> bool:
        if self.passes >= self.after and self.at_cancel is None:
            self.at_cancel = self.passes
        return self.at_cancel is not None


LONG_PREFIX = "".join(f"def f{i}(x):\n    return x * {i}\n\n" for i in range(40))


@pytest.mark.parametrize("after", [1, 3, 12])
@pytest.mark.parametrize("drafter", ["none", "hybrid", "draft"])
def test_cancel_lands_within_one_pass(tiny_target, tiny_draft, drafter, after):
    engine = tiny_engine(tiny_target, tiny_draft)
    counter = PassCounter(engine, after)
    result = engine.complete(CompletionRequest(prefix=LONG_PREFIX, drafter=drafter, max_tokens=64,
                                               stop_at_suffix=False, document="doc"), counter.cancelled)
    assert result.outcome == "cancelled"
    assert counter.passes - counter.at_cancel <= 1, "more than one pass ran after the cancel"


def test_cancelled_prefill_is_kept_for_the_next_call(tiny_target):
    engine = tiny_engine(tiny_target)
    counter = PassCounter(engine, after=3)
    request = CompletionRequest(prefix=LONG_PREFIX, drafter="none", max_tokens=8, document="doc")
    first = engine.complete(request, counter.cancelled)
    assert first.outcome == "cancelled" and first.text == ""
    assert first.stats.prefilled_tokens == 3 * engine.settings.prefill_chunk
    second = engine.complete(request)
    assert second.outcome == "done"
    assert second.stats.reused_tokens == first.stats.prefilled_tokens


def count_layers(model) -> dict[str, int]:
    """How often the lean forward runs `model`'s first and last layer, counted as it goes."""
    lean = model.specd_lean
    ran, last, layer = {"first": 0, "last": 0}, len(model.model.layers) - 1, lean.layer

    def counted(index, *args):
        if index in (0, last):
            ran["first" if index == 0 else "last"] += 1
        return layer(index, *args)

    lean.layer = counted
    return ran


def test_a_cancel_during_a_decoding_pass_stops_it_between_layers(tiny_target, tmp_path):
    """The keystroke that makes a request stale need not wait out a pass: the lean forward (block
    weights on the CPU) stops before its next layer, puts back the layers it ran, and the next call
    computes what a fresh engine computes."""
    request = CompletionRequest(prefix="def f(x):\n    return", drafter="none", max_tokens=8,
                                stop_at_suffix=False, document="doc")  # short: its first pass decodes
    fresh = tiny_engine(tiny_target, cache_dir=tmp_path, quantize="gguf").complete(request)
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, quantize="gguf")
    assert hasattr(engine.target.model, "specd_lean")
    ran = count_layers(engine.target.model)
    stopped = engine.complete(request, lambda: ran["first"] > 0)
    assert stopped.outcome == "cancelled" and stopped.tokens == []
    assert ran == {"first": 1, "last": 0}, "the pass stopped after its first layer"
    again = engine.complete(request)
    assert again.outcome == "done" and again.tokens == fresh.tokens and again.tokens


def test_a_cancel_during_a_prefill_chunk_stops_it_between_layers(tiny_target, tmp_path):
    """A read on the idle lane gives way to a keystroke within a layer, not a chunk: the chunk in
    progress is given up (the cache as before it), the chunks before it stay."""
    request = CompletionRequest(prefix=LONG_PREFIX, drafter="none", max_tokens=8, stop_at_suffix=False,
                                document="doc")
    fresh = tiny_engine(tiny_target, cache_dir=tmp_path, quantize="gguf").complete(request)
    engine = tiny_engine(tiny_target, cache_dir=tmp_path, quantize="gguf")
    ran = count_layers(engine.target.model)
    stopped = engine.complete(request, lambda: ran["first"] >= 2)   # in the second chunk, after its first layer
    assert stopped.outcome == "cancelled"
    assert ran == {"first": 2, "last": 1}, "the second chunk stopped after its first layer"
    assert stopped.stats.prefilled_tokens == engine.settings.prefill_chunk, "the first chunk stayed"
    again = engine.complete(request)
    assert again.stats.reused_tokens == engine.settings.prefill_chunk
    assert again.outcome == "done" and again.tokens == fresh.tokens
