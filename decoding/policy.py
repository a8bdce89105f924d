"""The drafting rules: how many drafted tokens a pass verifies, and which drafter hybrid asks.

They are rules rather than mechanisms, so they live apart from the drafters that follow them:
the engine's drafters call them, and bench/tune_hybrid.py replays them on recorded tokens, so the
tuner ranks the very rules the engine runs (README, "Tuning").

One measure decides every length: expected tokens per millisecond. A pass that verifies the first
k tokens of a proposal whose tokens are accepted with probabilities p1, p2, ... gives
1 + p1 + p1p2 + ... (k terms) tokens, since a token counts only where every one before it was
accepted and the target adds its own after them; it costs the target's pass of k + 1 rows, from
the machine's measured curve (decoding/curve.py), plus the drafting of those k tokens. Where wide
passes are dear (a 2-core AVX2 CPU) that picks a few tokens; where they cost little more than a
narrow one (AVX-512, a GPU), it fills the pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from specd.decoding.curve import CostCurve


@dataclass(frozen=True)
class PassCosts:
    """What verifying costs here: `verify_ms[k]` is the target's pass over the pending token and
    k drafted ones as the engine runs it (padded to at least the probe's narrowest width:
    decoding/widths.py), and `token_ms` one draft-model token (a one-row draft step)."""
    verify_ms: tuple[float, ...]
    token_ms: float = 0.0

    @classmethod
    def of(cls, curve: CostCurve, low: int, width: int) -> PassCosts:
        """The costs of passes up to `width` rows, each padded to at least `low` rows."""
        assert 1 <= low <= width <= curve.widest, f"passes of {low}..{width} rows on a curve of {curve.widest}"
        return cls(tuple(curve.target_ms[max(rows, low) - 1] for rows in range(1, width + 1)),
                   curve.draft_ms[0] if curve.draft_ms else 0.0)

    @property
    def longest(self) -> int:
        """The most drafted tokens one pass verifies."""
        return len(self.verify_ms) - 1

    def rate(self, gains: Sequence[float], k: int, token_ms: float) -> float:
        """Expected tokens per ms of a pass verifying k drafted tokens that cost `token_ms` each."""
        return gains[k] / (self.verify_ms[k] + k * token_ms)


def expected(probs: Sequence[float]) -> list[float]:
    """[k]: the tokens a pass verifying the first k of these is expected to give (k = 0..len)."""
    gains, sure = [1.0], 1.0
    for p in probs:
        sure *= p
        gains.append(gains[-1] + sure)
    return gains


def best_length(probs: Sequence[float], costs: PassCosts, token_ms: float = 0.0) -> int:
    """How many of a proposal's tokens to verify: the most expected tokens per ms (the shorter
    where two tie), its tokens having cost `token_ms` each to draft."""
    gains = expected(probs[: costs.longest])
    return max(range(len(gains)), key=lambda k: costs.rate(gains, k, token_ms))


def widest_useful(costs: PassCosts, ceiling: float = 0.98) -> int:
    """The widest pass `best_length` picks for a free draft whose every token is accepted with
    probability up to `ceiling`: wider passes cost more than they can give here, so the engine
    neither runs nor probes them."""
    grid = [p / 20 * ceiling for p in range(1, 21)]
    return 1 + max(best_length([p] * costs.longest, costs) for p in grid)


class Stop(Protocol):
    """Where the draft model ends a proposal (`more`) and how much of it is verified (`keep`)."""

    def more(self, probs: Sequence[float]) -> bool: ...

    def keep(self, probs: Sequence[float]) -> int: ...


@dataclass(frozen=True)
class DraftStop:
    """Where the draft model ends a proposal, and how much of it the target verifies.

    The draft proposes one token at a time and gives each a probability; those are its estimates
    of acceptance. After each token it drafts another only if some longer proposal, its next
    tokens assumed as likely as the last, would give more tokens per ms than the best of what it
    has; then the pass verifies the best length of what it drafted (`best_length`, drafting
    counted). `confidence` is a floor besides: it also stops once its confidence falls below it,
    the product of its tokens' probabilities (`cumulative`, the engine's) or the last token's own
    (a variant the tuner compares); 0 leaves the lengths to the costs alone."""
    costs: PassCosts
    confidence: float = 0.0
    cumulative: bool = True

    def more(self, probs: Sequence[float]) -> bool:
        """Whether to draft another token after tokens of these probabilities."""
        n, longest, token_ms = len(probs), self.costs.longest, self.costs.token_ms
        if n == 0:
            return longest > 0
        if n >= longest or self._unsure(probs):
            return False
        gains = expected(list(probs) + [probs[-1]] * (longest - n))
        best = max(self.costs.rate(gains, k, token_ms) for k in range(n + 1))
        return any(self.costs.rate(gains, k, token_ms) > best for k in range(n + 1, longest + 1))

    def keep(self, probs: Sequence[float]) -> int:
        """How many of the drafted tokens the pass verifies."""
        return best_length(probs, self.costs, self.costs.token_ms)

    def kept(self, probs: Sequence[float]) -> tuple[int, int]:
        """(drafted, verified) of a full-length proposal with these probabilities, as the draft
        model would have stopped and cut it."""
        drafted = 1
        while drafted < len(probs) and self.more(probs[:drafted]):
            drafted += 1
        drafted = min(drafted, len(probs))
        return drafted, self.keep(probs[:drafted])

    def _unsure(self, probs: Sequence[float]) -> bool:
        sure = 1.0
        for p in probs if self.cumulative else probs[-1:]:
            sure *= p
        return sure < self.confidence


class FullLength:
    """Draft to the limit and verify it all: bench/tune_hybrid.py records proposals so, then
    replays the rules above on them."""

    def more(self, probs: Sequence[float]) -> bool:
        return True

    def keep(self, probs: Sequence[float]) -> int:
        return len(probs)


def hybrid_takes_lookup(match: int, min_match: int) -> bool:
    """Hybrid proposes what prompt lookup found where its match is at least `min_match` tokens
    long (lookup is free; the draft model is not), and asks the draft model otherwise."""
    return match >= min_match
