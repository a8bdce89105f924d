"""When a completion ends, decided token by token so every drafter stops where plain decoding does.

Stops: an end-of-text or FIM token (not kept), the token limit, the end of the first line in
single-line mode, a finished line that repeats the suffix's first line (dropped), a deadline: once
it has passed, the completion ends at the next line end, like llama.cpp's `t_max_predict_ms`, and
the cut: once that has passed with the first line still unfinished, the completion ends at the
next word's end. What is cut is a prefix of the target's own text, shown within a
pause rather than after it; the rest follows from the next request.

And doubt (`min_probability`): once the completion shows some text, it ends before the first
token the target itself gives less than that probability. What is shown is still the target's
own text, only shorter where the target was unsure of the rest: a prefix a person can take, where
the whole suggestion would likely be wrong from there on (the replay's figures in the README).
Before any text shows, `min_first_probability` does the same for the first visible token: a
completion the target is unsure of from its start ends empty, and nothing is shown.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class StopRules:
    stop_ids: frozenset[int]
    max_tokens: int
    single_line: bool = False
    suffix_text: str = ""           # the document after the cursor (for the repeat stop)
    deadline: float | None = None  # time.monotonic() after which to end at the next line end
    cut: float | None = None       # time.monotonic() after which to end at the next word end
    min_probability: float = 0.0   # after some text, end before a token the target gives less (0: never)
    min_first_probability: float = 0.0  # before any text, the same (the completion ends empty)
    heal: str = ""                 # the text the first tokens spell again (decoding/healing.py): not shown

    @property
    def doubts(self) -> bool:
        """Whether a token's probability can end the completion (else no one needs to compute it)."""
        return bool(self.min_probability or self.min_first_probability)


class Stopper:
    def __init__(self, tokenizer, rules: StopRules):
        self.tokenizer, self.rules = tokenizer, rules
        self.tokens: list[int] = []
        self.text = ""
        self.reason: str | None = None
        self.finished = 0  # lines already checked
        lines = (line.strip() for line in io.StringIO(rules.suffix_text))  # lazily: it may be long
        self.suffix_line = next((line for line in lines if line), "")

    @property
    def done(self) -> bool:
        return self.reason is not None

    def push(self, token: int, probability: float = 1.0) -> bool:
        """Take the next token, which the target gave `probability`; True when the completion has
        ended (with or without it)."""
        assert not self.done, "no tokens after the end"
        if token in self.rules.stop_ids:
            return self._end("stop_token")
        shows = bool(self.text.strip())
        if probability < (self.rules.min_probability if shows else self.rules.min_first_probability):
            return self._end("unsure")
        self.tokens.append(token)
        return self._grown(self._shown(self.tokenizer.decode(self.tokens, skip_special_tokens=False)), len(self.tokens))

    def _shown(self, decoded: str) -> str:
        """What follows the healed text (nothing while the tokens are still spelling it)."""
        heal = self.rules.heal
        return decoded[len(heal):] if decoded.startswith(heal) else ""

    def push_text(self, piece: str) -> bool:
        """Take the next piece of text an inference server streamed (its tokens are the server's,
        which ends at its own end tokens and token limit): the same text rules, on the same text."""
        assert not self.done, "no text after the end"
        return self._grown(self.text + piece, 0)

    def _grown(self, text: str, tokens: int) -> bool:
        self.text = text
        if self._line_end() or self._word_end():
            return True
        if tokens >= self.rules.max_tokens:
            return self._end("max_tokens")
        return False

    def _line_end(self) -> bool:
        """Stops that look at finished lines: suffix repeat, single-line, deadline."""
        lines = self.text.split("\n")[:-1]  # finished lines, without their newlines
        first_fresh, self.finished = self.finished, len(lines)
        for index in range(first_fresh, len(lines)):
            if self.suffix_line and lines[index].strip() == self.suffix_line:
                self.text = "".join(line + "\n" for line in lines[:index])
                return self._end("repeats_suffix")
            if self.rules.single_line:
                self.text = lines[0]
                return self._end("end_of_line")
        deadline = self.rules.deadline
        if len(lines) > first_fresh and deadline is not None and time.monotonic() >= deadline:
            self.text = "".join(line + "\n" for line in lines)
            return self._end("deadline")
        return False

    def _word_end(self) -> bool:
        """Past the cut, on the first line, where a word has just ended (a token ending in
        anything but a letter, digit or underscore) after some text."""
        cut, text = self.rules.cut, self.text
        if cut is None or "\n" in text or not text.strip() or _in_word(text[-1]):
            return False
        return time.monotonic() >= cut and self._end("cut")

    def _end(self, reason: str) -> bool:
        self.reason = reason
        return True


def _in_word(char: str) -> bool:
    return char.isalnum() or char == "_"
