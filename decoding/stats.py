"""What one completion cost: tokens reused and computed, passes, drafts, and time per phase."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field


@dataclass
class Step:
    """One propose + verify round of the decode loop."""
    drafter: str
    proposed: int
    accepted: int
    draft_ms: float
    verify_ms: float
    draft_forwards: int = 0
    match: int = 0                 # lookup: the matched n-gram's length
    draft_prefill_ms: float = 0.0  # of draft_ms, the draft model reading the prompt


@dataclass
class Stats:
    prompt_tokens: int = 0
    reused_tokens: int = 0
    prefilled_tokens: int = 0
    new_tokens: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    proposed: Counter = field(default_factory=Counter)   # per drafter
    accepted: Counter = field(default_factory=Counter)   # per drafter
    tokenize_ms: float = 0.0
    prefill_ms: float = 0.0
    draft_prefill_ms: float = 0.0  # the draft model reading the prompt, lazily, within draft_ms
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    total_ms: float = 0.0
    steps: list[Step] = field(default_factory=list)

    def record(self, step: Step) -> None:
        self.steps.append(step)
        self.target_forwards += 1
        self.draft_forwards += step.draft_forwards
        self.proposed[step.drafter] += step.proposed
        self.accepted[step.drafter] += step.accepted
        self.draft_ms += step.draft_ms
        self.draft_prefill_ms += step.draft_prefill_ms
        self.verify_ms += step.verify_ms

    def as_dict(self) -> dict:
        out = asdict(self)
        out["proposed"], out["accepted"] = dict(self.proposed), dict(self.accepted)
        return out
