"""`specd bench-daemon`: the daemon's figures, measured against a running daemon as a client sees them.

1. edit: a cold request, then a one-character edit at the cursor (tokens reused, ms, against cold);
2. cancel: the time from sending Cancel to the "cancelled" reply while a long request runs, in
   prefill (a cold document) and in decoding (a warm one);
3. burst: N keystrokes typed into one document `--interval-ms` apart, one request each, served
   newest-wins, and the same burst with `supersede=false` (every request served), side by side.

The text typed in the burst is the file's own: the N characters after the cursor are taken out
and typed back. Every part uses its own document name, so each starts with a cold cache.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
import time
from pathlib import Path

from specd.daemon import protocol
from specd.daemon.client import Client, new_request_id
from specd.daemon.config import Config, load_config
from specd.daemon.tracing import percentile


def add_bench_daemon_parser(sub) -> None:
    p = sub.add_parser("bench-daemon", help="against a running daemon: edit reuse, cancel latency, a burst "
                                            "with and without newest-wins")
    p.add_argument("--file", type=Path, default=Path(textwrap.__file__),
                   help="the document (default: the standard library's textwrap.py)")
    p.add_argument("--at", help="LINE:COL where typing starts (default: the start of the middle line)")
    p.add_argument("--burst", type=int, default=50, help="keystrokes in the burst (default 50)")
    p.add_argument("--interval-ms", type=float, default=30.0, help="between keystrokes (default 30)")
    p.add_argument("--max-tokens", type=int, default=16, help="per completion (default 16)")
    p.add_argument("--cancels", type=int, default=5, help="long requests to cancel (default 5)")
    p.add_argument("--json", type=Path, help="write the results here")
    p.set_defaults(run=cmd_bench_daemon)


class Document:
    """The file cut at the cursor, with the next `typed` characters taken out to be typed back."""

    def __init__(self, path: Path, at: str | None, typed: int):
        from specd.daemon.cli import read_cursor

        if at is None:
            lines = path.read_text().splitlines(keepends=True)
            at = f"{len(lines) // 2 + 1}:1"
        self.uri, prefix, suffix = read_cursor(str(path), at)
        self.before, self.future, self.after = prefix, suffix[:typed], suffix[typed:]

    def message(self, name: str, typed: int, max_tokens: int, supersede: bool = True) -> protocol.Complete:
        """The request after typing `typed` characters, for the document called `name`."""
        return protocol.Complete(id=new_request_id(), document=f"{self.uri}#{name}",
                                 text=self.before + self.future[:typed] + self.after,
                                 cursor=len(self.before) + typed, max_tokens=max_tokens, supersede=supersede)


async def timed(client: Client, message: protocol.Complete) -> tuple[protocol.Completion, float]:
    started = time.perf_counter()
    reply = await client.complete(message)
    return reply, (time.perf_counter() - started) * 1e3


async def edit_reuse(client: Client, doc: Document, run: str, max_tokens: int) -> dict:
    cold, cold_ms = await timed(client, doc.message(f"{run}-edit", 0, max_tokens))
    edit, edit_ms = await timed(client, doc.message(f"{run}-edit", 1, max_tokens))
    return {"cold_ms": cold_ms, "cold_prompt_tokens": cold.stats.prompt_tokens,
            "cold_prefilled_tokens": cold.stats.prefilled_tokens, "edit_ms": edit_ms,
            "edit_reused_tokens": edit.stats.reused_tokens, "edit_prefilled_tokens": edit.stats.prefilled_tokens,
            "speedup": cold_ms / edit_ms if edit_ms else None}


async def cancel_latency(client: Client, doc: Document, run: str, config: Config, n: int) -> dict:
    """Cancel long requests once they run: on cold documents (the cancel lands in prefill, whose
    passes are `engine.prefill_chunk` tokens long) and on a warm one (it lands in decoding)."""
    cold = [doc.message(f"{run}-cancel-cold-{i}", 0, config.engine.max_tokens_limit) for i in range(n)]
    await client.complete(doc.message(f"{run}-cancel-warm", 0, 1))     # its prompt is cached now
    warm = [doc.message(f"{run}-cancel-warm", 0, config.engine.max_tokens_limit) for _ in range(n)]
    return {"prefill": await cancels(client, cold), "decoding": await cancels(client, warm)}


async def cancels(client: Client, messages: list[protocol.Complete]) -> dict:
    latencies, finished_first = [], 0
    for i, message in enumerate(messages):
        task = asyncio.ensure_future(client.complete(message))
        await until_running(client, message.id, task)
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


async def until_running(client: Client, request_id: int, task: asyncio.Future) -> None:
    while not task.done():
        status = await client.status()
        if any(a.id == request_id and a.state == "running" and a.passes for a in status.active):
            return
        await asyncio.sleep(0.005)


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


async def run_bench(args, config: Config) -> dict:
    doc = Document(args.file, args.at, args.burst)
    client = await Client.connect(config)
    run = f"bench-{int(time.time())}"
    try:
        status = await client.status()
        result = {"settings": {"file": str(args.file), "at": args.at, "max_tokens": args.max_tokens,
                               "burst": args.burst, "interval_ms": args.interval_ms, "target": status.target,
                               "draft": status.draft, "device": status.device, "dtype": status.dtype}}
        result["edit"] = await edit_reuse(client, doc, run, args.max_tokens)
        result["cancel"] = await cancel_latency(client, doc, run, config, args.cancels)
        result["burst"] = {
            "newest_wins": await burst(client, doc, run, args.burst, args.interval_ms, args.max_tokens, True),
            "all_served": await burst(client, doc, run, args.burst, args.interval_ms, args.max_tokens, False)}
    finally:
        await client.close()
    return result


def cmd_bench_daemon(args) -> int:
    result = asyncio.run(run_bench(args, load_config(args.config)))
    print_report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1))
    return 0


def print_report(r: dict) -> None:
    e, c, b = r["edit"], r["cancel"], r["burst"]
    ms = lambda x: "-" if x is None else f"{x:.0f} ms"  # noqa: E731
    s = r["settings"]
    print(f"target {s['target']}, draft {s['draft']} on {s['device']} ({s['dtype']}); max_tokens {s['max_tokens']}")
    print(f"cold request        {ms(e['cold_ms']):>9}  ({e['cold_prompt_tokens']} prompt tokens, "
          f"{e['cold_prefilled_tokens']} prefilled)")
    print(f"one-character edit  {ms(e['edit_ms']):>9}  ({e['edit_reused_tokens']} reused, "
          f"{e['edit_prefilled_tokens']} prefilled; {e['speedup']:.1f}x the cold request's speed)")
    for phase in ("prefill", "decoding"):
        p = c[phase]
        print(f"cancel in {phase:9} p50 {ms(p['p50_ms'])}, max {ms(p['max_ms'])} over {p['cancelled']} cancels"
              + (f" ({p['finished_before_the_cancel']} finished first)" if p["finished_before_the_cancel"] else ""))
    n, w = b["newest_wins"], b["all_served"]
    print(f"\nburst of {s['burst']} keystrokes, {s['interval_ms']:.0f} ms apart   newest-wins   all served")
    for key, label in (("answered", "answered (done)"), ("cancelled", "cancelled")):
        print(f"  {label:36}{n[key]:>12}{w[key]:>13}")
    for key, label in (("total_ms", "total time"), ("last_ms", "last keystroke to its completion"),
                       ("model_ms", "model time spent")):
        print(f"  {label:36}{ms(n[key]):>12}{ms(w[key]):>13}")
