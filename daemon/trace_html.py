"""`specd trace --html`: one self-contained page (inline SVG and CSS, no script, no external asset)
with a histogram of time to result, a waterfall of each request's phases (and what the user took
of its answer), and the suggestions shown and taken over time."""

from __future__ import annotations

from html import escape

from specd.daemon.figures import percentile
from specd.daemon.trace_report import Taken, summary, taken, uptake_totals
from specd.daemon.tracing import TraceRecord, UptakeRecord

COLORS = {"queue": "#b0b0b0", "tokenize": "#8e6bbf", "prefill": "#e0a030", "draft": "#5aa0d8",
          "verify": "#2f6db0", "other": "#d8d8d8", "reply": "#70b070"}
OUTCOME_COLORS = {"done": "#207020", "cancelled": "#b07000", "error": "#b02020"}
BINS = 40
SPANS = 24       # the uptake plot's bars: the reports' time span in this many equal parts
ROW, LABEL, BAR = 14, 340, 760   # waterfall: row height, label width, bar width (px)


def render_page(records: list[TraceRecord], source: str, rows: int = 150, uptake: list[UptakeRecord] = ()) -> str:
    uptake = list(uptake)
    joined = taken(records, uptake)
    first = max(0, len(records) - rows)
    shown = records[first:]
    legend = " ".join(f'<span class="key" style="background:{c}"></span>{p}' for p, c in COLORS.items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>specd trace</title>
<style>
body {{ font: 13px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
pre {{ background: #f6f6f6; padding: 12px; overflow-x: auto; }}
.key {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; vertical-align: middle; }}
svg text {{ font: 11px monospace; fill: #333; }}
</style></head><body>
<h1>specd trace</h1>
<p>{escape(source)}: {len(records)} requests</p>
<pre>{escape(summary(records, uptake))}</pre>
<h2>Time to result (requests answered "done")</h2>
{histogram([r.total_ms for r in records if r.outcome == "done"])}
<h2>Phases of the last {len(shown)} requests</h2>
<p>{legend}</p>
{waterfall(shown, {i - first: t for i, t in joined.items() if i >= first})}
<h2>Suggestions shown and taken over time</h2>
{uptake_plot(uptake)}
</body></html>
"""


def histogram(values: list[float], width: int = 760, height: int = 220) -> str:
    if not values:
        return "<p>none yet</p>"
    top = max(values) or 1.0
    counts = [0] * BINS
    for v in values:
        counts[min(int(v / top * BINS), BINS - 1)] += 1
    plot_h, bar_w, most = height - 40, width / BINS, max(counts)
    parts = [f'<svg width="{width + 120}" height="{height}">']
    for i, n in enumerate(counts):
        h = n / most * plot_h
        lo, hi = i * top / BINS, (i + 1) * top / BINS
        parts.append(f'<rect x="{50 + i * bar_w:.1f}" y="{10 + plot_h - h:.1f}" width="{bar_w - 1:.1f}" '
                     f'height="{h:.1f}" fill="#2f6db0"><title>{lo:.0f}-{hi:.0f} ms: {n}</title></rect>')
    for q in (50, 95):
        x = 50 + percentile(values, q) / top * width
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="10" y2="{10 + plot_h}" stroke="#b02020" '
                     f'stroke-dasharray="4 3"/><text x="{x + 3:.1f}" y="22">p{q}</text>')
    parts += axes(width, height, most, [f"{k / 4 * top:.0f} ms" for k in range(5)])
    return "\n".join(parts)


def axes(width: int, height: int, most: int, ticks: list[str]) -> list[str]:
    """A bar plot's labels: `ticks` spread under it, 0 and `most` up its left side; closes the svg."""
    out = [f'<text x="{50 + k / (len(ticks) - 1) * width:.1f}" y="{height - 12}" text-anchor="middle">{tick}</text>'
           for k, tick in enumerate(ticks)]
    return out + [f'<text x="4" y="{height - 30:.0f}">0</text><text x="4" y="20">{most}</text></svg>']


def segments(r: TraceRecord) -> list[tuple[str, float, str]]:
    """(phase, ms, label) in the order they happened; the steps' drafts and verifies interleave."""
    e = r.stats
    out = [("queue", r.queue_ms, "queue"), ("tokenize", e.tokenize_ms, "tokenize"),
           ("prefill", e.prefill_ms, f"prefill: {e.reused_tokens} reused, {e.prefilled_tokens} new tokens")]
    for n, s in enumerate(e.steps, 1):
        out.append(("draft", s.draft_ms, f"step {n}: {s.drafter} proposed {s.proposed}"))
        out.append(("verify", s.verify_ms, f"step {n}: verified, {s.accepted} accepted"))
    out += [("other", r.other_ms, "other"), ("reply", r.reply_ms, "reply")]
    return out


def took_label(story: Taken | None) -> str:
    if story is None:
        return ""
    left = f", then {story.dismissed}" if story.dismissed else ""
    return (f" · took {story.chars_taken} of {story.chars_shown}{left}" if story.chars_taken
            else f" · shown, not taken{left}")


def waterfall(records: list[TraceRecord], stories: dict[int, Taken] | None = None) -> str:
    """`stories`: what the user took of the answer of records[i], where an editor showed it."""
    stories = stories or {}
    top = max((r.total_ms for r in records), default=0.0) or 1.0
    height = ROW * len(records) + 24
    parts = [f'<svg width="{LABEL + BAR + 80}" height="{height}">']
    for row, r in enumerate(records):
        y = row * ROW
        name = r.document.rsplit("/", 1)[-1][:26]
        parts.append(f'<text x="0" y="{y + 11}" fill="{OUTCOME_COLORS[r.outcome]}">'
                     f'{r.id} {escape(name)} {r.outcome}{" (" + r.cause + ")" if r.cause else ""}'
                     f'{took_label(stories.get(row))}</text>')
        x = float(LABEL)
        for phase, ms, label in segments(r):
            w = max(0.0, ms) / top * BAR
            if w > 0.05:
                parts.append(f'<rect x="{x:.2f}" y="{y + 2}" width="{w:.2f}" height="{ROW - 3}" '
                             f'fill="{COLORS[phase]}"><title>{escape(label)}: {ms:.2f} ms</title></rect>')
            x += w
        parts.append(f'<text x="{x + 4:.1f}" y="{y + 11}">{r.total_ms:.0f} ms</text>')
    for k in range(5):
        parts.append(f'<text x="{LABEL + k / 4 * BAR:.1f}" y="{height - 6}" text-anchor="middle">'
                     f'{k / 4 * top:.0f} ms</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def uptake_plot(uptake: list[UptakeRecord], width: int = 760, height: int = 200) -> str:
    """Per part of the reports' time span: suggestions shown (light) and taken (dark), the share
    of characters taken in each bar's title."""
    if not uptake:
        return "<p>no editor reported a suggestion shown yet</p>"
    start = min(u.at for u in uptake)
    span = max(u.at for u in uptake) - start or 1.0
    parts_of = [[] for _ in range(SPANS)]
    for u in uptake:
        parts_of[min(int((u.at - start) / span * SPANS), SPANS - 1)].append(u)
    totals = [uptake_totals(part) for part in parts_of]
    most = max(t.shown for t in totals) or 1
    plot_h, bar_w = height - 40, width / SPANS
    out = [f'<svg width="{width + 120}" height="{height}">']
    for i, t in enumerate(totals):
        x = 50 + i * bar_w
        for count, color in ((t.shown, "#b8cde6"), (t.taken, "#2f6db0")):
            h = count / most * plot_h
            out.append(f'<rect x="{x:.1f}" y="{10 + plot_h - h:.1f}" width="{bar_w - 1:.1f}" height="{h:.1f}" '
                       f'fill="{color}"><title>{escape(t.summary())}</title></rect>')
    out += axes(width, height, most, [f"+{k / 4 * span / 60:.0f} min" for k in range(5)])
    out.append('<p><span class="key" style="background:#b8cde6"></span>shown'
               '<span class="key" style="background:#2f6db0"></span>taken, whole or in part</p>')
    return "\n".join(out)
