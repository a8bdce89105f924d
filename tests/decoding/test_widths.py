"""The widths a pass may be padded to compute the same bits: the start-up probe's claim, checked
on inputs it never saw."""

from __future__ import annotations

import pytest
import torch

from specd.decoding.forward import prefill, step
from specd.decoding.kvcache import KVCache
from specd.decoding.widths import Nondeterministic, check_repeatable, smallest_equivalent_width
from tests.conftest import CHEAP, hand_curve, tiny_engine


def test_every_width_from_the_measured_low_one_gives_the_largest_ones_bits(tiny_target):
    # Cache lengths from a few tokens to nearly full: attention over many keys is where a 1-row
    # pass parts from wider ones on this CPU, so a probe of short prompts only would be fooled.
    engine = tiny_engine(tiny_target, prefix_tokens=1200, suffix_tokens=64, curve=hand_curve(CHEAP))
    model, largest, capacity = engine.target.model, engine.width, engine.settings.capacity
    assert largest == engine.settings.width == 16, "every width may pay where wide passes are cheap"
    low = smallest_equivalent_width(model, capacity, largest, engine.pad_id, len(engine.target.tokenizer))
    assert 1 <= low <= largest and low == engine.low_width
    g = torch.Generator().manual_seed(123)
    for length in (30, 700, capacity - largest - 5):
        cache = KVCache(model, capacity)
        prompt = torch.randint(0, 300, (length,), generator=g).tolist()
        rows = torch.randint(0, 300, (largest,), generator=g).tolist()
        prefill(model, cache, prompt, 256, lambda: False)
        reference = step(model, cache, rows, largest, engine.pad_id)
        cache.truncate(len(prompt))
        for width in range(low, largest):
            for real in (1, width):  # one real token padded, or a full block
                got = step(model, cache, rows[:real], width, engine.pad_id)
                cache.truncate(len(prompt))
                assert torch.equal(got, reference[:real]), f"{length} cached, width {width}, {real} real rows"


def test_narrow_passes_off_pads_every_pass_to_the_full_width(tiny_target):
    assert tiny_engine(tiny_target, narrow_passes=False, curve=hand_curve(CHEAP)).low_width == 16


def test_the_probe_covers_the_widest_pass_the_curve_lets_the_engine_run(tiny_target):
    """Where wide passes cannot pay, the engine neither runs nor probes them; every pass it runs
    is padded within the probed set."""
    from tests.conftest import STEEP

    engine = tiny_engine(tiny_target, curve=hand_curve(STEEP))
    assert engine.width == 8 and engine.low_width <= engine.width and engine.costs.longest == 7


def test_a_pass_whose_bits_change_when_run_again_is_refused(tiny_target):
    engine = tiny_engine(tiny_target)
    model, pad_id = engine.target.model, engine.pad_id
    cache = KVCache(model, engine.settings.capacity)
    prefill(model, cache, list(range(40)), 16, lambda: False)
    rows = list(range(50, 58))
    first = step(model, cache, rows, 8, pad_id)
    cache.truncate(40)
    check_repeatable(model, cache, rows, 8, pad_id, first)  # the same bits again: no complaint
    changed = first.clone()
    changed[3, 7] += changed[3, 7].abs().clamp_min(1.0) * 0.05  # one logit of one row, a little
    with pytest.raises(Nondeterministic, match=r"8-row pass over 40 cached tokens .* \(1 of 8 rows\)"):
        check_repeatable(model, cache, rows, 8, pad_id, changed)
    assert len(cache.tokens) == 40, "the check leaves the cache as it found it"
