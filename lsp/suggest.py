"""From a cursor to a suggestion: the daemon request, newest-wins per document, typed-through reuse.

Clients differ in what they cancel. Neovim 0.12 sends `$/cancelRequest` only when insert mode ends
or a suggestion is accepted, never for a request that typing made stale, and shows a late answer
at whatever the cursor is now. So a request that a newer one for the same document has made stale
is answered here, at once, with nothing; its daemon request is superseded there by the newer one.

The suggester owns the connection to the daemon and what it remembers per document (the newest
request, the suggestion shown); the server owns the documents and passes in what a request needs.

Each request comes with the trigger rules' decision (lsp/trigger.py): ask, after a delay in which
a newer request for the document makes it stale before it is ever sent; hold (no request, though
a suggestion typed through keeps its rest); or nothing at all. Held or not, it makes the older
request stale.

Once a suggestion is shown, the suggester asks the daemon to prefetch its accept branch: the
request the editor will send after Tab, computed while the user reads, kept in the daemon's
suggestion cache (daemon/answers.py) and answered from there at once. The daemon runs it only
while idle, and any keystroke's request preempts it.

The same lane reads a document ahead before the first keystroke there (a person opens a file and
reads before typing; a cold prompt is seconds of prefill on a CPU): on didOpen (at the document's
end, when all of it fits the prompt: every cursor's prompt then starts where that one does) and
where the editor says its cursor rests (`specd/didFocus`, sent by specd's own editor clients). The
newest such read-ahead wins across documents; what it computed stays in the daemon's KV cache
whether or not it finishes, and its answer is kept for a request at that very cursor.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace

import msgspec
from pygls.exceptions import JsonRpcInvalidParams

from specd.daemon import protocol
from specd.daemon.client import Client, DaemonError, new_request_id
from specd.lsp.context import Cursor, Surroundings
from specd.lsp.postprocess import Suggestion, clean
from specd.lsp.trigger import ASK, Decision
from specd.lsp.typed_through import Shown, rest_after_typing

log = logging.getLogger("specd.lsp")
OPTIONS = ("reuse", "cancel", "prefetch", "warm")


class DaemonUnavailable(Exception):
    """The daemon could not be reached or started; the message says why."""


class Suggester:
    def __init__(self, connect: Callable[[], Awaitable[Client]]):
        self.connect = connect       # to the daemon, starting it if none answers
        self.client: Client | None = None
        self.connecting = asyncio.Lock()
        self.newest: dict[str, asyncio.Event] = {}  # per document: set when superseded
        self.shown: dict[str, Shown] = {}           # per document: the last suggestion
        self.prefetched: dict[str, tuple[str, str]] = {}  # per document: the last accept branch asked
        self.background: set[asyncio.Task] = set()
        self.reuse = True    # prefix reuse in the daemon, typed-through answers here
        self.cancel = True   # stale requests end at once, and are superseded in the daemon
        self.prefetch = True  # the accept branch of a suggestion shown, computed while idle
        self.warm = True      # documents read ahead where the editor's cursor rests, while idle
        self.warming: tuple[str, int] | None = None  # the read-ahead in flight: document, request id

    def configure(self, options: object) -> None:
        """`initializationOptions`: {"reuse": bool, "cancel": bool, "prefetch": bool, "warm": bool},
        all true by default (`specd replay --no-reuse --no-cancel --no-prefetch --no-warm` turns
        them off for a side-by-side run)."""
        if not isinstance(options, dict):
            raise JsonRpcInvalidParams(f"initializationOptions must be an object, not {type(options).__name__}")
        for key, value in options.items():
            if key not in OPTIONS or not isinstance(value, bool):
                raise JsonRpcInvalidParams(f"initializationOptions: {key!r} must be one of {', '.join(OPTIONS)} "
                                           f"and a boolean, not {value!r}")
            setattr(self, key, value)

    def warm_up(self) -> None:
        self._spawn(self.daemon())

    def forget(self, uri: str) -> None:
        self.shown.pop(uri, None)
        self.prefetched.pop(uri, None)
        if (event := self.newest.pop(uri, None)) is not None:
            event.set()

    async def daemon(self) -> Client:
        """The connected client, connecting (and starting the daemon) when there is none."""
        async with self.connecting:
            if self.client is None:
                try:
                    self.client = await self.connect()
                except (OSError, DaemonError, TimeoutError) as error:
                    raise DaemonUnavailable(f"specd daemon unavailable: {error}") from None
            return self.client

    async def ask(self, request: protocol.Complete) -> protocol.CompletionReply:
        """Send `request`. A connection already known lost (the daemon was restarted or killed
        between requests) is replaced first. A daemon that dies with the request in flight gets it
        answered with an error at once, and a new daemon is started in the background: the request
        may be what killed it, and it is stale by the time a daemon has loaded its models."""
        client = await self.daemon()
        if client.lost:
            self._drop(client)
            client = await self.daemon()
        try:
            return await client.complete(request)
        except ConnectionError as error:
            self._drop(client)
            self.warm_up()
            raise DaemonUnavailable(f"the specd daemon went away mid-request ({error}); starting it again") from None

    def report(self, event: protocol.Feedback) -> None:
        """What the user did with a suggestion, to the daemon's counts (lsp/uptake.py). Lost with a
        lost connection: a count is never worth starting a daemon for."""
        if self.client is not None and not self.client.lost:
            self._spawn(self.client.feedback(event))

    def _drop(self, client: Client) -> None:
        if self.client is client:
            self.client = None
            self._spawn(client.close())

    async def suggest(self, uri: str, cursor: Cursor, around: Surroundings,
                      decision: Decision = ASK) -> Suggestion | None:
        """What to show at `cursor`, as `decision` (lsp/trigger.py) allows: a request held back or
        turned off still makes the older one stale, and one typed through still sees its rest."""
        if self.cancel and (older := self.newest.get(uri)) is not None:
            older.set()  # the older request for this document answers nothing, now
        superseded = self.newest[uri] = asyncio.Event()
        try:
            if decision.action == "off":
                return None
            shown = self.shown.get(uri)
            rest = rest_after_typing(shown, cursor) if self.reuse else None
            if rest is not None:  # typed through: answer now, verify in the background
                self.shown[uri] = Shown(cursor.prefix, cursor.suffix, rest, shown.replaces_rest, shown.request)
                if decision.action == "ask":
                    self._spawn(self._verify(uri, cursor, around, self.shown[uri], decision.delay_ms))
                return Suggestion(rest, shown.replaces_rest, shown.request)
            if decision.action != "ask" or await self._newer_within(uri, superseded, decision.delay_ms):
                return None
            request = self.request(uri, cursor, around)
            result = await (self._unless_superseded(request, superseded) if self.cancel else self.ask(request))
        finally:
            if self.newest.get(uri) is superseded:
                del self.newest[uri]
        return self._accept(uri, cursor, result)

    async def _newer_within(self, uri: str, superseded: asyncio.Event, delay_ms: int) -> bool:
        """Wait `delay_ms` (trigger.delay_ms); True when a newer request for `uri` came meanwhile:
        this one is then never sent. Whether or not stale requests are cancelled, newest wins."""
        if delay_ms <= 0:
            return False
        try:
            await asyncio.wait_for(superseded.wait(), delay_ms / 1e3)
        except TimeoutError:
            pass
        return superseded.is_set() or self.newest.get(uri) is not superseded

    def request(self, uri: str, cursor: Cursor, around: Surroundings, hints: tuple[str, ...] = ()) -> protocol.Complete:
        return protocol.Complete(
            id=new_request_id(), document=uri, prefix=cursor.prefix, suffix=cursor.suffix,
            language=around.language, single_line=cursor.single_line,
            extras=[protocol.Extra(path=path, text=text) for path, text in around.others], hints=list(hints),
            supersede=self.cancel, reuse=self.reuse)

    async def _unless_superseded(self, request: protocol.Complete,
                                 superseded: asyncio.Event) -> protocol.CompletionReply | None:
        """The daemon's answer, or None as soon as a newer request for the document arrives."""
        answer = asyncio.ensure_future(self.ask(request))
        newer = asyncio.ensure_future(superseded.wait())
        try:
            done, _ = await asyncio.wait({answer, newer}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the client cancelled: so does the daemon
            answer.cancel()
            newer.cancel()
            if self.client is not None:
                self._spawn(self.client.cancel(request.id))
            raise
        newer.cancel()
        if answer not in done:
            answer.add_done_callback(_quietly)  # the daemon drops it for the newer request
            return None
        return answer.result()

    def _accept(self, uri: str, cursor: Cursor, result: protocol.CompletionReply | None) -> Suggestion | None:
        if result is None or result.outcome != "done":
            return None
        suggestion = clean(result.text, cursor, result.stop_reason)
        if suggestion is None:
            return None
        suggestion = replace(suggestion, request=result.id)
        self.shown[uri] = Shown(cursor.prefix, cursor.suffix, suggestion.text, suggestion.replaces_rest, result.id)
        return suggestion

    async def _verify(self, uri: str, cursor: Cursor, around: Surroundings, shown: Shown, delay_ms: int = 0) -> None:
        """The target's own continuation, with the typed-through rest as a lookup hint; it
        replaces the rest as what the next keystroke is checked against. After `delay_ms` (the
        trigger's delay), and only if nothing newer was shown meanwhile."""
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1e3)
            if self.shown.get(uri) is not shown:
                return
        result = await self.ask(self.request(uri, cursor, around, hints=(shown.text,)))
        if self.shown.get(uri) is shown:  # nothing newer was shown meanwhile
            self._accept(uri, cursor, result)

    def prefetch_after(self, uri: str, accepted: Cursor, around: Surroundings) -> None:
        """Ask the daemon for the suggestion at `accepted`, the cursor after the one shown is
        accepted; the reply only fills the daemon's cache. Asked once per accept branch."""
        if (request := self._ahead(self.prefetch, uri, accepted, around)) is not None:
            self._spawn(self.ask(request))

    def read_ahead(self, uri: str, cursor: Cursor, around: Surroundings) -> None:
        """Have the daemon read `uri`'s prompt at `cursor` (and answer there) on its idle lane,
        before any request: the newest read-ahead wins, so an older one for another document is
        cancelled (the chunks it computed stay cached)."""
        if (request := self._ahead(self.warm, uri, cursor, around)) is None:
            return
        if self.warming is not None and self.warming[0] != uri and self.client is not None:
            self._spawn(self.client.cancel(self.warming[1]))
        self.warming = uri, request.id
        self._spawn(self._read(request))

    def _ahead(self, enabled: bool, uri: str, cursor: Cursor, around: Surroundings) -> protocol.Complete | None:
        """The prefetch for `cursor` (answered only into the daemon's cache, on its idle lane;
        never superseding the document's requests), or None: turned off, or the last one asked
        for this document was this one."""
        if not (enabled and self.reuse) or self.prefetched.get(uri) == (cursor.prefix, cursor.suffix):
            return None
        self.prefetched[uri] = cursor.prefix, cursor.suffix
        return msgspec.structs.replace(self.request(uri, cursor, around), prefetch=True, supersede=False)

    async def _read(self, request: protocol.Complete) -> None:
        try:
            await self.ask(request)
        finally:
            if self.warming == (request.document, request.id):
                self.warming = None

    def _spawn(self, coroutine) -> None:
        task = asyncio.ensure_future(coroutine)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        task.add_done_callback(_quietly)


def _quietly(task: asyncio.Future) -> None:
    """Background work reports its failure in the log, never as an unhandled task error."""
    if not task.cancelled() and task.exception() is not None:
        log.warning("background request failed: %s", task.exception())
