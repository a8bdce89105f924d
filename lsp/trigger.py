"""When a completion request reaches the daemon: the `[trigger]` rules, one pure decision.

Every keystroke of an editor asks for a suggestion; each one the daemon serves costs model time,
and on a CPU the model is the scarce thing. The user decides how much of it typing may spend:

- `auto` off: only a manual trigger (the editor's "suggest here" key: LSP's `Invoked`) asks;
- `delay_ms`: an automatic request waits that long, and a newer keystroke meanwhile makes it
  stale: it is never sent (newest wins, as in the daemon);
- `languages`: a language turned off gets nothing at all, not even on a manual trigger: off means
  off, and a key that completes in Markdown by surprise is worse than one that does nothing;
- `max_line_suffix`: no automatic request where the rest of the line right of the cursor holds
  more than N characters that are not whitespace. There a suggestion must fit before text the
  model mostly cannot see well (llama.vim's rule, N = 8); trailing spaces do not count.

A manual trigger ignores `auto`, `delay_ms` and `max_line_suffix` (Copilot's manual trigger works
with its automatic one off too): the user asked, here, now.

Holding a request back is not the same as turning specd off: a keystroke that types through the
suggestion on screen still sees its rest (lsp/typed_through.py): it costs no model time, and a ghost text
that vanishes as one types it would be worse than either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import msgspec

from specd.daemon.config import Trigger, trigger_problem

# ask: send the request (after `delay_ms`, unless a newer one comes); hold: no request, but the
# suggestion on screen may go on as it is typed through; off: nothing at all
Action = Literal["ask", "hold", "off"]
EVERY_OTHER = "*"   # languages' key for the ids not named


@dataclass(frozen=True)
class Decision:
    action: Action
    delay_ms: int = 0
    why: str = ""        # why not: for the log, and for a manual trigger's message


ASK = Decision("ask")


def decide(trigger: Trigger, invoked: bool, language: str, line_rest: str) -> Decision:
    """What to do with a request in `language` whose cursor has `line_rest` right of it on its
    line; `invoked`: the user asked by hand (LSP's trigger kind Invoked)."""
    if not language_on(trigger, language):
        return Decision("off", why=f"specd is off for {language or 'this language'} (trigger.languages)")
    if invoked:
        return ASK
    if not trigger.auto:
        return Decision("hold", why="trigger.auto is off: only a manual trigger asks")
    if 0 <= trigger.max_line_suffix < line_suffix_chars(line_rest):
        return Decision("hold", why=f"more than {trigger.max_line_suffix} characters right of the cursor "
                                    "(trigger.max_line_suffix)")
    return Decision("ask", trigger.delay_ms)


def language_on(trigger: Trigger, language: str) -> bool:
    return trigger.languages.get(language, trigger.languages.get(EVERY_OTHER, True))


def line_suffix_chars(line_rest: str) -> int:
    """The characters right of the cursor that count: what is not whitespace."""
    return sum(not char.isspace() for char in line_rest)


class TriggerOptionsError(ValueError):
    """An editor's trigger settings that cannot be used; the message names the field."""


def with_options(trigger: Trigger, options: object) -> Trigger:
    """`trigger` (the config's) with an editor's overrides: an object of the same fields, as
    initializationOptions' or workspace/didChangeConfiguration's `trigger`. A field it leaves out
    keeps the config's value; its `languages` are added to the config's (its own win)."""
    if not isinstance(options, dict):
        raise TriggerOptionsError(f"trigger must be an object, not {type(options).__name__}")
    if options.get("languages") == []:   # Lua's empty table: Neovim sends {} as []
        options = options | {"languages": {}}
    merged = msgspec.to_builtins(trigger) | options
    if isinstance(options.get("languages"), dict):
        merged["languages"] = trigger.languages | options["languages"]
    try:
        new = msgspec.convert(merged, Trigger)
    except msgspec.ValidationError as error:
        raise TriggerOptionsError(f"trigger: {error}") from None
    if problem := trigger_problem(new):
        raise TriggerOptionsError(f"trigger.{problem}")
    return new
