"""Prompt lookup: propose what followed the last time the context's tail appeared.

Sources, searched together: the context itself (the FIM prompt, so the prefix and the suffix, and
the text generated so far), the previous completion for the same document, and extra texts the
caller passes (other open files). The longest match of the context's tail wins; between equal
matches, the context beats the previous completion, which beats extra texts, and nearer beats
farther. A draft is free to propose and verifying it costs no more than a plain step, so lookup
always fills the verify pass.
"""

from __future__ import annotations

from collections import defaultdict

from specd.decoding.drafter import DraftJob, Proposal

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
    name = "lookup"

    def __init__(self, max_ngram: int = 8):
        self.max_ngram = max_ngram

    def begin(self, job: DraftJob) -> LookupProposer:
        return LookupProposer(self.name, self.max_ngram, job)


class LookupProposer:
    """One request's lookup: the context's index grows with the request; the other sources are
    indexed once, at its start."""

    def __init__(self, name: str, max_ngram: int, job: DraftJob):
        self.name, self.max_ngram = name, max_ngram
        self.context = NgramIndex()
        self.others = [NgramIndex(t) for t in [job.previous, *job.prompt.extra_ids] if t]

    def propose(self, context: list[int], limit: int) -> Proposal:
        if limit <= 0 or not context:
            return Proposal([], self.name)
        assert len(context) >= len(self.context.tokens), "the context only grows within a request"
        self.context.extend(context[len(self.context.tokens):])
        best = (0, -1, self.context)
        for index in [self.context, *self.others]:
            end = len(context) if index is self.context else len(index.tokens)
            n, i = index.longest_match(context, self.max_ngram, end)
            if n > best[0]:
                best = (n, i, index)
        n, i, index = best
        if n == 0:
            return Proposal([], self.name)
        return Proposal(index.tokens[i + 1 : i + 1 + limit], self.name, match=n)

    def observe(self, proposal: Proposal, accepted: int, propose_s: float, step_s: float) -> None:
        pass  # free to propose: nothing to pace
