"""What llama.vim (ggml-org/llama.vim, autoload/llama.vim) does between the keyboard and llama.cpp's
server, for bench/llama_replay.py: the same typing as `specd replay`, served the way llama.cpp's
own editor plugin serves it, so that the two replays differ in the server and its client only.

Kept from llama.vim, because each changes what a person sees and when:
- the request: `input_prefix` (whole lines before the cursor's, 256 at most), `prompt` (the
  cursor's line up to the cursor), `input_suffix` (the rest of the line, then 64 lines at most),
  `input_extra` (no other buffers are open here: empty), `n_predict`, `cache_prompt` (the server
  keeps the slot's KV and reuses the common prefix), `t_max_predict_ms` (250 for a request at
  the cursor, 1000 for a speculative one: the server stops at the first line end past it);
- one request in flight at a time: a key that comes while one runs asks again 100 ms later, and
  each newer key replaces that retry, so a stale request is superseded, never started; none is
  cancelled (llama.vim stops a job only when it starts another, which it never does while one runs);
- the result cache (250 contexts; llama.vim evicts at random, here the oldest): a key whose
  context was answered shows at once, and so does typing into an answer: up to 128 characters
  typed since a cached context that its content begins with leave the rest as the suggestion;
- once a suggestion is shown, a speculative request as if it were accepted (its context is the
  text with the suggestion inserted), so that accepting it finds the next one cached;
- on a blank line the request starts at the line's beginning and the suggestion's indent is
  trimmed by the line's.
Changed, and why: sampling is greedy (`top_k` 1) as specd's is, so both show the target's own
greedy text; every key asks (llama.vim skips a line with more than 8 characters right of the
cursor, `max_line_suffix`): `specd replay` asks at every key too.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from specd.bench.replay_report import Keystroke

N_PREFIX_LINES = 256
N_SUFFIX_LINES = 64
LOOKBACK_CHARS = 128
RETRY_S = 0.1
CACHE_ENTRIES = 250
T_MAX_PREDICT_MS = 250          # a request at the cursor: quick, a speculative one follows it
T_MAX_PREDICT_SPECULATIVE_MS = 1000
T_MAX_PROMPT_MS = 500
SEPARATOR = "\x00"              # between prefix+middle and suffix in a cache key


@dataclass(frozen=True)
class Context:
    prefix: str                   # input_prefix: whole lines before the cursor's line
    middle: str                   # prompt: the cursor's line up to the cursor
    suffix: str                   # input_suffix: the rest of the line, then the lines after
    line: str                     # the cursor's line up to the cursor, as typed (blank lines: its indent)

    @property
    def key(self) -> str:
        return self.prefix + self.middle + SEPARATOR + self.suffix


def context(before: str, after: str) -> Context:
    """llama.vim's local context for a cursor between `before` and `after`."""
    *earlier, line_prefix = before.split("\n")
    line_suffix, *later = after.split("\n")
    typed = line_prefix
    if not (line_prefix + line_suffix).strip():  # a blank line: start at its beginning
        line_prefix = line_suffix = ""
    prefix = "\n".join(earlier[-N_PREFIX_LINES:]) + "\n"
    suffix = line_suffix + "\n" + "\n".join(later[:N_SUFFIX_LINES]) + "\n"
    return Context(prefix, line_prefix, suffix, typed)


def lookup(cache: dict[str, str], ctx: Context) -> str | None:
    """The cached answer for `ctx`, or the longest rest of one made up to LOOKBACK_CHARS earlier
    on the same line of typing whose content begins with what was typed since."""
    if ctx.key in cache:
        return cache[ctx.key]
    typed_so_far, best = ctx.prefix + ctx.middle, None
    for i in range(1, min(LOOKBACK_CHARS, len(typed_so_far)) + 1):
        earlier = typed_so_far[:-i] + SEPARATOR + ctx.suffix
        content = cache.get(earlier)
        if content is None or not content.startswith(typed_so_far[-i:]):
            continue
        rest = content[i:]
        if rest and (best is None or len(rest) > len(best)):
            best = rest
    return best


def render(content: str, ctx: Context) -> str:
    """What llama.vim shows of `content`: no trailing blank lines; on a blank line, the indent the
    line already has is not shown again."""
    text = content.rstrip("\n")
    if not ctx.middle and not ctx.line.strip():
        lead = min(len(text) - len(text.lstrip(" \t")), len(ctx.line))
        text = text[lead:]
    return text


