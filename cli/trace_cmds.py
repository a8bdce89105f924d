"""`specd trace`: where the time went, from the daemon's trace file; `--html` also draws it."""

from __future__ import annotations

from pathlib import Path

from specd.cli.usage import UsageError
from specd.daemon.config import load_config
from specd.daemon.paths import Paths
from specd.daemon.trace_html import render_page
from specd.daemon.trace_report import summary
from specd.daemon.tracing import read_trace, read_uptake


def add_parsers(sub) -> None:
    p = sub.add_parser("trace", help="latency percentiles per phase, acceptance per drafter, cancellations, "
                                     "suggestions taken")
    p.add_argument("--file", type=Path, help="the trace (default: trace.jsonl in the state folder)")
    p.add_argument("--last", type=int, help="only the last N requests")
    p.add_argument("--html", type=Path, help="also write a self-contained page: histogram and waterfall")
    p.set_defaults(run=cmd_trace)


def cmd_trace(args) -> int:
    path = args.file or Paths.of(load_config(args.config)).trace
    records = read_trace(path)[-args.last:] if args.last else read_trace(path)
    if not records:
        raise UsageError(f"no trace records in {path} (is daemon.trace on, and has the daemon served requests?)")
    since = records[0].received_at  # the uptake reports of the requests shown, not of older ones
    uptake = [u for u in read_uptake(path) if u.at >= since]
    print(summary(records, uptake))
    if args.html:
        args.html.write_text(render_page(records, source=str(path), uptake=uptake))
        print(f"\nwrote {args.html}")
    return 0
