"""What the keyboard felt: the record of each keystroke's request and the figures made from them.

Shared by `specd replay` (against `specd lsp`) and `bench/llama_replay.py` (against llama.cpp's
server), so both report the same fields, counted the same way. Pure: no LSP, no daemon.

Per keystroke (today's fields): answered_share, p50_ms and p95_ms from the key to a suggestion,
match_rate (answered suggestions whose first line begins the real text); daemon_requests, how
many of the requests sent reached the daemon (the trigger's delay and rules hold some back).
Per pause (`--pause-ms`): shown_share (pauses in which ghost text arrived before the next key;
pause_late and pause_empty count the others: no answer before the next key, an empty one in time),
pause_p50_ms and pause_p95_ms (the last key before the pause to the ghost text), pause_match_rate
(over the suggestions shown in pauses) and chars_saved (characters a user could have accepted
instead of typing them: from suggestions shown in pauses that begin the real text, each typed
character counted once however many suggestions covered it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from specd.daemon.figures import percentile


@dataclass
class Keystroke:
    """One key the typist sent, and what became of the request it made."""
    at: float                     # when the key was sent (perf_counter)
    truth: str                    # the real text that followed the cursor once the key was typed
    index: int = 0                # which key of the passage
    pause: bool = False           # the typist paused after this key
    next_at: float | None = None  # when the next key came (or the pause after the last one ended)
    answered_at: float | None = None
    text: str = ""
    cancelled: bool = False

    @property
    def suggested(self) -> bool:
        return self.answered_at is not None and bool(self.text.strip())

    @property
    def shown(self) -> bool:
        """Ghost text arrived while the cursor was still there."""
        return self.suggested and (self.next_at is None or self.answered_at <= self.next_at)


@dataclass
class Outcome:
    """One passage typed: every key's request, and (where the server traces it) the model time."""
    uri: str
    started: float                # unix time of the first keystroke
    typed_chars: int = 0
    ended: float = 0.0            # unix time once typing is over and answered
    warm_ms: float | None = None  # the request made on opening the passage, before typing
    sent: list[Keystroke] = field(default_factory=list)
    model_ms: dict[str, float] | None = None   # per daemon outcome, from its trace
    asked: int | None = None      # requests the daemon received (its trace): what the trigger let through

    def report(self) -> dict:
        return report([self])

    def chars_saved(self) -> int:
        covered: set[int] = set()
        for s in self.sent:
            if s.pause and s.shown and s.truth.startswith(s.text):
                covered.update(range(s.index + 1, min(s.index + 1 + len(s.text), self.typed_chars)))
        return len(covered)


def report(outcomes: list[Outcome]) -> dict:
    """The figures over every passage typed, as one."""
    sent = [s for o in outcomes for s in o.sent]
    answered = [s for s in sent if s.suggested]
    figures = {
        "passages": len(outcomes), "sent": len(sent), "answered": len(answered),
        "answered_share": _share(len(answered), len(sent)),
        "p50_ms": _ms(percentile(_latencies(answered), 50)), "p95_ms": _ms(percentile(_latencies(answered), 95)),
        "match_rate": _share(sum(_first_line_matches(s.text, s.truth) for s in answered), len(answered)),
        "cancelled_by_client": sum(s.cancelled for s in sent),
    }
    if all(o.asked is not None for o in outcomes):
        figures["daemon_requests"] = sum(o.asked for o in outcomes)
    if all(o.model_ms is not None for o in outcomes):
        for outcome in ("cancelled", "done"):
            spent = sum(o.model_ms.get(outcome, 0.0) for o in outcomes)
            figures[f"model_s_{outcome}"] = round(spent / 1e3, 2)
    pauses = [s for s in sent if s.pause]
    if pauses:
        shown = [s for s in pauses if s.shown]
        warm = [o.warm_ms for o in outcomes if o.warm_ms is not None]
        figures.update({
            "pauses": len(pauses), "shown": len(shown), "shown_share": _share(len(shown), len(pauses)),
            # why the others showed nothing: the answer came after the next key (or never), or in
            # time with no text (the model's own completion there was empty)
            "pause_late": sum(not _in_time(s) for s in pauses),
            "pause_empty": sum(_in_time(s) and not s.suggested for s in pauses),
            "pause_p50_ms": _ms(percentile(_latencies(shown), 50)),
            "pause_p95_ms": _ms(percentile(_latencies(shown), 95)),
            "pause_match_rate": _share(sum(_first_line_matches(s.text, s.truth) for s in shown), len(shown)),
            "chars_saved": sum(o.chars_saved() for o in outcomes),
            "chars_typed": sum(o.typed_chars for o in outcomes),
            "warm_p50_ms": _ms(percentile(warm, 50)),
        })
    return figures


def records(outcomes: list[Outcome]) -> list[dict]:
    """Every keystroke as one flat record, for reading why a figure is what it is (`--records`):
    the suggestion beside the real text that followed, its latency, and how it was counted."""
    rows = []
    for o in outcomes:
        for s in o.sent:
            rows.append({"uri": o.uri, "index": s.index, "pause": s.pause, "suggested": s.suggested,
                         "shown": s.shown, "matched": s.suggested and _first_line_matches(s.text, s.truth),
                         "ms": _ms((s.answered_at - s.at) * 1e3) if s.answered_at is not None else None,
                         "cancelled": s.cancelled, "text": s.text, "truth": s.truth[:200]})
    return rows


def write_records(outcomes: list[Outcome], path) -> None:
    with open(path, "w") as f:
        f.writelines(json.dumps(row) + "\n" for row in records(outcomes))


def _in_time(s: Keystroke) -> bool:
    return s.answered_at is not None and (s.next_at is None or s.answered_at <= s.next_at)


def _latencies(sent: list[Keystroke]) -> list[float]:
    return [(s.answered_at - s.at) * 1e3 for s in sent]


def _first_line_matches(suggestion: str, truth: str) -> bool:
    """The real text that followed begins with the suggestion's first line."""
    first = suggestion.split("\n", 1)[0].rstrip()
    return bool(first.strip()) and truth.split("\n", 1)[0].startswith(first)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