@dataclass
class LlamaServer:
    """llama.cpp's /infill, as llama.vim calls it (greedy here, see the module's docstring)."""
    url: str                      # http://127.0.0.1:PORT
    n_predict: int = 48
    timeout_s: float = 300.0
    model_ms: float = 0.0         # what the server says it spent, prompt and prediction
    requests: int = 0
    in_flight: int = 0
    most_in_flight: int = 0       # llama.vim's rule, kept: never more than one

    def body(self, ctx: Context, t_max_predict_ms: int) -> dict:
        return {"input_prefix": ctx.prefix, "input_suffix": ctx.suffix, "input_extra": [], "prompt": ctx.middle,
                "n_predict": self.n_predict, "top_k": 1, "samplers": ["top_k"], "stream": False,
                "cache_prompt": True, "t_max_prompt_ms": T_MAX_PROMPT_MS, "t_max_predict_ms": t_max_predict_ms,
                "response_fields": ["content", "timings/prompt_ms", "timings/predicted_ms"]}

    async def infill(self, ctx: Context, t_max_predict_ms: int) -> str:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            reply = await asyncio.to_thread(self._post, self.body(ctx, t_max_predict_ms))
        finally:
            self.in_flight -= 1
        self.requests += 1
        self.model_ms += reply.get("timings/prompt_ms", 0.0) + reply.get("timings/predicted_ms", 0.0)
        return reply.get("content", "")

    def _post(self, body: dict) -> dict:
        request = urllib.request.Request(f"{self.url}/infill", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError) as error:
            raise ConnectionError(f"llama-server at {self.url} failed an /infill request: {error}") from None


@dataclass
class Editor:
    """One buffer being typed into, with llama.vim's job, retry timer and result cache."""
    server: LlamaServer
    cache: dict[str, str] = field(default_factory=dict)   # shared by every passage, as llama.vim's is global
    before: str = ""
    after: str = ""
    sent: Keystroke | None = None      # the current key's record: where a suggestion shown now is counted
    shown: str | None = None
    job: asyncio.Task | None = None
    retry: asyncio.TimerHandle | None = None
    failure: Exception | None = None

    def moved(self, before: str, after: str, sent: Keystroke | None) -> None:
        """A key was typed (CursorMovedI): show what the cache has, then ask for this place."""
        self.before, self.after, self.sent, self.shown = before, after, sent, None
        self.try_hint()
        self.fim()

    def fim(self, speculative: str | None = None, at: tuple[str, str] | None = None) -> None:
        """llama#fim: ask for the cursor (or, speculative, for `at` with the suggestion inserted)."""
        if self.job is not None:  # one at a time: ask again soon, the newest ask replacing this one
            if self.retry is not None:
                self.retry.cancel()
            self.retry = asyncio.get_running_loop().call_later(RETRY_S, self.fim, speculative, at)
            return
        self.retry = None
        before, after = at or (self.before, self.after)
        ctx = context(before + (speculative or ""), after)
        if ctx.key in self.cache:
            return
        limit = T_MAX_PREDICT_MS if speculative is None else T_MAX_PREDICT_SPECULATIVE_MS
        self.job = asyncio.ensure_future(self._ask(ctx, limit))

    async def _ask(self, ctx: Context, limit_ms: int) -> None:
        try:
            content = await self.server.infill(ctx, limit_ms)
        except ConnectionError as error:
            self.failure = error
            return
        finally:
            self.job = None
        if content:
            self.remember(ctx, content)
        if self.shown is None:
            self.try_hint()

    def remember(self, ctx: Context, content: str) -> None:
        if len(self.cache) >= CACHE_ENTRIES:
            del self.cache[next(iter(self.cache))]
        self.cache[ctx.key] = content

    def try_hint(self) -> None:
        """fim_try_hint: show the cache's suggestion for the cursor, and ask for what follows it."""
        ctx = context(self.before, self.after)
        content = lookup(self.cache, ctx)
        text = render(content, ctx) if content is not None else ""
        if not text.strip():
            return
        self.shown = text
        if self.sent is not None and self.sent.answered_at is None:
            self.sent.answered_at, self.sent.text = time.perf_counter(), text
        self.fim(speculative=text, at=(self.before, self.after))

    async def settle(self, timeout_s: float) -> None:
        """Wait until no request runs and no retry is due (typing is over)."""
        deadline = time.perf_counter() + timeout_s
        while (self.job is not None or self.retry is not None) and time.perf_counter() < deadline:
            await asyncio.sleep(0.05)  # a retry that fires either asks (a job) or clears itself
