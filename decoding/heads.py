"""`heads`: Medusa-style heads on the target, trained on this machine (`specd heads train`).

Head k (1..K) is one residual block on the target's final hidden state h at a position p (normed,
as the output layer reads it): z = h + SiLU(W_k h + b_k), read by the target's output layer, to
guess the token k + 1 places after p (Medusa-1, arXiv 2401.10774: the target frozen, its output
layer shared). The target's own output at p has already given the token after p, the pending
one; so a proposal is the chain of the heads' guesses after it, and the verify pass checks it as
it checks any draft: the output stays the target's, token for token. The state at p is the one
the last verify pass (or the prompt's last prefill chunk) computed anyway (`KVCache.rows`), so a
proposal costs the heads alone: no pass of its own, no cache, no prompt read twice.

Two departures from Medusa, both for a CPU:
- The heads read a fixed set of the output layer's rows, `vocab`: the tokens the target predicted
  most often on the training text (8192 of the built-in target's 151,936). Dense, they are 48 MB,
  and a proposal costs about a millisecond, where the whole int8 output layer costs ~15 ms a row.
  A head never proposes a token outside the set; its held-out accuracy counts those as misses.
- The labels are the target's own greedy tokens on the training text, not the text's
  (self-distillation, as Medusa-2 does): a draft is right when it is the target's token.

Greedy top-1 chains, verified like prompt lookup's tokens: one-hot drafts, which the sampling
rule accepts losslessly too (decoding/verify.py). How many of a chain a pass verifies is
`best_length` on the machine's pass costs and the chain's chances as `Calibration` has learned
them: the heads' own probabilities, read raw, are too sure of the later heads (measured: four
heads verified 0.14 of their tokens and gained nothing, where one head alone gained 10%).
"""

from __future__ import annotations

import torch

from specd.decoding.drafter import DraftJob, Proposal, agreement
from specd.decoding.policy import PassCosts, best_length


class Heads(torch.nn.Module):
    """K residual blocks over the target's hidden size, and the output rows they read."""

    def __init__(self, count: int, hidden: int, vocab: torch.Tensor, out: torch.Tensor):
        """`vocab` [V'] token ids; `out` [V', hidden] their rows of the target's output layer."""
        super().__init__()
        assert count >= 1 and out.shape == (len(vocab), hidden), f"{count} heads, out {tuple(out.shape)}"
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(count))
        for block in self.blocks:  # Medusa's start: each head first guesses what the target does
            torch.nn.init.zeros_(block.weight)
            torch.nn.init.zeros_(block.bias)
        self.register_buffer("vocab", vocab.long().clone())  # clones: fitting may not save inference tensors
        self.register_buffer("out", out.float().clone())

    @property
    def count(self) -> int:
        return len(self.blocks)

    def first(self, count: int) -> Heads:
        """The first `count` heads alone (each was trained on its own offset, so any first few
        are a set of heads), sharing these weights."""
        assert 1 <= count <= self.count, f"{count} of {self.count} heads"
        fewer = Heads(count, self.out.shape[1], self.vocab, self.out)
        fewer.blocks = torch.nn.ModuleList(self.blocks[:count])
        return fewer.eval()

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [N, E] -> logits [N, K, V'] over `vocab`."""
        z = torch.stack([hidden + torch.nn.functional.silu(block(hidden)) for block in self.blocks], 1)
        return z @ self.out.T

    @torch.inference_mode()
    def guess(self, hidden: torch.Tensor) -> tuple[list[int], list[float]]:
        """hidden [E] -> each head's top token and its probability (head 1 first)."""
        probs = torch.softmax(self(hidden.float()[None])[0], -1)               # [K, V']
        best = probs.max(-1)
        return self.vocab[best.indices].tolist(), best.values.tolist()


class Calibration:
    """How often a head's guess is accepted, by its place in the chain and by how sure the head
    was (`BINS` bins of its probability), where every guess before it was: learned across
    requests, one per engine, as prompt lookup's `Acceptance` is. A chain tells it of its places
    up to its first wrong guess, and of one past the tokens verified, since the target's own
    token says whether the next guess would have been right."""
    BINS = 4

    def __init__(self, longest: int, prior: float = 0.5, alpha: float = 0.1):
        self.rates = [[prior] * self.BINS for _ in range(longest)]
        self.alpha = alpha

    def _bin(self, p: float) -> int:
        return min(int(p * self.BINS), self.BINS - 1)

    def chances(self, probs: list[float]) -> list[float]:
        return [self.rates[i][self._bin(p)] for i, p in enumerate(probs[:len(self.rates)])]

    def update(self, probs: list[float], agreed: int, known: int) -> None:
        """A chain whose first `agreed` guesses were the decoded tokens, of `known` places decoded."""
        for i in range(min(agreed + 1, known, len(self.rates), len(probs))):
            rate = self.rates[i]
            b = self._bin(probs[i])
            rate[b] += self.alpha * (float(i < agreed) - rate[b])


class HeadsDrafter:
    name = "heads"

    def __init__(self, heads: Heads, costs: PassCosts):
        self.heads, self.costs = heads, costs
        self.calibration = Calibration(heads.count)

    def begin(self, job: DraftJob) -> HeadsProposer:
        return HeadsProposer(self, job)


class HeadsProposer:
    def __init__(self, drafter: HeadsDrafter, job: DraftJob):
        assert job.target_cache is not None, "the heads read the target's last pass"
        self.drafter, self.cache = drafter, job.target_cache
        self.chain: tuple[int, list[int], list[float]] | None = None  # the last guesses: where, tokens, probs

    def propose(self, context: list[int], limit: int) -> Proposal:
        """After `context` (which ends with the pending token, not cached yet): the heads' chain
        from the state that predicted the pending token, where the last pass left it. None is
        there after a prompt whose edit is folded into the first pass: that pass goes plain."""
        self._learn(context)
        rows = self.cache.rows
        hidden = None if rows is None or limit <= 0 else rows.at(len(context) - 2, self.cache.tokens)
        if hidden is None:
            return Proposal([], HeadsDrafter.name)
        tokens, probs = self.drafter.heads.guess(hidden)
        self.chain = (len(context), tokens, probs)
        kept = best_length(self.drafter.calibration.chances(probs[:limit]), self.drafter.costs)
        return Proposal(tokens[:kept], HeadsDrafter.name, token_probs=probs[:kept])

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        pass

    def _learn(self, context: list[int]) -> None:
        """Tell the calibration how the last chain fared against what was decoded after it."""
        if self.chain is None:
            return
        start, tokens, probs = self.chain
        decoded = context[start:start + len(tokens)]
        self.drafter.calibration.update(probs, agreement(tokens, decoded), len(decoded))
        self.chain = None
