"""Running totals for `specd status`, fed by the same trace records that go to the trace file."""

from __future__ import annotations

import time
from collections import Counter, deque
from functools import reduce

from specd.daemon.figures import percentile
from specd.daemon.protocol import Feedback, Uptake
from specd.daemon.tracing import TraceRecord

WINDOW = 1000  # latency percentiles cover this many recent completions
HOUR = 3600.0
RECENT_FEEDBACK = 100_000   # reports kept for the last hour's totals (a fast typist makes ~10k an hour)
LANGUAGES = 64              # languages counted apart; any more (an editor names them) count as "other"


class Metrics:
    def __init__(self):
        self.served = self.cancelled = self.errors = 0
        self.from_cache = self.prefetched = 0
        self.prompt_tokens = self.reused_tokens = 0
        self.proposed: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.latencies: deque[float] = deque(maxlen=WINDOW)
        self.by_language: dict[str, Uptake] = {}
        self.recent_feedback: deque[tuple[float, Feedback]] = deque(maxlen=RECENT_FEEDBACK)

    def add(self, line: TraceRecord) -> None:
        if line.prefetch and line.outcome == "done":   # no one waited for it: not a latency
            self.prefetched += 1
        elif line.outcome == "done":
            self.served += 1
            self.from_cache += line.stats.from_cache
            self.latencies.append(line.total_ms)
        elif line.outcome == "cancelled":
            self.cancelled += 1
        else:
            self.errors += 1
        s = line.stats
        # The last prompt token always goes through the decoding pass, so reuse is over the rest.
        self.prompt_tokens += s.reused_tokens + s.prefilled_tokens
        self.reused_tokens += s.reused_tokens
        self.proposed.update(s.proposed)   # the engine's per-drafter totals, as it summed them
        self.accepted.update(s.accepted)

    def feedback(self, event: Feedback, now: float | None = None) -> None:
        """A language server's report on a suggestion it showed (lsp/uptake.py keeps each one's story)."""
        language = event.language or "unknown"
        if language not in self.by_language and len(self.by_language) >= LANGUAGES:
            language = "other"
        self.by_language[language] = self.by_language.get(language, Uptake()).counted(event)
        self.recent_feedback.append((time.monotonic() if now is None else now, event))

    def uptake(self) -> Uptake:
        """Since start, all languages."""
        return sum(self.by_language.values(), Uptake())

    def uptake_within(self, seconds: float = HOUR, now: float | None = None) -> Uptake:
        """Over the last `seconds` (reports older than that are dropped as it goes)."""
        since = (time.monotonic() if now is None else now) - seconds
        while self.recent_feedback and self.recent_feedback[0][0] < since:
            self.recent_feedback.popleft()
        return reduce(lambda totals, report: totals.counted(report[1]), self.recent_feedback, Uptake())

    def refused(self) -> None:
        """An Error reply to a message that never became a job (malformed, invalid, ...)."""
        self.errors += 1

    def reuse(self) -> float | None:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else None

    def acceptance(self) -> dict[str, float]:
        return {name: self.accepted[name] / n for name, n in self.proposed.items() if n}

    def latency(self, q: float) -> float | None:
        return percentile(list(self.latencies), q)
