"""Prompt lookup: propose what followed the last time the context's tail appeared.

Sources, searched together: the context itself (the FIM prompt, so the prefix and the suffix, and
the text generated so far), the previous completion for the same document, and extra texts the
caller passes (other open files). The longest match of the context's tail wins; between equal
matches, the context beats the previous completion, which beats extra texts, and nearer beats
farther. A draft is free to propose; how much of it the pass verifies is decoding/policy.py's
`best_length`, from the machine's pass costs and the acceptance by position the mode has learned
(`Acceptance`, decoding/drafter.py).
"""

from __future__ import annotations

from collections import defaultdict

from specd.decoding.drafter import Acceptance, DraftJob, Proposal, agreement
from specd.decoding.policy import PassCosts, best_length

MAX_CANDIDATES = 128  # occurrences of the last token examined per source, nearest first


class NgramIndex:
    """A token sequence with, for each token id, the positions where it occurs."""

    def __init__(self, tokens: list[int] | None = None):
        self.tokens: list[int] = []
        self.where: dict[int, list[int]] = defaultdict(list)
        self.extend(tokens or [])

    def extend(self, tokens: list[int]) -> None:
        for token in tokens:
            self.where[token].append(len(self.tokens))
            self.tokens.append(token)

    def longest_match(self, tail: list[int], max_n: int, end: int) -> tuple[int, int]:
        """(n, i): the longest n <= max_n such that tokens[i-n+1 : i+1] == tail[-n:], with i + 1 <
        end so something follows; the nearest such i. (0, -1) when the last token never occurs."""
        best_n, best_i = 0, -1
        positions = self.where.get(tail[-1], [])
        for i in reversed(positions[-MAX_CANDIDATES:]):
            if i + 1 >= end:
                continue
            n = 1
            while n < max_n and i - n >= 0 and n < len(tail) and self.tokens[i - n] == tail[-1 - n]:
                n += 1
            if n > best_n:
                best_n, best_i = n, i
                if n == max_n:
                    break
        return best_n, best_i


class LookupDrafter:
    """Prompt lookup for one mode: what it learns across requests is `acceptance`, its own."""
    name = "lookup"

    def __init__(self, costs: PassCosts, acceptance: Acceptance, max_ngram: int = 8):
        self.costs, self.acceptance, self.max_ngram = costs, acceptance, max_ngram

    def begin(self, job: DraftJob) -> LookupProposer:
        return LookupProposer(self, job)


class LookupProposer:
    """One request's lookup: the context's index grows with the request; the other sources are
    indexed once, at its start."""

    def __init__(self, drafter: LookupDrafter, job: DraftJob):
        self.drafter, self.name = drafter, drafter.name
        self.context = NgramIndex()
        self.others = [NgramIndex(t) for t in [job.previous, *job.prompt.extra_ids] if t]
        self.found: tuple[int, list[int]] | None = None  # the last match: where it starts in the context, its tokens
        self.used: tuple[int, list[int]] | None = None   # that match, once a pass verified it

    def propose(self, context: list[int], limit: int) -> Proposal:
        self._learn(context)
        self.found = None
        if limit <= 0 or not context:
            return Proposal([], self.name)
        assert len(context) >= len(self.context.tokens), "the context only grows within a request"
        self.context.extend(context[len(self.context.tokens):])
        best = (0, -1, self.context)
        for index in [self.context, *self.others]:
            end = len(context) if index is self.context else len(index.tokens)
            n, i = index.longest_match(context, self.drafter.max_ngram, end)
            if n > best[0]:
                best = (n, i, index)
        n, i, index = best
        if n == 0:
            return Proposal([], self.name)
        tokens = index.tokens[i + 1 : i + 1 + limit]
        self.found = (len(context), tokens)
        verified = best_length(self.drafter.acceptance.probs(len(tokens)), self.drafter.costs)
        return Proposal(tokens[:verified], self.name, match=n)

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        self.used = self.found  # learned from at the next proposal, when the target's token is known

    def _learn(self, context: list[int]) -> None:
        """Tell the mode's acceptance how the last match used fared against what was decoded."""
        if self.used is None:
            return
        start, tokens = self.used
        decoded = context[start : start + len(tokens)]
        self.drafter.acceptance.update(agreement(tokens, decoded), len(decoded))
        self.used = None
