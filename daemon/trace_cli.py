"""`specd trace`: where the time went, from the daemon's trace file.

Percentiles per phase (of requests answered "done"), acceptance per drafter, cancellation counts
by cause; `--html FILE` writes one self-contained page with a latency histogram and a waterfall of
each request's phases (see trace_html.py).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from specd.daemon.config import load_config
from specd.daemon.paths import Paths
from specd.daemon.tracing import PHASES, TraceRecord, percentile, read_trace

QUANTILES = (50, 90, 95, 99, 100)


def add_trace_parser(sub) -> None:
    p = sub.add_parser("trace", help="latency percentiles per phase, acceptance per drafter, cancellations")
    p.add_argument("--file", type=Path, help="the trace (default: trace.jsonl in the state folder)")
    p.add_argument("--last", type=int, help="only the last N requests")
    p.add_argument("--html", type=Path, help="also write a self-contained page: histogram and waterfall")
    p.set_defaults(run=cmd_trace)


def cmd_trace(args) -> int:
    from specd.daemon.cli import UsageError

    path = args.file or Paths.of(load_config(args.config)).trace
    records = read_trace(path)[-args.last:] if args.last else read_trace(path)
    if not records:
        raise UsageError(f"no trace records in {path} (is daemon.trace on, and has the daemon served requests?)")
    print(summary(records))
    if args.html:
        from specd.daemon.trace_html import render_page

        args.html.write_text(render_page(records, source=str(path)))
        print(f"\nwrote {args.html}")
    return 0


def summary(records: list[TraceRecord]) -> str:
    outcomes = Counter(r.outcome for r in records)
    causes = Counter(r.cause for r in records if r.outcome == "cancelled")
    by_cause = ", ".join(f"{cause} {n}" for cause, n in causes.most_common())
    lines = [f"{len(records)} requests: {outcomes['done']} done, {outcomes['cancelled']} cancelled"
             + (f" ({by_cause})" if by_cause else "") + f", {outcomes['error']} errors", ""]
    lines += phase_table([r for r in records if r.outcome == "done"])
    cancelled = [r for r in records if r.outcome == "cancelled"]
    if cancelled:
        after = [r.passes_after_cancel for r in cancelled if r.passes_after_cancel is not None]
        lines += ["", f"cancelled: time to the reply p50 {_ms(percentile([r.total_ms for r in cancelled], 50))}, "
                      f"p95 {_ms(percentile([r.total_ms for r in cancelled], 95))}"
                  + (f"; forward passes begun after the cancel: at most {max(after)}" if after else "")]
    lines += [""] + acceptance_table(records)
    return "\n".join(lines)


def phase_table(done: list[TraceRecord]) -> list[str]:
    if not done:
        return ["no request answered 'done' yet"]
    head = f"{'phase (ms)':12}" + "".join(f"{'max' if q == 100 else f'p{q}':>9}" for q in QUANTILES)
    rows = [head, "-" * len(head)]
    for phase in (*PHASES, "total"):
        values = [r.phase_ms(phase) for r in done]
        rows.append(f"{phase:12}" + "".join(f"{percentile(values, q):9.1f}" for q in QUANTILES))
    reused = sum(r.reused_tokens for r in done)
    prompt = reused + sum(r.prefilled_tokens for r in done)
    new = [float(r.new_tokens) for r in done]
    rows.append(f"tokens: {reused / prompt:.0%} of prompt tokens reused from the cache; "
                f"p50 {percentile(new, 50):.0f} new tokens per completion" if prompt else "tokens: -")
    return rows


def acceptance_table(records: list[TraceRecord]) -> list[str]:
    steps, proposed, accepted = Counter(), Counter(), Counter()
    for r in records:
        for s in r.steps:
            steps[s.drafter] += 1
            proposed[s.drafter] += s.proposed
            accepted[s.drafter] += s.accepted
    if not steps:
        return ["no decoding steps recorded"]
    rows = [f"{'drafter':10}{'steps':>8}{'proposed':>10}{'accepted':>10}{'rate':>7}{'per step':>10}"]
    for name in sorted(steps):
        rate = f"{accepted[name] / proposed[name]:.2f}" if proposed[name] else "-"
        rows.append(f"{name:10}{steps[name]:8}{proposed[name]:10}{accepted[name]:10}{rate:>7}"
                    f"{accepted[name] / steps[name]:10.2f}")
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"
