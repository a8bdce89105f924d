"""`specd trace --html`: one self-contained page (inline SVG and CSS, no script, no external asset)
with a histogram of time to result and a waterfall of each request's phases."""

from __future__ import annotations

from html import escape

from specd.daemon.figures import percentile
from specd.daemon.trace_report import summary
from specd.daemon.tracing import TraceRecord

COLORS = {"queue": "#b0b0b0", "tokenize": "#8e6bbf", "prefill": "#e0a030", "draft": "#5aa0d8",
          "verify": "#2f6db0", "other": "#d8d8d8", "reply": "#70b070"}
OUTCOME_COLORS = {"done": "#207020", "cancelled": "#b07000", "error": "#b02020"}
BINS = 40
ROW, LABEL, BAR = 14, 340, 760   # waterfall: row height, label width, bar width (px)


def render_page(records: list[TraceRecord], source: str, rows: int = 150) -> str:
    shown = records[-rows:]
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
<pre>{escape(summary(records))}</pre>
<h2>Time to result (requests answered "done")</h2>
{histogram([r.total_ms for r in records if r.outcome == "done"])}
<h2>Phases of the last {len(shown)} requests</h2>
<p>{legend}</p>
{waterfall(shown)}
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
    for k in range(5):
        x = 50 + k / 4 * width
        parts.append(f'<text x="{x:.1f}" y="{height - 12}" text-anchor="middle">{k / 4 * top:.0f} ms</text>')
    parts.append(f'<text x="4" y="{10 + plot_h:.0f}">0</text><text x="4" y="20">{most}</text></svg>')
    return "\n".join(parts)


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


def waterfall(records: list[TraceRecord]) -> str:
    top = max((r.total_ms for r in records), default=0.0) or 1.0
    height = ROW * len(records) + 24
    parts = [f'<svg width="{LABEL + BAR + 80}" height="{height}">']
    for row, r in enumerate(records):
        y = row * ROW
        name = r.document.rsplit("/", 1)[-1][:26]
        parts.append(f'<text x="0" y="{y + 11}" fill="{OUTCOME_COLORS[r.outcome]}">'
                     f'{r.id} {escape(name)} {r.outcome}{" (" + r.cause + ")" if r.cause else ""}</text>')
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
