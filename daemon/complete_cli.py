"""`specd complete`: one completion of a file at a position, in this process or through the daemon."""

from __future__ import annotations

import json
import sys
import time

from daemon.config import Config
from decoding.engine import CompletionRequest
from decoding.verify import Sampler


def request_from(args, config: Config) -> CompletionRequest:
    from daemon.cli import read_cursor

    uri, prefix, suffix = read_cursor(args.file, args.at)
    c = config.completion
    return CompletionRequest(
        prefix=prefix, suffix=suffix, document=uri,
        max_tokens=args.max_tokens or c.max_tokens,
        single_line=args.single_line,
        sampler=Sampler(c.temperature, c.top_p),
        deadline_s=c.deadline_ms / 1e3 if c.deadline_ms else None,
        drafter=args.drafter or c.drafter,
    )


def complete(args, config: Config) -> int:
    request = request_from(args, config)
    if not args.no_daemon:
        from daemon.client import complete_via_daemon
        return complete_via_daemon(args, config, request)
    from daemon.runtime import build_engine

    started = time.perf_counter()
    engine = build_engine(config)
    load_s = time.perf_counter() - started
    result = engine.complete(request)
    report = {"text": result.text, "outcome": result.outcome, "stop_reason": result.stop_reason,
              "load_s": round(load_s, 2), **result.stats.as_dict()}
    report.pop("steps")
    show(report, args.json)
    return 0


def show(report: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=1))
        return
    print(report["text"])
    s = report
    print(f"--- {s['outcome']} ({s['stop_reason']}): {s['new_tokens']} tokens in {s['total_ms']:.0f} ms "
          f"(prefill {s['prefill_ms']:.0f} ms: {s['reused_tokens']} reused, {s['prefilled_tokens']} new; "
          f"draft {s['draft_ms']:.0f} ms, verify {s['verify_ms']:.0f} ms)", file=sys.stderr)
