"""Token healing: where the cursor may stand inside what would be one token, the prompt ends one
token early, and the completion begins by spelling that token's text again.

A prefix cut at the cursor is tokenized as the model seldom saw text in training: after `    u`
the last token is `u` where `unsigned` would be one token (or two that do not split there), after
`x = ` a lone space where ` y` would carry it, after an indent a run of spaces where the last of
them would belong to the next word. The model then continues what it takes the cut to mean, and
writes `char` after `u`. So where the prefix ends in a letter, digit, underscore, space or tab,
the prompt leaves its last token out (`Prompt.heal_id`), and the completion's first tokens are
chosen only among those whose text agrees with that token's: one that begins with what is left
of it, or is itself a beginning of what is left (the next token then spells the rest). Once the
text is spelled decoding is free again, and the completion shows only what follows it.

Texts are compared as the tokenizer's own token strings (byte-level BPE: one character per byte,
so a beginning of a string is a beginning of its bytes). The constraint is applied to the
target's verified logits after each pass, row by row from the tokens committed or proposed before
that row, before any token is accepted or its probability read: plain decoding and every drafter
choose the same tokens, and no pass computes anything differently (the width probe's promise is
untouched). Healed decoding is the reference: what the engine promises is the target's own greedy
(or sampled) completion under this constraint.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

import torch


class Healer:
    """The tokenizer's token strings, searchable by beginning; built once per engine."""

    def __init__(self, tokenizer):
        vocab = tokenizer.get_vocab()   # token string -> id, from the tokenizer's own table (fast)
        self.pieces: list[str] = [""] * (max(vocab.values()) + 1)
        for piece, i in vocab.items():
            self.pieces[i] = piece
        special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}))
        order = sorted((piece, i) for piece, i in vocab.items() if piece and i not in special)
        self._sorted = [piece for piece, _ in order]
        self._ids = [i for _, i in order]
        self._exact = {piece: i for piece, i in order}
        self.allowed = lru_cache(maxsize=1024)(self._allowed)

    def _allowed(self, rest: str) -> torch.Tensor:
        """The ids of the tokens that agree with `rest`, the text still to spell: those beginning
        with it (a range of the sorted strings) and those that are a shorter beginning of it."""
        lo = bisect.bisect_left(self._sorted, rest)
        hi = bisect.bisect_left(self._sorted, rest + "\U0010ffff", lo)   # past every string beginning with it
        shorter = [self._exact[rest[:k]] for k in range(1, len(rest)) if rest[:k] in self._exact]
        return torch.tensor(sorted(self._ids[lo:hi] + shorter), dtype=torch.long)

    def after(self, rest: str, token: int) -> str | None:
        """What is left to spell once `token` follows, or None where `token` disagrees with `rest`."""
        piece = self.pieces[token] if 0 <= token < len(self.pieces) else ""
        if not piece:
            return None
        if rest.startswith(piece):
            return rest[len(piece):]
        return "" if piece.startswith(rest) else None


class Spelling:
    """One completion's healing: the text its first tokens must spell, consumed as they commit."""

    def __init__(self, healer: Healer | None, heal_id: int | None):
        self.healer = healer
        self.rest = healer.pieces[heal_id] if healer is not None and heal_id is not None else ""

    def constrain(self, logits: torch.Tensor, proposal: list[int]) -> torch.Tensor:
        """`logits` [k + 1, V] of a pass over the pending token and `proposal`, with every row whose
        token is still constrained cut to the tokens that agree (the rest -inf). Row i's constraint
        follows from proposal[:i]; rows past a proposed token that disagrees are never used (that
        token is rejected), and are left as they are. A new tensor where any row changes."""
        if not self.rest:
            return logits
        assert self.healer is not None, "a spelling has a healer"
        out, rest = logits.clone(), self.rest
        for row in range(logits.shape[0]):
            keep = self.healer.allowed(rest).to(logits.device)
            cut = torch.full_like(out[row], float("-inf"))
            cut[keep] = out[row, keep]
            out[row] = cut
            if row >= len(proposal) or not (rest := self.healer.after(rest, proposal[row])):
                break
        return out

    def consume(self, committed: list[int]) -> None:
        """The tokens the pass committed, in order: what they spell is no longer asked for."""
        for token in committed:
            if not self.rest:
                return
            after = self.healer.after(self.rest, token)
            assert after is not None, "a committed token agrees with the spelling (constrain cut the others)"
            self.rest = after
