"""Fill-in-the-middle prompts: templates per model family, a token budget, stop tokens.

The prompt is ordered so that what changes least comes first, because only a common prefix of
token ids can reuse cached KV: other files' text, then the prefix window, then the suffix. The
usual prefix-suffix-middle order means a keystroke at the cursor recomputes the suffix; the suffix
budget bounds that cost (see `specd bench --suffix-budgets`).

The prefix window starts at a line that is a multiple of `LINE_STEP`, chosen as the first such
line that fits the budget. Typing moves the window only when it must, and then by whole steps, so
consecutive keystrokes share nearly the whole prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specd.decoding.errors import UserError

LINE_STEP = 32
# A prefix ending in one of these may end inside what would be one token (decoding/healing.py).
HEALED_ENDINGS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_ \t")


def heals(prefix: str) -> bool:
    """Whether a prefix ending so has its last token healed."""
    return bool(prefix) and prefix[-1] in HEALED_ENDINGS


@dataclass(frozen=True)
class FimTemplate:
    family: str
    prefix: str
    suffix: str
    middle: str
    stops: tuple[str, ...]
    file_sep: str | None = None  # repository-level context marker, where the family has one

    def extra(self, path: str, text: str) -> str:
        """One other file as context, in the family's own repository format."""
        if self.file_sep is None:
            return f"# {path}\n{text}\n"
        return f"{self.file_sep}{path}\n{text}\n"


TEMPLATES = {
    "qwen2.5-coder": FimTemplate(
        "qwen2.5-coder", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
        stops=("<|endoftext|>", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>",
               "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>", "<|im_end|>"),
        file_sep="<|file_sep|>"),
    "starcoder2": FimTemplate(
        "starcoder2", "<fim_prefix>", "<fim_suffix>", "<fim_middle>",
        stops=("<|endoftext|>", "<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>",
               "<file_sep>", "<repo_name>"),
        file_sep="<file_sep>"),
    "deepseek-coder": FimTemplate(
        "deepseek-coder", "<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>",
        stops=("<｜end▁of▁sentence｜>", "<|EOT|>", "<｜fim▁begin｜>", "<｜fim▁hole｜>",
               "<｜fim▁end｜>")),
    "codellama": FimTemplate(
        "codellama", "▁<PRE>", "▁<SUF>", "▁<MID>", stops=("</s>", "▁<EOT>", "<EOT>")),
}


class PromptError(UserError):
    """The tokenizer fits no known fill-in-the-middle template."""


def detect_template(tokenizer, name: str = "auto") -> FimTemplate:
    """The named template, or the one whose FIM tokens the tokenizer knows."""
    if name != "auto":
        if name not in TEMPLATES:
            raise PromptError(f"unknown FIM template {name!r}; known: {', '.join(TEMPLATES)}")
        return TEMPLATES[name]
    vocab = tokenizer.get_vocab()
    for template in TEMPLATES.values():
        if all(t in vocab for t in (template.prefix, template.suffix, template.middle)):
            return template
    raise PromptError("the tokenizer has none of the FIM tokens of " + ", ".join(TEMPLATES)
                      + "; set `fim_template` in the config")


@dataclass(frozen=True)
class Budget:
    """Tokens allowed for each part of the prompt."""
    prefix: int = 1024
    suffix: int = 128
    extra: int = 0


@dataclass(frozen=True)
class Prompt:
    ids: list[int]            # the whole prompt, ready for the target
    prefix_ids: list[int]     # the prefix window's tokens (inside `ids`)
    suffix_ids: list[int]     # the suffix window's tokens (inside `ids`)
    extra_ids: list[list[int]] = field(default_factory=list)  # hints and extra texts, for lookup
    heal_id: int | None = None  # the prefix's last token, left out: the completion spells it first (healing.py)


