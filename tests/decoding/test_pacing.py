"""How long the draft model's proposals are and when it sits out: never the output, only the
cost, so these check the decisions themselves."""

from __future__ import annotations

import pytest

from specd.decoding.drafter import DraftJob, Pacing
from specd.decoding.kvcache import KVCache
from specd.decoding.policy import DraftStop, FullLength, PassCosts
from specd.decoding.request import CompletionRequest
from tests.conftest import CHEAP, STEEP, hand_curve, tiny_engine

FLAT = PassCosts((250.0,) * 8)  # a pass costs 250 ms at every width: an accepted token saves 250 ms


def test_the_payoff_counts_what_the_curve_says_a_wider_pass_costs():
    """Three tokens accepted of three save three plain passes on a flat curve; where the pass of
    four rows costs three plain ones, two accepted save nothing at all. The curve says how much
    dearer the wide pass is; the pass as timed says how dear it is today."""
    flat, steep = Pacing(FLAT, alpha=1.0), Pacing(PassCosts((100.0, 150.0, 200.0, 300.0)), alpha=1.0)
    flat.update(proposed=3, accepted=3, propose_s=0.0, step_s=0.25)
    steep.update(proposed=3, accepted=3, propose_s=0.0, step_s=0.3)
    assert flat.gain == pytest.approx(750.0) and steep.gain == pytest.approx(100.0)
    steep.update(proposed=3, accepted=2, propose_s=0.0, step_s=0.3)
    assert steep.gain == pytest.approx(0.0)
    steep.update(proposed=3, accepted=3, propose_s=0.05, step_s=0.6)  # a busy minute: every pass twice as long
    assert steep.gain == pytest.approx(150.0)


def test_one_rejected_proposal_does_not_make_a_drafter_sit_out():
    pacing = Pacing(FLAT)
    pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=0.25)
    assert pacing.pays() and pacing.resting == 0


def test_a_drafter_that_keeps_costing_more_than_it_saves_sits_out_for_longer_each_time():
    pacing = Pacing(FLAT)
    rests = []
    for _ in range(3):
        while pacing.pays():
            pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=0.25)
        rests.append(pacing.resting + 1)  # pays() above already used one
        while pacing.resting:
            assert not pacing.pays()
    assert rests == [2, 4, 8]


def test_a_drafter_that_pays_keeps_proposing_even_after_a_rejection():
    pacing = Pacing(FLAT)
    for accepted in (3, 3, 0, 3, 0, 3):
        assert pacing.pays()
        pacing.update(proposed=3, accepted=accepted, propose_s=0.15, step_s=0.25)
    assert pacing.resting == 0


def _draft_lengths(engine, prefix: str) -> list[int]:
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="", drafter="draft", max_tokens=32,
                                               document="pacing", stop_at_suffix=False, reuse=False))
    return [s.proposed for s in result.stats.steps if s.proposed]


PREFIX = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"


def test_the_confidence_floor_stops_the_draft_after_a_token_it_is_unsure_of(tiny_target, tiny_draft):
    never_sure = tiny_engine(tiny_target, tiny_draft, pace_drafts=False, draft_confidence=1.0,
                             curve=hand_curve(CHEAP))
    assert set(_draft_lengths(never_sure, PREFIX)) == {1}


def test_the_draft_fills_the_pass_where_wide_passes_and_drafting_cost_nothing_more(tiny_target, tiny_draft):
    free = hand_curve(((100.0,) * 16, None))
    engine = tiny_engine(tiny_target, tiny_draft, pace_drafts=False, curve=free)
    lengths = _draft_lengths(engine, PREFIX)
    assert lengths and set(lengths) == {engine.width - 1}  # rejections do not shorten it


def test_the_draft_proposes_less_where_wide_passes_are_dear(tiny_target, tiny_draft):
    cheap = _draft_lengths(tiny_engine(tiny_target, tiny_draft, pace_drafts=False, curve=hand_curve(CHEAP)), PREFIX)
    steep = _draft_lengths(tiny_engine(tiny_target, tiny_draft, pace_drafts=False, curve=hand_curve(STEEP)), PREFIX)
    assert cheap and steep
    assert sum(steep) / len(steep) < sum(cheap) / len(cheap) and max(steep) < 8


def test_each_mode_paces_the_draft_model_on_its_own(tiny_target, tiny_draft):
    """"draft" sitting out says nothing of "hybrid": each mode learns its own pacing."""
    engine = tiny_engine(tiny_target, tiny_draft, curve=hand_curve(CHEAP))
    engine.pacing["draft"].resting = 1000     # as if "draft" had been found not to pay, many times over
    prefix = "x = [alpha, beta, gamma]\nprint(x)\n"  # little for lookup to match: hybrid asks the draft
    hybrid = engine.complete(CompletionRequest(prefix=prefix, drafter="hybrid", max_tokens=16, document="h",
                                               stop_at_suffix=False))
    assert hybrid.stats.proposed.get("draft", 0) > 0, "hybrid's draft model proposes while draft's rests"
    assert not _draft_lengths(engine, prefix), "the draft mode itself still sits out"


def test_the_tuners_replay_of_the_stop_rule_is_the_engines(tiny_target, tiny_draft):
    """bench/tune_hybrid.py cuts full-length proposals with DraftStop.kept; the engine's drafter
    stops at the same token and verifies as many, so the replay counts what the engine does."""
    engine = tiny_engine(tiny_target, tiny_draft, curve=hand_curve(STEEP))
    limit = engine.width - 1
    plain = engine.complete(CompletionRequest(prefix=PREFIX, drafter="none", max_tokens=12, document="plain",
                                              stop_at_suffix=False)).tokens
    prompt = engine.build_prompt(PREFIX)
    job = lambda: DraftJob(prompt, draft_cache=KVCache(engine.draft.model, engine.settings.draft_capacity))  # noqa: E731
    full = engine.model_drafter(Pacing(engine.costs, judge=False), FullLength()).begin(job())
    lengths = set()
    for confidence in (0.0, 0.6, 0.9):
        rule = DraftStop(engine.costs, confidence)
        cut = engine.model_drafter(Pacing(engine.costs, judge=False), rule).begin(job())
        for i in range(len(plain)):
            whole = full.propose(prompt.ids + plain[:i], limit)
            stopped = cut.propose(prompt.ids + plain[:i], limit)
            assert len(whole.tokens) == len(whole.token_probs) == limit
            drafted, verified = rule.kept(whole.token_probs)
            assert stopped.tokens == whole.tokens[:verified] and verified <= drafted
            lengths.add(len(stopped.tokens))
    assert len(lengths) > 1, "the rule cut proposals at different lengths"
