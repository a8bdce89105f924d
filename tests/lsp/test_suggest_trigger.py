"""lsp/suggest.py under the trigger rules' decisions, against a stand-in for the daemon's client
that records what is sent and answers "done" when told: which requests are sent, not how fast."""

from __future__ import annotations

import asyncio

from specd.daemon import protocol
from specd.lsp.context import Cursor, Surroundings
from specd.lsp.suggest import Suggester
from specd.lsp.trigger import Decision

URI = "file:///a.py"
AROUND = Surroundings("python")
DELAY = Decision("ask", delay_ms=60_000)   # longer than any test: only a newer request ends it
HOLD = Decision("hold", why="held")


class Daemon:
    """The client: each request sent waits until the test answers it."""

    def __init__(self):
        self.sent: list[protocol.Complete] = []
        self.answers: dict[int, asyncio.Future] = {}
        self.lost = False

    async def complete(self, request: protocol.Complete) -> protocol.CompletionReply:
        self.sent.append(request)
        self.answers[request.id] = asyncio.get_running_loop().create_future()
        return await self.answers[request.id]

    def answer(self, request: protocol.Complete, text: str) -> None:
        self.answers[request.id].set_result(protocol.CompletionReply(id=request.id, text=text, outcome="done"))

    async def cancel(self, request_id: int) -> None:
        pass


def suggester() -> tuple[Suggester, Daemon]:
    daemon = Daemon()

    async def connect():
        return daemon
    return Suggester(connect), daemon


def at(typed: str) -> Cursor:
    prefix = "def f(x):\n    return " + typed
    return Cursor(prefix, "\n", 1, len(prefix.split("\n")[-1]), "", single_line=True)


async def settled(daemon: Daemon, count: int) -> None:
    """Until `count` requests have been sent (each is sent within a few event-loop turns)."""
    while len(daemon.sent) < count:
        await asyncio.sleep(0)


async def test_a_request_in_its_delay_is_never_sent_once_a_newer_one_comes():
    s, daemon = suggester()
    first = asyncio.ensure_future(s.suggest(URI, at("x"), AROUND, DELAY))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(s.suggest(URI, at("x "), AROUND, Decision("ask")))
    assert await first is None, "the stale one answers nothing"
    await settled(daemon, 1)
    daemon.answer(daemon.sent[0], "+ 1")
    assert (await second).text == "+ 1"
    assert [r.prefix[-2:] for r in daemon.sent] == ["x "], "only the newer one reached the daemon"


async def test_without_cancelling_a_newer_request_still_makes_a_delayed_one_stale():
    s, daemon = suggester()
    s.cancel = False
    short = Decision("ask", delay_ms=50)
    first = asyncio.ensure_future(s.suggest(URI, at("x"), AROUND, short))
    second = asyncio.ensure_future(s.suggest(URI, at("x "), AROUND, short))
    assert await first is None
    await settled(daemon, 1)
    daemon.answer(daemon.sent[0], "+ 1")
    assert (await second).text == "+ 1" and len(daemon.sent) == 1


async def test_a_request_held_back_sends_nothing_but_makes_the_older_one_stale():
    s, daemon = suggester()
    older = asyncio.ensure_future(s.suggest(URI, at("x"), AROUND))
    await settled(daemon, 1)
    assert await s.suggest(URI, at("x "), AROUND, HOLD) is None
    assert await older is None, "its answer would land at an old cursor"
    assert len(daemon.sent) == 1


async def test_typed_through_a_suggestion_the_rest_shows_even_held_back_and_no_check_is_sent():
    s, daemon = suggester()
    shown = asyncio.ensure_future(s.suggest(URI, at(""), AROUND))
    await settled(daemon, 1)
    daemon.answer(daemon.sent[0], "x + 1")
    assert (await shown).text == "x + 1"
    rest = await s.suggest(URI, at("x"), AROUND, HOLD)
    assert rest.text == " + 1"
    await asyncio.sleep(0.01)
    assert len(daemon.sent) == 1, "held back: the rest is not checked with the model"
    assert await s.suggest(URI, at("x "), AROUND, Decision("off")) is None, "off: not even the rest"
