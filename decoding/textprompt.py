"""The fill-in-the-middle prompt as text, for a model behind an inference server.

A server (llama.cpp's, vLLM, SGLang) tokenizes for itself, and its /v1/completions `suffix` is not
honoured everywhere, so specd sends the whole FIM prompt as one string in the family's template
(decoding/prompt.py's TEMPLATES; a server parses their special tokens written as text). The
layout is PromptBuilder's, least changing first so that the server's prefix cache can reuse it:
other files, the prefix window starting at a `LINE_STEP`-aligned line, the suffix's first whole
lines. With no tokenizer here the budgets are in characters, `CHARS_PER_TOKEN` a token: code
averages more than that, so a window stays within its token budget.
"""

from __future__ import annotations

from specd.decoding.prompt import LINE_STEP, TEMPLATES, Budget, FimTemplate

CHARS_PER_TOKEN = 3

# Words in a model's name that say its FIM family, most specific first.
FAMILY_NAMES = (
    ("qwen2.5-coder", ("qwen2.5-coder", "qwen2.5coder", "qwen-2.5-coder")),
    ("qwen2.5-coder", ("qwen", "coder")),       # later Qwen coders keep the 2.5 FIM tokens
    ("starcoder2", ("starcoder",)),
    ("deepseek-coder", ("deepseek", "coder")),
    ("codellama", ("codellama",)),
    ("codellama", ("code-llama",)),
)


def guess_family(model: str) -> str | None:
    """The FIM family a model's name says (all words of one entry in it), or None."""
    name = model.lower().replace("_", "-")
    for family, words in FAMILY_NAMES:
        if all(word in name for word in words):
            return family
    return None


def fim_text(template: FimTemplate, budget: Budget, prefix: str, suffix: str,
             extras: tuple[tuple[str, str], ...] = ()) -> str:
    """The whole prompt, ready for a server's /v1/completions `prompt`."""
    return (_extra_context(template, extras, budget.extra * CHARS_PER_TOKEN)
            + template.prefix + prefix_window(prefix, budget.prefix * CHARS_PER_TOKEN)
            + template.suffix + suffix_window(suffix, budget.suffix * CHARS_PER_TOKEN) + template.middle)


def prefix_window(prefix: str, chars: int) -> str:
    """The prefix from the first `LINE_STEP`-aligned line whose window fits `chars`; where the
    last lines alone are over, their tail. Typing moves it by whole steps only, when it must."""
    if chars <= 0:
        return ""
    lines = prefix.splitlines(keepends=True)
    start, size = 0, len(prefix)
    while size > chars and start + LINE_STEP < len(lines):
        size -= sum(map(len, lines[start:start + LINE_STEP]))
        start += LINE_STEP
    window = "".join(lines[start:])
    return window if len(window) <= chars else window[-chars:]


def suffix_window(suffix: str, chars: int) -> str:
    """The suffix's first whole lines within `chars` (the first line's head if it alone is over)."""
    if chars <= 0 or not suffix:
        return ""
    kept = ""
    for line in suffix.splitlines(keepends=True):
        if len(kept) + len(line) > chars:
            break
        kept += line
    return kept or suffix[:chars]


def _extra_context(template: FimTemplate, extras: tuple[tuple[str, str], ...], chars: int) -> str:
    """Other files, nearest-listed first, while they fit."""
    out = ""
    for path, text in extras:
        more = template.extra(path, text)
        if len(out) + len(more) > chars:
            break
        out += more
    return out


def template_named(family: str) -> FimTemplate:
    assert family in TEMPLATES, f"{family!r} is checked against TEMPLATES when the config is read"
    return TEMPLATES[family]
