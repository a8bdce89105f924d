"""What one completion cost: tokens reused and computed, passes, drafts, and time per phase.

`Stats` is the one record of it: the engine fills it, and the daemon's reply, its trace line and
its `specd status` totals carry it as it is (a msgspec Struct, so it goes on the wire and into
the trace file unchanged). A new figure is a new field here and nowhere else. Torch-free.
"""

from __future__ import annotations

import msgspec


class Step(msgspec.Struct, array_like=True):
    """One propose + verify round of the decode loop (a JSON array: the trace has one per step)."""
    drafter: str
    proposed: int
    accepted: int
    draft_ms: float
    verify_ms: float
    draft_forwards: int = 0
    match: int = 0                 # lookup: the matched n-gram's length
    draft_prefill_ms: float = 0.0  # of draft_ms, the draft model reading the prompt


class Stats(msgspec.Struct):
    prompt_tokens: int = 0
    reused_tokens: int = 0         # prompt tokens whose KV came from the document's cache
    prefilled_tokens: int = 0
    new_tokens: int = 0
    target_forwards: int = 0
    draft_forwards: int = 0
    proposed: dict[str, int] = {}  # per drafter
    accepted: dict[str, int] = {}  # per drafter
    tokenize_ms: float = 0.0
    prefill_ms: float = 0.0
    draft_prefill_ms: float = 0.0  # the draft model reading the prompt, lazily, within draft_ms
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    total_ms: float = 0.0          # the engine's time, from tokenizing to the last token
    glance: bool = False           # answered from a glance: the prefix window nearest the cursor, the whole
                                   # prompt not yet read (engine.glance_tokens)
    from_cache: bool = False       # answered from the daemon's suggestion cache: no model work
    server_timings: bool = False   # an inference server computed it and prefill_ms / verify_ms are its own
                                   # prompt and predict ms (llama.cpp's `timings`); False there: timed here,
                                   # to the first streamed text and from it to the end
    steps: list[Step] = []

    def record(self, step: Step) -> None:
        self.steps.append(step)
        self.target_forwards += 1
        self.draft_forwards += step.draft_forwards
        self.proposed[step.drafter] = self.proposed.get(step.drafter, 0) + step.proposed
        self.accepted[step.drafter] = self.accepted.get(step.drafter, 0) + step.accepted
        self.draft_ms += step.draft_ms
        self.draft_prefill_ms += step.draft_prefill_ms
        self.verify_ms += step.verify_ms

    def summary(self) -> dict:
        """Every figure but the steps, as plain values (for reports printed as JSON)."""
        out = msgspec.to_builtins(self)
        del out["steps"]
        return out
