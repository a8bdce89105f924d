"""The suggestion cache and the accept branch, prefetched: in a real daemon on the tiny models.

An answer kept is the target's own (greedy decoding is a function of the prompt), so the tests
check that it comes back whole, at once and with no forward pass, only for a request that would
compute the same text, and that a prefetch never stands in the way of a request someone waits for."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from specd.daemon import protocol
from specd.daemon.answers import Answers, answer_key
from specd.daemon.client import new_request_id
from specd.decoding.request import Completion, CompletionRequest, Sampler
from tests.daemon.conftest import long_request, trace_of, until_running
from tests.homes import LONG_TEXT


def at(document: str, typed: str = "", **fields) -> protocol.Complete:
    fields = {"max_tokens": 8, **fields}
    return protocol.Complete(id=new_request_id(), document=document, prefix=LONG_TEXT + typed,
                             suffix="\nprint(total)\n", **fields)


def again(message: protocol.Complete, **fields) -> protocol.Complete:
    return msgspec.structs.replace(message, id=new_request_id(), **fields)


def test_the_key_is_what_decides_the_text():
    base = CompletionRequest(prefix="a = ", suffix="\n", document="d")
    same = [dataclasses.replace(base, drafter="none"), dataclasses.replace(base, hints=("1",)),
            dataclasses.replace(base, deadline_s=0.5), dataclasses.replace(base, document="other")]
    assert {answer_key(r) for r in same} == {answer_key(base)}
    differ = [dataclasses.replace(base, prefix="a ="), dataclasses.replace(base, suffix=""),
              dataclasses.replace(base, extras=(("b.py", "b = 1"),)), dataclasses.replace(base, max_tokens=9),
              dataclasses.replace(base, single_line=True), dataclasses.replace(base, suffix_tokens=0),
              dataclasses.replace(base, stop_at_suffix=False)]
    assert len({answer_key(r) for r in [base, *differ]}) == 1 + len(differ)
    assert answer_key(dataclasses.replace(base, sampler=Sampler(temperature=0.7))) is None
    assert answer_key(dataclasses.replace(base, reuse=False)) is None


def test_only_finished_answers_are_kept_and_the_oldest_go():
    answers = Answers(per_document=2, documents=2)
    ask = lambda prefix, document="d": CompletionRequest(prefix=prefix, document=document)  # noqa: E731
    put = lambda r, result: answers.put(r.document, answer_key(r), result)  # noqa: E731
    get = lambda r: answers.get(r.document, answer_key(r))  # noqa: E731
    put(ask("a"), Completion("x", [1], "cancelled", None))
    assert get(ask("a")) is None, "a cancelled completion is not an answer"
    for prefix in "abc":
        put(ask(prefix), Completion(prefix * 2, [1], "done", "eos"))
    assert get(ask("a")) is None and get(ask("c")).text == "cc"
    assert get(ask("c")).stats.from_cache
    put(ask("a", "e"), Completion("y", [2], "done", "eos"))
    put(ask("a", "f"), Completion("z", [3], "done", "eos"))
    assert get(ask("c")) is None, "the least recently used document went"
    assert len(answers) == 2


async def test_deleting_back_answers_the_first_suggestion_at_once(daemon, client):
    document = "file:///answers-back.py"
    first = await client.complete(at(document))
    edited = await client.complete(at(document, "x"))
    back = await client.complete(at(document, drafter="none"))   # another drafter: the same text
    assert first.outcome == edited.outcome == back.outcome == "done"
    assert back.text == first.text and back.stats.from_cache and not first.stats.from_cache
    lines = await trace_of(daemon, document, 3)
    assert lines[-1].passes == 0 and lines[-1].stats.from_cache, "no forward pass for a kept answer"
    assert not (await client.complete(at(document, max_tokens=9))).stats.from_cache, \
        "another limit can give another text: computed"
    sampled = [await client.complete(at(document, temperature=0.8, seed=1)) for _ in range(2)]
    assert not any(r.stats.from_cache for r in sampled), "a sampled answer is a draw, never kept"


async def test_a_prefetched_accept_branch_answers_tab_from_the_cache(daemon, client):
    document = "file:///answers-tab.py"
    shown = await client.complete(at(document))
    tab = at(document, shown.text)
    ahead = await client.complete(again(tab, prefetch=True, supersede=False))
    assert ahead.outcome == "done" and not ahead.stats.from_cache
    before = (await client.status()).prefetched
    reply = await client.complete(tab)
    assert reply.stats.from_cache and reply.text == ahead.text
    lines = await trace_of(daemon, document, 3)
    assert [line.prefetch for line in lines] == [False, True, False]
    status = await client.status()
    assert status.prefetched == before and status.from_cache >= 1


async def test_tab_while_the_prefetch_runs_waits_for_it_and_takes_its_answer(daemon, client):
    document = "file:///answers-at-once.py"
    ahead = long_request(document, prefetch=True, supersede=False)
    prefetch = asyncio.ensure_future(client.complete(ahead))
    await until_running(client, ahead.id, reply=prefetch)
    reply = await client.complete(again(ahead, prefetch=False, supersede=True))
    computed = await prefetch
    assert computed.outcome == "done", "the request for its own answer did not cancel the prefetch"
    assert reply.stats.from_cache and reply.text == computed.text


async def test_any_other_request_preempts_a_prefetch(daemon, client):
    ahead = long_request("file:///answers-idle.py", prefetch=True, supersede=False)
    prefetch = asyncio.ensure_future(client.complete(ahead))
    await until_running(client, ahead.id, passes=2, reply=prefetch)
    served = await client.complete(at("file:///answers-busy.py"))
    assert served.outcome == "done"
    assert (await prefetch).outcome == "cancelled"
    (line,) = await trace_of(daemon, ahead.document)
    assert line.cause == "preempted" and line.passes_after_cancel <= 1


async def test_a_prefetch_never_cancels_a_request_of_its_document(daemon, client):
    document = "file:///answers-own.py"
    waited = long_request(document, max_tokens=24)
    task = asyncio.ensure_future(client.complete(waited))
    await until_running(client, waited.id, reply=task)
    ahead = await client.complete(at(document, prefetch=True, supersede=False))
    assert (await task).outcome == "done" and ahead.outcome == "done"


async def test_a_sampled_request_preempts_a_sampled_prefetch(daemon, client):
    """Neither has a key in the suggestion cache: that is no reason to wait for the other."""
    ahead = long_request("file:///answers-sampled-idle.py", prefetch=True, supersede=False, temperature=0.8)
    prefetch = asyncio.ensure_future(client.complete(ahead))
    await until_running(client, ahead.id, passes=2, reply=prefetch)
    served = await client.complete(at("file:///answers-sampled-busy.py", temperature=0.8))
    assert served.outcome == "done" and (await prefetch).outcome == "cancelled"
    (line,) = await trace_of(daemon, ahead.document)
    assert line.cause == "preempted"
