"""One completion, through the daemon or in this process (`specd complete`, `--no-daemon`).

Both paths take the same protocol message and turn it into the engine's request with the same
function (`jobs.engine_request`), so in this process the text is the one the daemon gives. Each
returns a report: text, outcome, stop reason and the stats, as one flat dict.
"""

from __future__ import annotations

import time

from specd.daemon import protocol
from specd.daemon.client import Client
from specd.daemon.config import Config


async def through_daemon(config: Config, message: protocol.Complete) -> dict:
    client = await Client.connect(config)
    try:
        started = time.perf_counter()
        reply = await client.complete(message)
        round_trip_ms = (time.perf_counter() - started) * 1e3
    finally:
        await client.close()
    return {"text": reply.text, "outcome": reply.outcome, "stop_reason": reply.stop_reason,
            "round_trip_ms": round(round_trip_ms, 1), "queue_ms": reply.queue_ms, **reply.stats.summary()}


def in_process(config: Config, message: protocol.Complete) -> dict:
    from specd.daemon.jobs import engine_request  # torch: only this path loads the models
    from specd.daemon.runtime import build_engine

    request = engine_request(message, config.completion)
    started = time.perf_counter()
    engine = build_engine(config)
    load_s = time.perf_counter() - started
    result = engine.complete(request)
    return {"text": result.text, "outcome": result.outcome, "stop_reason": result.stop_reason,
            "load_s": round(load_s, 2), **result.stats.summary()}
