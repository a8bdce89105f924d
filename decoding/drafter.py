"""The drafter interface, what drafters learn across requests, and the trivial and hybrid
drafters.

A `Drafter` is made once per mode at start-up and keeps only what it learns across requests (the
draft model's `Pacing`, prompt lookup's `Acceptance`). Each request gets its own `Proposer` from
`begin`, holding that request's state, so that no request (and no other mode) sees another's. The
decode loop holds one proposer and never asks which: `propose` before each target pass, with the
most tokens a pass may verify, and `observe` after it.

What a pass costs by its width is measured per machine (decoding/curve.py); the rules of
decoding/policy.py weigh it against what a proposal is expected to give, to choose how many
tokens to verify, and `Pacing` weighs it to judge whether drafting with the model pays at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import torch

from specd.decoding.kvcache import KVCache
from specd.decoding.policy import PassCosts, hybrid_takes_lookup
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
    target_cache: KVCache | None = None  # the target's (a `layerskip` draft runs on its layers)


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

    Payoff, in ms per proposal: what the accepted tokens and the target's own one would have cost
    as plain passes, less the pass that verified them and the drafting. The drafting and the pass
    are as timed; a plain pass is that pass scaled by the machine's curve (`costs`: a plain pass
    costs verify_ms[0] / verify_ms[k] of one that verifies k tokens), so that the curve gives the
    widths' relative costs and today's passes their scale, whatever else the machine is running.
    An exponential average; while it is negative the drafter sits out,
    for a back-off that doubles each time it is found not to pay. It is judged only after
    `JUDGE_AFTER` proposals since it last sat out: one rejected proposal says little, and a pass
    without a draft costs a whole target pass for one token. `judge` False: it never sits out.
    """
    JUDGE_AFTER = 3

    def __init__(self, costs: PassCosts, alpha: float = 0.3, judge: bool = True):
        self.costs, self.alpha, self.judge = costs, alpha, judge
        self.gain = 0.0          # ms saved per proposal, averaged
        self.resting = 0         # proposals still to sit out
        self.backoff = 2
        self.seen = 0            # proposals since it last sat out

    def pays(self) -> bool:
        if self.resting > 0:
            self.resting -= 1
            return False
        return True

    def update(self, proposed: int, accepted: int, propose_s: float, step_s: float) -> None:
        """A proposal that drafted (`proposed` of its tokens verified, possibly none), its outcome,
        and the time of its drafting and of the pass that verified it."""
        plain_s = step_s * self.costs.verify_ms[0] / self.costs.verify_ms[proposed]
        saved_ms = ((accepted + 1) * plain_s - step_s - propose_s) * 1e3
        self.gain += self.alpha * (saved_ms - self.gain)
        self.seen += 1
        if self.gain < 0 and self.judge and self.seen >= self.JUDGE_AFTER:
            self.resting, self.backoff = self.backoff, min(self.backoff * 2, 64)
            self.gain, self.seen = 0.0, 0  # probe afresh after resting
        elif self.gain >= 0:
            self.backoff = 2


class Acceptance:
    """How likely prompt lookup's drafted tokens are accepted, by position; learned across
    requests, one per mode that drafts by lookup (its tokens have no probabilities of their own).

    `rates[i]`: an exponential average of whether the token at position i + 1 was accepted where
    every one before it was. A proposal the pass verified tells it of its positions up to the
    first rejection, and of one past the tokens verified, since the target's own token says
    whether the next token found would have been right: so the rule learns of a longer proposal
    before it is worth trying. `prior` is what it assumes of a position it has not seen."""

    def __init__(self, longest: int, prior: float = 0.6, alpha: float = 0.1):
        self.rates, self.alpha = [prior] * longest, alpha

    def probs(self, n: int) -> list[float]:
        return self.rates[:n]

    def update(self, agreed: int, known: int) -> None:
        """A proposal whose first `agreed` tokens were the decoded ones, of `known` positions decoded."""
        for i in range(min(agreed + 1, known, len(self.rates))):
            self.rates[i] += self.alpha * (float(i < agreed) - self.rates[i])


def agreement(proposed: list[int], decoded: list[int]) -> int:
    """How many leading tokens of a proposal the decoding then produced."""
    agreed = 0
    while agreed < min(len(proposed), len(decoded)) and decoded[agreed] == proposed[agreed]:
        agreed += 1
    return agreed


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
