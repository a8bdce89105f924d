"""The drafter interface, the pacing drafters learn across requests, and the trivial and hybrid
drafters.

A `Drafter` is made once per mode at start-up and keeps only what it learns across requests (the
draft model's `Pacing`). Each request gets its own `Proposer` from `begin`, holding that
request's state, so that no request (and no other mode) sees another's. The decode loop holds
one proposer and never asks which: `propose` before each target pass, `observe` after it.

A target pass costs nearly the same at every width it may take (decoding/forward.py), so
verifying a draft costs about what a plain step costs: an accepted token saves one target pass, a
rejected one costs next to nothing on the target's side. What a draft costs is the drafter's own
time, which `Pacing` weighs against the passes it saves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch

from specd.decoding.kvcache import KVCache
from specd.decoding.policy import hybrid_takes_lookup
from specd.decoding.prompt import Prompt
from specd.decoding.request import Sampler


@dataclass
class Proposal:
    tokens: list[int]
    drafter: str
    probs: torch.Tensor | None = None  # [k, V] the draft's distributions; None: one-hot
    match: int = 0                     # lookup: length of the n-gram that matched
    forwards: int = 0                  # draft model passes it took
    prefill_s: float = 0.0             # of its time, the draft model reading the prompt (once a request)
    token_probs: list[float] = field(default_factory=list)  # draft model: the probability of each token


@dataclass(frozen=True)
class DraftJob:
    """What a drafter may know of one request."""
    prompt: Prompt
    previous: list[int] = field(default_factory=list)  # last completion for this document
    sampler: Sampler = Sampler()
    generator: torch.Generator | None = None
    cancelled: Callable[[], bool] = lambda: False
    draft_cache: KVCache | None = None  # the document's cache for the draft model


class Proposer(Protocol):
    """One request's drafting."""

    def propose(self, context: list[int], limit: int) -> Proposal: ...

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None: ...


class Drafter(Protocol):
    """One mode's drafter, made at start-up."""
    name: str

    def begin(self, job: DraftJob) -> Proposer: ...


class Pacing:
    """Whether a drafter's proposing pays at all; learned across requests, one per mode.

    Payoff: an exponential average of (accepted x target step time - drafting time). While it is
    negative the drafter sits out, for a back-off that doubles each time it is found not to pay.
    It is judged only after `JUDGE_AFTER` proposals since it last sat out: one rejected proposal
    says little, and a pass without a draft costs a whole target pass for one token. `judge`
    False: it never sits out.
    """
    JUDGE_AFTER = 3

    def __init__(self, alpha: float = 0.3, judge: bool = True):
        self.alpha, self.judge = alpha, judge
        self.gain = 0.0          # seconds saved per proposal, averaged
        self.resting = 0         # proposals still to sit out
        self.backoff = 2
        self.seen = 0            # proposals since it last sat out

    def pays(self) -> bool:
        if self.resting > 0:
            self.resting -= 1
            return False
        return True

    def update(self, proposed: int, accepted: int, propose_s: float, step_s: float) -> None:
        if proposed == 0:
            return
        self.gain += self.alpha * (accepted * step_s - propose_s - self.gain)
        self.seen += 1
        if self.gain < 0 and self.judge and self.seen >= self.JUDGE_AFTER:
            self.resting, self.backoff = self.backoff, min(self.backoff * 2, 64)
            self.gain, self.seen = 0.0, 0  # probe afresh after resting
        elif self.gain >= 0:
            self.backoff = 2


class NoDrafter:
    """Plain decoding through the same loop: the baseline every other drafter is measured by.
    It has no state, so it is its own proposer."""
    name = "none"

    def begin(self, job: DraftJob) -> NoDrafter:
        return self

    def propose(self, context: list[int], limit: int) -> Proposal:
        return Proposal([], self.name)

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        pass


class HybridDrafter:
    """Prompt lookup first; the draft model only where lookup has no match worth trying."""
    name = "hybrid"

    def __init__(self, lookup: Drafter, model: Drafter, min_match: int = 2):
        self.lookup, self.model, self.min_match = lookup, model, min_match

    def begin(self, job: DraftJob) -> HybridProposer:
        return HybridProposer(self.lookup.begin(job), self.model.begin(job), self.lookup.name, self.min_match)


class HybridProposer:
    def __init__(self, lookup: Proposer, model: Proposer, lookup_name: str, min_match: int):
        self.lookup, self.model, self.lookup_name, self.min_match = lookup, model, lookup_name, min_match

    def propose(self, context: list[int], limit: int) -> Proposal:
        found = self.lookup.propose(context, limit)
        if hybrid_takes_lookup(found.match, self.min_match):
            return found
        drafted = self.model.propose(context, limit)
        return drafted if drafted.tokens else found

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        owner = self.lookup if proposal.drafter == self.lookup_name else self.model
        owner.observe(proposal, accepted, propose_s, step_s)
