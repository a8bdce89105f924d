"""Prompt lookup: the longest match of the context's tail wins, from every source."""

from __future__ import annotations

from specd.decoding.drafter import DraftJob
from specd.decoding.lookup import LookupDrafter, NgramIndex
from specd.decoding.prompt import Prompt


def job(ids: list[int], previous: list[int] = (), extras: list[list[int]] = ()) -> DraftJob:
    return DraftJob(Prompt(ids, [], [], list(extras)), previous=list(previous))


def test_longest_match_in_the_context():
    context = [1, 2, 3, 4, 9, 9, 2, 3, 4, 5, 6, 7, 8, 2, 3, 4]
    proposer = LookupDrafter(max_ngram=8).begin(job(context))
    p = proposer.propose(context, 3)
    assert p.tokens == [5, 6, 7] and p.match == 3  # "2 3 4" then 5 beats the older "2 3 4" then 9


def test_nothing_to_propose_when_the_last_token_is_new():
    proposer = LookupDrafter().begin(job([1, 2, 3]))
    assert proposer.propose([1, 2, 3, 42], 4).tokens == []


def test_previous_completion_and_extra_texts_are_sources():
    proposer = LookupDrafter().begin(job([10, 11], previous=[11, 12, 13, 14], extras=[[50, 11, 12, 99]]))
    p = proposer.propose([10, 11, 12], 2)
    assert p.tokens == [13, 14], "the previous completion beats an extra text on an equal match"
    proposer = LookupDrafter().begin(job([10, 11], extras=[[7, 10, 11, 60, 61]]))
    assert proposer.propose([10, 11], 2).tokens == [60, 61]


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
