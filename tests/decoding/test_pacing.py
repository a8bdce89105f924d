"""How long the draft model's proposals are and when it sits out: never the output, only the
cost, so these check the decisions themselves."""

from __future__ import annotations

from decoding.drafter import Pacing
from decoding.engine import CompletionRequest
from tests.conftest import tiny_engine

STEP_S = 0.25


def test_one_rejected_proposal_does_not_make_a_drafter_sit_out():
    pacing = Pacing(start=3)
    pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=STEP_S)
    assert pacing.pays() and pacing.resting == 0


def test_a_drafter_that_keeps_costing_more_than_it_saves_sits_out_for_longer_each_time():
    pacing = Pacing(start=3)
    rests = []
    for _ in range(3):
        while pacing.pays():
            pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=STEP_S)
        rests.append(pacing.resting + 1)  # pays() above already used one
        while pacing.resting:
            assert not pacing.pays()
    assert rests == [2, 4, 8]


def test_a_drafter_that_pays_keeps_proposing_and_grows_its_drafts():
    pacing = Pacing(start=3, high=7)
    for _ in range(5):
        assert pacing.pays()
        k = pacing.length(7)
        pacing.update(proposed=k, accepted=k, propose_s=0.05 * k, step_s=STEP_S)
    assert pacing.length(7) == 7


def _draft_lengths(engine, prefix: str) -> list[int]:
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="", drafter="draft", max_tokens=32,
                                               document="pacing", stop_at_suffix=False, reuse=False))
    return [s.proposed for s in result.stats.steps if s.proposed]


def test_the_draft_stops_after_a_token_it_is_unsure_of(tiny_target, tiny_draft):
    prefix = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"
    never_sure = _draft_lengths(tiny_engine(tiny_target, tiny_draft, pace_drafts=False, draft_confidence=1.0), prefix)
    always_sure = _draft_lengths(tiny_engine(tiny_target, tiny_draft, pace_drafts=False, draft_confidence=0.0), prefix)
    assert never_sure and set(never_sure) == {1}
    assert max(always_sure) > 1
