"""Prompt lookup: the longest match of the context's tail wins, from every source."""

from __future__ import annotations

from specd.decoding.drafter import Acceptance, DraftJob
from specd.decoding.lookup import LookupDrafter, NgramIndex
from specd.decoding.policy import PassCosts
from specd.decoding.prompt import Prompt

FLAT = PassCosts((100.0,) * 8)  # wide passes cost no more: lookup proposes all it finds


def lookup(max_ngram: int = 8, costs: PassCosts = FLAT, acceptance: Acceptance | None = None) -> LookupDrafter:
    return LookupDrafter(costs, acceptance or Acceptance(costs.longest), max_ngram)


def job(ids: list[int], previous: list[int] = (), extras: list[list[int]] = ()) -> DraftJob:
    return DraftJob(Prompt(ids, [], [], list(extras)), previous=list(previous))


def test_longest_match_in_the_context():
    context = [1, 2, 3, 4, 9, 9, 2, 3, 4, 5, 6, 7, 8, 2, 3, 4]
    proposer = lookup(max_ngram=8).begin(job(context))
    p = proposer.propose(context, 3)
    assert p.tokens == [5, 6, 7] and p.match == 3  # "2 3 4" then 5 beats the older "2 3 4" then 9


def test_nothing_to_propose_when_the_last_token_is_new():
    proposer = lookup().begin(job([1, 2, 3]))
    assert proposer.propose([1, 2, 3, 42], 4).tokens == []


def test_previous_completion_and_extra_texts_are_sources():
    proposer = lookup().begin(job([10, 11], previous=[11, 12, 13, 14], extras=[[50, 11, 12, 99]]))
    p = proposer.propose([10, 11, 12], 2)
    assert p.tokens == [13, 14], "the previous completion beats an extra text on an equal match"
    proposer = lookup().begin(job([10, 11], extras=[[7, 10, 11, 60, 61]]))
    assert proposer.propose([10, 11], 2).tokens == [60, 61]


def test_a_dear_wide_pass_verifies_fewer_of_the_tokens_found():
    context = [5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6]
    steep = PassCosts((100.0, 110.0, 120.0, 400.0, 500.0, 600.0, 700.0, 800.0))
    assert lookup(costs=FLAT).begin(job(context)).propose(context, 7).tokens == [7, 8, 9, 10, 11, 12, 13]
    assert lookup(costs=steep).begin(job(context)).propose(context, 7).tokens == [7, 8]


def test_acceptance_is_learned_by_position_one_past_the_tokens_verified():
    """A match the pass verified is compared with what was decoded after it: the tokens accepted
    and the target's own, which says whether the next token found was right as well."""
    acceptance = Acceptance(4, prior=0.5, alpha=0.5)
    steep = PassCosts((100.0, 110.0, 400.0, 500.0, 600.0))
    context = [1, 2, 3, 4, 5, 1, 2]
    proposer = lookup(costs=steep, acceptance=acceptance).begin(job(context))
    p = proposer.propose(context, 4)
    assert p.tokens == [3], "found 3 4 5 1; only one is worth a pass here"
    proposer.observe(p, accepted=1, propose_s=0.0, step_s=0.1)
    proposer.propose(context + [3, 4], 4)   # 3 accepted, then the target's 4: as found
    assert acceptance.rates == [0.75, 0.75, 0.5, 0.5]
    proposer.observe(proposer.propose(context + [3, 4, 7], 4), accepted=0, propose_s=0.0, step_s=0.1)
    proposer.propose(context + [3, 4, 7, 8], 4)  # (nothing found after 7: nothing learned)
    assert acceptance.rates == [0.75, 0.75, 0.5, 0.5]


def test_a_proposal_the_pass_did_not_verify_teaches_nothing():
    acceptance = Acceptance(4, prior=0.5)
    context = [1, 2, 3, 4, 5, 1, 2]
    proposer = lookup(acceptance=acceptance).begin(job(context))
    proposer.propose(context, 4)           # hybrid took the draft model's proposal instead: no observe
    proposer.propose(context + [9, 9], 4)
    assert acceptance.rates == [0.5] * 4


def test_index_grows_with_the_context():
    index = NgramIndex([1, 2, 3])
    index.extend([1, 2])
    assert index.longest_match([1, 2], 4, end=5) == (2, 1)


def test_a_hint_is_proposed_and_verified_not_trusted(tiny_target):
    """A hint (the rest of a suggestion being typed through) feeds lookup; the output is still
    the target's own, whether the hint is right or wrong."""
    from specd.decoding.request import CompletionRequest
    from tests.conftest import tiny_engine

    engine = tiny_engine(tiny_target)
    prefix = "def parse(self, value):\n    "
    plain = engine.complete(CompletionRequest(prefix=prefix, drafter="none", max_tokens=24, document="a"))
    right = engine.complete(CompletionRequest(prefix=prefix, drafter="lookup", max_tokens=24, document="b",
                                              hints=(plain.text,)))
    wrong = engine.complete(CompletionRequest(prefix=prefix, drafter="lookup", max_tokens=24, document="c",
                                              hints=("zzz qqq " * 8,)))
    assert right.tokens == plain.tokens == wrong.tokens
    assert sum(right.stats.accepted.values()) >= len(plain.tokens) // 2