class PromptBuilder:
    """Turns prefix, suffix and extra texts into the token ids of one FIM prompt."""

    def __init__(self, tokenizer, template: FimTemplate, budget: Budget, heal: bool = False):
        self.tokenizer, self.template, self.budget, self.heal = tokenizer, template, budget, heal
        special = (template.prefix, template.suffix, template.middle)
        self.special_ids = [self._single_id(t) for t in special]
        self.stop_ids = frozenset(i for t in template.stops if (i := self._id(t)) is not None)
        if tokenizer.eos_token_id is not None:
            self.stop_ids |= {tokenizer.eos_token_id}

    def _id(self, token: str) -> int | None:
        i = self.tokenizer.convert_tokens_to_ids(token)
        return None if i is None or i == self.tokenizer.unk_token_id else i

    def _single_id(self, token: str) -> int:
        i = self._id(token)
        if i is None:
            raise PromptError(f"the tokenizer has no single token {token!r}")
        return i

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) if text else []

    def build(self, prefix: str, suffix: str, extras: tuple[tuple[str, str], ...] = (),
              hints: tuple[str, ...] = (), suffix_budget: int | None = None,
              prefix_budget: int | None = None) -> Prompt:
        """FIM prompt for the cursor between `prefix` and `suffix`; `extras` are (path, text),
        `hints` texts for lookup only (never in the prompt); `suffix_budget` and `prefix_budget`
        override the budget's suffix and prefix tokens. With `heal`, a prefix that ends where a token
        may go on (decoding/healing.py) leaves its last token out, as `heal_id`."""
        pre_id, suf_id, mid_id = self.special_ids
        prefix_ids = self._prefix_window(prefix, self.budget.prefix if prefix_budget is None else prefix_budget)
        heal_id = prefix_ids.pop() if self.heal and prefix_ids and heals(prefix) else None
        suffix_ids = self._suffix_window(
            suffix, self.budget.suffix if suffix_budget is None else suffix_budget)
        extra_ids = [self.encode(text) for text in hints] + [self.encode(text) for _, text in extras]
        context = self._extra_context(extras)
        ids = context + [pre_id] + prefix_ids + [suf_id] + suffix_ids + [mid_id]
        return Prompt(ids, prefix_ids, suffix_ids, extra_ids, heal_id)

    def _prefix_window(self, prefix: str, budget: int) -> list[int]:
        """The prefix from the first `LINE_STEP`-aligned line whose window fits `budget` tokens;
        where the last such step alone is over it (a small budget, long lines), from the first
        line of finer steps that fits, so the start still moves by whole lines and seldom."""
        if budget <= 0:
            return []
        lines = prefix.splitlines(keepends=True)
        start = self._first_candidate(lines, budget)
        for step in (LINE_STEP, LINE_STEP // 4, 1):
            while True:
                ids = self.encode("".join(lines[start:]))
                if len(ids) <= budget:
                    return ids
                if start + step >= len(lines):
                    break
                start += step
        return ids[-budget:]  # the cursor's line alone is over budget: its tokens nearest the cursor

    def _first_candidate(self, lines: list[str], budget: int) -> int:
        """Skip, without tokenizing, the aligned steps that are far over budget: code averages
        well under 8 characters a token, so a huge file is not tokenized once per step."""
        start, chars = 0, sum(map(len, lines))
        while start + LINE_STEP < len(lines) and chars > budget * 8:
            chars -= sum(map(len, lines[start:start + LINE_STEP]))
            start += LINE_STEP
        return start

    def _suffix_window(self, suffix: str, budget: int) -> list[int]:
        """The suffix's first lines, as many whole lines as fit the budget."""
        if budget <= 0 or not suffix:
            return []
        kept, ids = "", []
        for line in suffix.splitlines(keepends=True):
            more = self.encode(kept + line)
            if len(more) > budget:
                break
            kept, ids = kept + line, more
        if not kept:  # a first line longer than the budget: its head
            ids = self.encode(suffix.splitlines(keepends=True)[0])[:budget]
        return ids

    def _extra_context(self, extras: tuple[tuple[str, str], ...]) -> list[int]:
        """Other files, nearest-listed first, while they fit the extra budget."""
        ids: list[int] = []
        for path, text in extras:
            more = self.encode(self.template.extra(path, text))
            if len(ids) + len(more) > self.budget.extra:
                break
            ids += more
        return ids
