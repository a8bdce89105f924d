"""`specd complete`: one completion of a file at a position, through the daemon or in this process.

Both paths make the same protocol message and turn it into the engine's request with the same
function (`jobs.engine_request`), so `--no-daemon` gives the text the daemon gives.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import msgspec

from specd.daemon import protocol
from specd.daemon.config import Config


def message_from(args) -> protocol.Complete:
    from specd.daemon.cli import read_cursor
    from specd.daemon.client import new_request_id

    uri, prefix, suffix = read_cursor(args.file, args.at)
    return protocol.Complete(id=new_request_id(), document=uri, prefix=prefix, suffix=suffix,
                             max_tokens=args.max_tokens, single_line=args.single_line, drafter=args.drafter)


def complete(args, config: Config) -> int:
    message = message_from(args)
    report = asyncio.run(through_daemon(config, message)) if not args.no_daemon else in_process(config, message)
    show(report, args.json)
    return 0


async def through_daemon(config: Config, message: protocol.Complete) -> dict:
    from specd.daemon.client import Client

    client = await Client.connect(config)
    try:
        started = time.perf_counter()
        reply = await client.complete(message)
        round_trip_ms = (time.perf_counter() - started) * 1e3
    finally:
        await client.close()
    return {"text": reply.text, "outcome": reply.outcome, "stop_reason": reply.stop_reason,
            "round_trip_ms": round(round_trip_ms, 1), **msgspec.structs.asdict(reply.stats)}


def in_process(config: Config, message: protocol.Complete) -> dict:
    from specd.daemon.jobs import engine_request
    from specd.daemon.runtime import build_engine

    request = engine_request(message, config.completion)
    started = time.perf_counter()
    engine = build_engine(config)
    load_s = time.perf_counter() - started
    result = engine.complete(request)
    report = {"text": result.text, "outcome": result.outcome, "stop_reason": result.stop_reason,
              "load_s": round(load_s, 2), **result.stats.as_dict()}
    report.pop("steps")
    return report


def show(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print(report["text"])
    s = report
    where = f"; {s['round_trip_ms']:.0f} ms through the daemon" if "round_trip_ms" in s else ""
    print(f"--- {s['outcome']} ({s['stop_reason']}): {s['new_tokens']} tokens in {s['total_ms']:.0f} ms "
          f"(prefill {s['prefill_ms']:.0f} ms: {s['reused_tokens']} reused, {s['prefilled_tokens']} new; "
          f"draft {s['draft_ms']:.0f} ms, verify {s['verify_ms']:.0f} ms{where})", file=sys.stderr)
