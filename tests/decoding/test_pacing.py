"""How long the draft model's proposals are and when it sits out: never the output, only the
cost, so these check the decisions themselves."""

from __future__ import annotations

from specd.decoding.drafter import DraftJob, Pacing
from specd.decoding.kvcache import KVCache
from specd.decoding.policy import DraftStop
from specd.decoding.request import CompletionRequest
from tests.conftest import tiny_engine

STEP_S = 0.25


def test_one_rejected_proposal_does_not_make_a_drafter_sit_out():
    pacing = Pacing()
    pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=STEP_S)
    assert pacing.pays() and pacing.resting == 0


def test_a_drafter_that_keeps_costing_more_than_it_saves_sits_out_for_longer_each_time():
    pacing = Pacing()
    rests = []
    for _ in range(3):
        while pacing.pays():
            pacing.update(proposed=3, accepted=0, propose_s=0.1, step_s=STEP_S)
        rests.append(pacing.resting + 1)  # pays() above already used one
        while pacing.resting:
            assert not pacing.pays()
    assert rests == [2, 4, 8]


def test_a_drafter_that_pays_keeps_proposing_even_after_a_rejection():
    pacing = Pacing()
    for accepted in (3, 3, 0, 3, 0, 3):
        assert pacing.pays()
        pacing.update(proposed=3, accepted=accepted, propose_s=0.15, step_s=STEP_S)
    assert pacing.resting == 0


def _draft_lengths(engine, prefix: str) -> list[int]:
    result = engine.complete(CompletionRequest(prefix=prefix, suffix="", drafter="draft", max_tokens=32,
                                               document="pacing", stop_at_suffix=False, reuse=False))
    return [s.proposed for s in result.stats.steps if s.proposed]


def test_the_draft_stops_after_a_token_it_is_unsure_of_and_else_fills_the_pass(tiny_target, tiny_draft):
    prefix = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n"
    never_sure = _draft_lengths(tiny_engine(tiny_target, tiny_draft, pace_drafts=False, draft_confidence=1.0), prefix)
    sure = tiny_engine(tiny_target, tiny_draft, pace_drafts=False, draft_confidence=0.0)
    always_sure = _draft_lengths(sure, prefix)
    assert never_sure and set(never_sure) == {1}
    assert always_sure and set(always_sure) == {sure.settings.width - 1}  # rejections do not shorten it


def test_each_mode_paces_the_draft_model_on_its_own(tiny_target, tiny_draft):
    """"draft" sitting out says nothing of "hybrid": each mode learns its own pacing."""
    engine = tiny_engine(tiny_target, tiny_draft)
    engine.pacing["draft"].resting = 1000     # as if "draft" had been found not to pay, many times over
    prefix = "x = [alpha, beta, gamma]\nprint(x)\n"  # little for lookup to match: hybrid asks the draft
    hybrid = engine.complete(CompletionRequest(prefix=prefix, drafter="hybrid", max_tokens=16, document="h",
                                               stop_at_suffix=False))
    assert hybrid.stats.proposed.get("draft", 0) > 0, "hybrid's draft model proposes while draft's rests"
    assert not _draft_lengths(engine, prefix), "the draft mode itself still sits out"


def test_the_tuners_replay_of_the_stop_rule_is_the_engines(tiny_target, tiny_draft):
    """bench/tune_hybrid.py cuts full-length proposals with DraftStop.kept; the engine's drafter
    stops at the same token, so the replay counts what the engine does."""
    engine = tiny_engine(tiny_target, tiny_draft)
    prefix, width = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n", engine.settings.width
    plain = engine.complete(CompletionRequest(prefix=prefix, drafter="none", max_tokens=12, document="plain",
                                              stop_at_suffix=False)).tokens
    prompt = engine.build_prompt(prefix)
    job = lambda: DraftJob(prompt, draft_cache=KVCache(engine.draft.model, engine.settings.draft_capacity))  # noqa: E731
    full = engine.model_drafter(Pacing(judge=False), DraftStop(0.0)).begin(job())
    lengths = set()
    for confidence in (0.3, 0.6, 0.9):
        cut = engine.model_drafter(Pacing(judge=False), DraftStop(confidence)).begin(job())
        for i in range(len(plain)):
            whole = full.propose(prompt.ids + plain[:i], width - 1)
            stopped = cut.propose(prompt.ids + plain[:i], width - 1)
            assert len(whole.tokens) == len(whole.token_probs) == width - 1
            assert stopped.tokens == whole.tokens[:DraftStop(confidence).kept(whole.token_probs)]
            lengths.add(len(stopped.tokens))
    assert len(lengths) > 1, "the rule cut proposals at different lengths"
