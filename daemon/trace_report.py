"""Where the time went, from the daemon's trace records (`specd trace`, `specd replay`).

`summary`: percentiles per phase (of requests answered "done"), acceptance per drafter,
cancellation counts by cause, and what the user took of the answers shown (`taken`, the uptake
reports joined to their requests); trace_html.py draws the same records. `model_time`: what one
document's requests cost the model, per outcome; `requests_received`: how many reached it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import reduce

from specd.daemon.figures import percentile
from specd.daemon.protocol import Feedback, Uptake
from specd.daemon.tracing import ENGINE_PHASES, PHASES, TraceRecord, UptakeRecord

QUANTILES = (50, 90, 95, 99, 100)


@dataclass
class Taken:
    """What became of one request's answer in the editor."""
    shown: int = 0          # times an editor showed it (or what was left of it after typing)
    chars_shown: int = 0    # characters, the first time
    chars_taken: int = 0    # whole and in part
    dismissed: str = ""     # how the last of it was left, where it was: "typed over" or "escaped"


def taken(records: list[TraceRecord], uptake: list[UptakeRecord]) -> dict[int, Taken]:
    """Each uptake report joined to its request, by position in `records`: the newest request of
    that connection and id received before the report (a restarted daemon numbers its connections
    and ids afresh, so the newest one before is the one)."""
    events = sorted([(r.received_at, 0, i) for i, r in enumerate(records)]
                    + [(u.at, 1, i) for i, u in enumerate(uptake)])
    latest: dict[tuple[int, int], int] = {}
    joined: dict[int, Taken] = {}
    for _, is_report, i in events:
        if not is_report:
            latest[(records[i].client, records[i].id)] = i
            continue
        report = uptake[i]
        if report.request is None or (at := latest.get((report.client, report.request))) is None:
            continue
        story = joined.setdefault(at, Taken())
        if report.event == "shown":
            story.chars_shown = story.chars_shown or report.chars
            story.shown += 1
        elif report.event == "dismissed":
            story.dismissed = report.how
        else:
            story.chars_taken += report.chars
    return joined


def uptake_totals(uptake: list[UptakeRecord]) -> Uptake:
    return reduce(lambda totals, u: totals.counted(Feedback(u.event, u.chars, u.first, u.language, how=u.how)),
                  uptake, Uptake())


def uptake_table(records: list[TraceRecord], uptake: list[UptakeRecord], last: int = 10) -> list[str]:
    """The editors' reports in all, then the requests whose answers were shown: how fast the taken
    ones came against the rest, and the last few."""
    if not uptake:
        return ["suggestions: no editor reported one shown (specd's VS Code and Neovim clients do)"]
    lines = [f"suggestions: {uptake_totals(uptake).summary()}"]
    joined = taken(records, uptake)
    if not joined:
        return lines
    took = [records[i].total_ms for i, t in joined.items() if t.chars_taken]
    left = [records[i].total_ms for i, t in joined.items() if not t.chars_taken]
    lines.append(f"answers shown: {len(joined)} requests; time to result p50 of those taken "
                 f"{_ms(percentile(took, 50))}, of the rest {_ms(percentile(left, 50))}")
    lines.append(f"{'request':>8} {'document':24}{'ms':>8}{'shown':>7}{'chars':>7}{'taken':>7}")
    for i in sorted(joined)[-last:]:
        r, t = records[i], joined[i]
        lines.append(f"{r.id:>8} {r.document.rsplit('/', 1)[-1][:23]:24}{r.total_ms:8.0f}{t.shown:7}"
                     f"{t.chars_shown:7}{t.chars_taken:7}")
    return lines


def summary(records: list[TraceRecord], uptake: list[UptakeRecord] = ()) -> str:
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
    lines += [""] + uptake_table(records, list(uptake))
    return "\n".join(lines)


def phase_table(done: list[TraceRecord]) -> list[str]:
    if not done:
        return ["no request answered 'done' yet"]
    head = f"{'phase (ms)':12}" + "".join(f"{'max' if q == 100 else f'p{q}':>9}" for q in QUANTILES)
    rows = [head, "-" * len(head)]
    for phase in (*PHASES, "total"):
        values = [r.phase_ms(phase) for r in done]
        rows.append(f"{phase:12}" + "".join(f"{percentile(values, q):9.1f}" for q in QUANTILES))
    reused = sum(r.stats.reused_tokens for r in done)
    prompt = reused + sum(r.stats.prefilled_tokens for r in done)
    new = [float(r.stats.new_tokens) for r in done]
    rows.append(f"tokens: {reused / prompt:.0%} of prompt tokens reused from the cache; "
                f"p50 {percentile(new, 50):.0f} new tokens per completion" if prompt else "tokens: -")
    return rows


def acceptance_table(records: list[TraceRecord]) -> list[str]:
    steps, proposed, accepted = Counter(), Counter(), Counter()
    for r in records:
        steps.update(s.drafter for s in r.stats.steps)
        proposed.update(r.stats.proposed)
        accepted.update(r.stats.accepted)
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


def model_time(records: list[TraceRecord], document: str, since: float, until: float) -> dict[str, float]:
    """Model time (ms) spent on `document`'s requests received after `since` and answered by
    `until` (unix times), per outcome: what cancelled requests cost is what typing made the model
    throw away."""
    out: dict[str, float] = {}
    for r in records:
        if r.document == document and since <= r.received_at and r.received_at + r.total_ms / 1e3 <= until:
            busy = sum(r.phase_ms(phase) for phase in (*ENGINE_PHASES, "other"))
            out[r.outcome] = out.get(r.outcome, 0.0) + busy
    return out


def requests_received(records: list[TraceRecord], document: str, since: float, until: float) -> int:
    """How many requests for `document` (not prefetches: no one waited for those) the daemon
    received between `since` and `until` (unix times): what a client's trigger rules let through."""
    return sum(r.document == document and not r.prefetch and since <= r.received_at <= until for r in records)
