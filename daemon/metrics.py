"""Running totals for `specd status`, fed by the same trace records that go to the trace file."""

from __future__ import annotations

from collections import Counter, deque

from specd.daemon.figures import percentile
from specd.daemon.tracing import TraceRecord

WINDOW = 1000  # latency percentiles cover this many recent completions


class Metrics:
    def __init__(self):
        self.served = self.cancelled = self.errors = 0
        self.from_cache = self.prefetched = 0
        self.prompt_tokens = self.reused_tokens = 0
        self.proposed: Counter[str] = Counter()
        self.accepted: Counter[str] = Counter()
        self.latencies: deque[float] = deque(maxlen=WINDOW)

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

    def refused(self) -> None:
        """An Error reply to a message that never became a job (malformed, invalid, ...)."""
        self.errors += 1

    def reuse(self) -> float | None:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else None

    def acceptance(self) -> dict[str, float]:
        return {name: self.accepted[name] / n for name, n in self.proposed.items() if n}

    def latency(self, q: float) -> float | None:
        return percentile(list(self.latencies), q)
