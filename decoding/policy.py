"""The drafting rules: where the draft model ends a proposal, and which drafter hybrid asks.

They are rules rather than mechanisms, so they live apart from the drafters that follow them:
the engine's drafters call them, and bench/tune_hybrid.py replays them on recorded tokens, so the
tuner ranks the very rules the engine runs (README, "Tuning").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DraftStop:
    """The draft model ends a proposal after the token where its confidence falls below
    `confidence`: the product of the probabilities it gave its tokens so far (`cumulative`, the
    engine's rule), or that token's own probability (a variant the tuner compares).

    A well calibrated draft's product is the odds that the whole proposal is accepted; below a
    point, the next token's expected saving is worth less than the draft pass it costs, and the
    target checks what there is. That stop is the draft's only length rule."""
    confidence: float = 0.5
    cumulative: bool = True

    def sure(self, so_far: float, p: float) -> float:
        """The confidence after a token the draft gave probability `p`."""
        return so_far * p if self.cumulative else p

    def stops(self, sure: float) -> bool:
        return sure < self.confidence

    def kept(self, probs: list[float]) -> int:
        """How many tokens of a full-length proposal with these probabilities the rule keeps."""
        sure = 1.0
        for n, p in enumerate(probs, 1):
            sure = self.sure(sure, p)
            if self.stops(sure):
                return n
        return len(probs)


def hybrid_takes_lookup(match: int, min_match: int) -> bool:
    """Hybrid proposes what prompt lookup found where its match is at least `min_match` tokens
    long (lookup is free; the draft model is not), and asks the draft model otherwise."""
    return match >= min_match
