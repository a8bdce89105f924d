"""`specd bench-daemon`: the daemon's figures, measured against a running daemon as a client sees them.

1. edit: a cold request, then a one-character edit at the cursor (tokens reused, ms, against cold),
   then the character deleted again (the first answer, kept in the suggestion cache);
2. accept: Tab on a suggestion, the request at the cursor after it: with no prefetch, with the
   accept branch prefetched while the user read, and with Tab pressed at once (the request waits
   for the prefetch in flight);
3. cancel: the time from sending Cancel to the "cancelled" reply while a long request runs, in
   prefill (a cold document) and in decoding (a warm one);
4. burst: N keystrokes typed into one document `--interval-ms` apart, one request each, served
   newest-wins, and the same burst with `supersede=false` (every request served), side by side.

The text typed in the burst is the file's own: the N characters after the cursor are taken out
and typed back. Every part uses its own document name, so each starts with a cold cache.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import msgspec

from specd.daemon import protocol
from specd.daemon.client import Client, new_request_id
from specd.daemon.config import Config
from specd.daemon.figures import percentile
from specd.lsp.cursor import cut_at


@dataclass(frozen=True)
class DaemonBench:
    """What `specd bench-daemon` runs, as its settings say in the results."""
    file: str
    at: str | None
    burst: int = 50            # keystrokes in the burst
    interval_ms: float = 30.0  # between keystrokes
    max_tokens: int = 16       # per completion
    cancels: int = 5           # long requests to cancel, in prefill and in decoding each


class Document:
    """The file cut at the cursor, with the next `typed` characters taken out to be typed back."""

    def __init__(self, uri: str, text: str, at: str | None, typed: int):
        """`at` None: the start of the middle line."""
        prefix, suffix = cut_at(text, at or f"{len(text.splitlines()) // 2 + 1}:1")
        self.uri = uri
        self.before, self.future, self.after = prefix, suffix[:typed], suffix[typed:]

    def message(self, name: str, typed: int, max_tokens: int, supersede: bool = True) -> protocol.Complete:
        """The request after typing `typed` characters, for the document called `name`."""
        return protocol.Complete(id=new_request_id(), document=f"{self.uri}#{name}",
                                 text=self.before + self.future[:typed] + self.after,
                                 cursor=len(self.before) + typed, max_tokens=max_tokens, supersede=supersede)

    def accepted(self, name: str, suggestion: str, max_tokens: int) -> protocol.Complete:
        """The request after `suggestion`, shown at the cursor with nothing typed, is accepted."""
        return protocol.Complete(id=new_request_id(), document=f"{self.uri}#{name}",
                                 text=self.before + suggestion + self.future + self.after,
                                 cursor=len(self.before) + len(suggestion), max_tokens=max_tokens)


async def timed(client: Client, message: protocol.Complete) -> tuple[protocol.CompletionReply, float]:
    started = time.perf_counter()
    reply = await client.complete(message)
    return reply, (time.perf_counter() - started) * 1e3


async def edit_reuse(client: Client, doc: Document, run: str, max_tokens: int) -> dict:
    cold, cold_ms = await timed(client, doc.message(f"{run}-edit", 0, max_tokens))
    edit, edit_ms = await timed(client, doc.message(f"{run}-edit", 1, max_tokens))
    back, back_ms = await timed(client, doc.message(f"{run}-edit", 0, max_tokens))
    return {"cold_ms": cold_ms, "cold_prompt_tokens": cold.stats.prompt_tokens,
            "cold_prefilled_tokens": cold.stats.prefilled_tokens, "edit_ms": edit_ms,
            "edit_reused_tokens": edit.stats.reused_tokens, "edit_prefilled_tokens": edit.stats.prefilled_tokens,
            "speedup": cold_ms / edit_ms if edit_ms else None,
            "deleted_back_ms": back_ms, "deleted_back_from_cache": back.stats.from_cache,
            "deleted_back_same": back.text == cold.text}


async def accept_branch(client: Client, doc: Document, run: str, max_tokens: int) -> dict:
    """Tab on a suggestion shown at the cursor: the next request's time with no prefetch, with the
    prefetch done before Tab, and with Tab at once, waiting for the prefetch in flight. Each on a
    document of its own, so each starts cold; the three next suggestions must be the same text."""
    out, texts = {}, []
    for case in ("no_prefetch", "prefetched", "tab_at_once"):
        name = f"{run}-accept-{case}"
        shown = await client.complete(doc.message(name, 0, max_tokens))
        after = doc.accepted(name, shown.text, max_tokens)
        if case != "no_prefetch":
            ahead = msgspec.structs.replace(after, id=new_request_id(), prefetch=True, supersede=False)
            prefetch = asyncio.ensure_future(client.complete(ahead))
            if case == "prefetched":
                await prefetch
            else:
                await until_running(client, ahead.id, reply=prefetch)
        reply, out[f"{case}_ms"] = await timed(client, after)
        out[f"{case}_from_cache"] = reply.stats.from_cache
        texts.append(reply.text)
    out["same_text"] = len(set(texts)) == 1
    return out


async def cancel_latency(client: Client, doc: Document, run: str, config: Config, n: int) -> dict:
    """Cancel long requests once they run: on cold documents (the cancel lands in prefill, whose
    passes are `engine.prefill_chunk` tokens long) and on a warm one (it lands in decoding)."""
    cold = [doc.message(f"{run}-cancel-cold-{i}", 0, config.engine.max_tokens_limit) for i in range(n)]
    await client.complete(doc.message(f"{run}-cancel-warm", 0, 1))     # its prompt is cached now
    # each its own limit: one that finishes before its cancel must not answer the next from the
    # suggestion cache
    warm = [doc.message(f"{run}-cancel-warm", 0, config.engine.max_tokens_limit - i) for i in range(n)]
    return {"prefill": await cancels(client, cold), "decoding": await cancels(client, warm)}


async def cancels(client: Client, messages: list[protocol.Complete]) -> dict:
    latencies, finished_first = [], 0
    for i, message in enumerate(messages):
        task = asyncio.ensure_future(client.complete(message))
        await until_running(client, message.id, reply=task)
        await asyncio.sleep(0.1 * i)                                    # at different points
        started = time.perf_counter()
        await client.cancel(message.id)
        reply = await task
        if reply.outcome == "cancelled":
            latencies.append((time.perf_counter() - started) * 1e3)
        else:
            finished_first += 1
    return {"cancelled": len(latencies), "finished_before_the_cancel": finished_first, "latencies_ms": latencies,
            "p50_ms": percentile(latencies, 50), "max_ms": max(latencies, default=None)}


async def until_running(client: Client, request_id: int, passes: int = 1, reply: asyncio.Future | None = None,
                        timeout_s: float = 120.0) -> protocol.Status | None:
    """The daemon's status once it runs `request_id` and has made `passes` forward passes for it;
    None if `reply` (the task awaiting the request) is done first."""
    deadline = time.monotonic() + timeout_s
    while reply is None or not reply.done():
        status = await client.status()
        if any(a.id == request_id and a.state == "running" and a.passes >= passes for a in status.active):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"request {request_id} did not run within {timeout_s:.0f} s")
        await asyncio.sleep(0.005)
    return None


async def burst(client: Client, doc: Document, run: str, n: int, interval_ms: float, max_tokens: int,
                supersede: bool) -> dict:
    name = f"{run}-burst-{'newest' if supersede else 'all'}"
    await client.complete(doc.message(name, 0, max_tokens))          # the document is open: its cache warm
    started = time.perf_counter()
    tasks, sent = [], []
    for i in range(1, n + 1):
        sent.append(time.perf_counter())
        tasks.append(asyncio.ensure_future(client.complete(doc.message(name, i, max_tokens, supersede))))
        if i < n:
            await asyncio.sleep(interval_ms / 1e3)
    replies = await asyncio.gather(*tasks)
    ended = time.perf_counter()
    return {"sent": n, "answered": sum(r.outcome == "done" for r in replies),
            "cancelled": sum(r.outcome == "cancelled" for r in replies),
            "total_ms": (ended - started) * 1e3, "last_ms": (ended - sent[-1]) * 1e3,
            "model_ms": sum(r.stats.total_ms for r in replies), "last_text": replies[-1].text}


async def run_bench_daemon(config: Config, doc: Document, plan: DaemonBench) -> dict:
    client = await Client.connect(config)
    run = f"bench-{int(time.time())}"
    try:
        status = await client.status()
        result = {"settings": {"file": plan.file, "at": plan.at, "max_tokens": plan.max_tokens,
                               "burst": plan.burst, "interval_ms": plan.interval_ms, "target": status.target,
                               "draft": status.draft, "device": status.device, "dtype": status.dtype}}
        result["edit"] = await edit_reuse(client, doc, run, plan.max_tokens)
        result["accept"] = await accept_branch(client, doc, run, plan.max_tokens)
        result["cancel"] = await cancel_latency(client, doc, run, config, plan.cancels)
        result["burst"] = {
            "newest_wins": await burst(client, doc, run, plan.burst, plan.interval_ms, plan.max_tokens, True),
            "all_served": await burst(client, doc, run, plan.burst, plan.interval_ms, plan.max_tokens, False)}
    finally:
        await client.close()
    return result
